// A short fuzz run of the test command (tools/fuzz runs long ones): the
// corpus in tests/fuzz/corpus, mutated with fixed seeds, against the event
// decoder, every unary RPC of an in-process daemon and its HTTP router.

#include <doctest/doctest.h>

#include "fuzz.hpp"

using namespace recoverd::fuzz;

namespace {

void run_short(const std::string& target, size_t iterations, uint64_t seed) {
  options opts;
  opts.corpus = RECOVERD_CORPUS_DIR;
  opts.target = target;
  opts.iterations = iterations;
  opts.seed = seed;
  auto reports = run(opts);
  REQUIRE(reports.size() == 1);
  const auto& r = reports.front();
  MESSAGE(r.target << ": " << r.inputs << " inputs, " << r.accepted
                   << " accepted, " << r.seconds << " s");
  CHECK(r.inputs == iterations);
  // Some inputs must get through, or the mutations only test the parser.
  CHECK(r.accepted > 0);
  for (const auto& f : r.findings)
    FAIL_CHECK(f);
  CHECK(r.findings.empty());
}

} // namespace

TEST_CASE("fuzz: damaged event and snapshot records decode or fail cleanly, "
          "and what decodes round-trips") {
  run_short("events", 20'000, 11);
}

TEST_CASE("fuzz: mutated requests to every unary RPC are answered, never "
          "with INTERNAL, UNKNOWN or a timeout") {
  run_short("grpc", 1'500, 12);
}

TEST_CASE("fuzz: mutated HTTP targets are answered, never with a 5xx") {
  run_short("http", 800, 13);
}
