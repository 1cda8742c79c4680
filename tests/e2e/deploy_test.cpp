// The deploy files (Dockerfile, Kubernetes manifests, systemd unit, example
// configuration) checked against the daemon, and `meson install`.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;

TEST_CASE("e2e deploy: the deploy files agree with the daemon's flags, ports "
          "and probes") {
  // Neither docker nor a Kubernetes API server runs here: the files are
  // parsed and compared (tests/deploy/check_deploy.py says what).
  auto [rc, out] = run_command(std::string{"/usr/bin/python3 "}
                               + RECOVERD_SOURCE_DIR
                               + "/tests/deploy/check_deploy.py "
                               + RECOVERD_SOURCE_DIR + " " + RECOVERD_BIN);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("check_deploy: 0 failed checks") != std::string::npos);
}

TEST_CASE("e2e deploy: meson install puts the binaries in place") {
  temp_dir dir;
  auto build = std::filesystem::path{RECOVERD_BIN}.parent_path().string();
  auto [rc, out] = run_command("meson install -C " + build
                               + " --no-rebuild --quiet --destdir "
                               + (dir / "root"));
  INFO(out);
  REQUIRE(rc == 0);
  for (const char* bin : {"recoverd", "recoverctl", "recoverd-sim"}) {
    auto path = (dir / "root") + "/usr/local/bin/" + bin;
    CHECK_MESSAGE(std::filesystem::exists(path), path);
    auto [vrc, version] = run_command(path + " --version");
    CHECK(vrc == 0);
    CHECK(version.find(RECOVERD_VERSION) != std::string::npos);
  }
  MESSAGE("the adapter, its generated modules beside it");
  auto root = (dir / "root") + "/usr/local";
  CHECK(std::filesystem::exists(root + "/bin/recoverd-kube"));
  for (const char* module : {"recoverd_kube.py", "translate.py", "platform_pb2.py",
                             "inspect_pb2.py", "events_pb2.py",
                             "recover_pb2.py"})
    CHECK_MESSAGE(std::filesystem::exists(root + "/share/recoverd/python/"
                                          + module),
                  module);
  // The launcher finds them where they are installed (with DESTDIR the
  // prefix moves, so its --version is run with the moved path).
  auto [krc, kversion] = run_command(
    "PYTHONPATH=" + root + "/share/recoverd/python /usr/bin/python3 " + root
    + "/bin/recoverd-kube --version");
  CHECK(krc == 0);
  CHECK(kversion.find(RECOVERD_VERSION) != std::string::npos);
}
