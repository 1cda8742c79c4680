// The layering is enforced by the build: the purity check that
// actors/model's library depends on refuses any include of the actor
// framework, the storage engine or gRPC.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fixtures/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

int purity_check(const fs::path& dir, const fs::path& stamp) {
  std::string cmd = "bash '" RECOVERD_SOURCE_DIR "/scripts/check_model_purity.sh' '"
                    + dir.string() + "' '" + stamp.string() + "' 2>/dev/null";
  return std::system(cmd.c_str());
}

} // namespace

TEST_CASE("the pure model passes its purity check and fails it once it "
          "includes CAF, RocksDB or gRPC") {
  recoverd::test::temp_dir tmp;
  auto model = tmp.path() / "model";
  fs::copy(RECOVERD_SOURCE_DIR "/actors/model", model,
           fs::copy_options::recursive);
  CHECK(purity_check(model, tmp.path() / "ok.stamp") == 0);
  CHECK(fs::exists(tmp.path() / "ok.stamp"));
  for (const char* include : {"#include <caf/all.hpp>",
                              "#include <rocksdb/db.h>",
                              "#include <grpcpp/grpcpp.h>",
                              "#  include \"actors/job.hpp\""}) {
    CAPTURE(include);
    {
      std::ofstream out{model / "machines" / "leak.hpp"};
      out << "#pragma once\n" << include << "\n";
    }
    auto stamp = tmp.path() / "leak.stamp";
    CHECK(purity_check(model, stamp) != 0);
    CHECK_FALSE(fs::exists(stamp));
  }
}
