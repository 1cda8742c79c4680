// dst: deterministic simulation of the job model (issue 11). Runs seeded
// random schedules through the real `decide` / `apply` with crash-restarts
// replayed from the encoded log, checks the invariants after every step,
// and on a violation prints the seed, a shrunk schedule and its trace.
//
// The last line is always `N schedules, M steps, V violations`; the exit
// status is 1 when V > 0.

#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/log.hpp"
#include "tools/dst/actor_sim.hpp"
#include "tools/dst/sim.hpp"

using namespace recoverd;

namespace {

// Schedule `i` of a run with base seed `seed`: spread, so that neighbouring
// runs do not share schedules.
uint64_t schedule_seed(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void report_failure(const dst::schedule& s, const dst::outcome& o,
                    const dst::runner& run) {
  const auto& v = *o.failure;
  std::printf("VIOLATION of %s at step %zu of schedule seed %llu:\n  %s\n",
              v.invariant.c_str(), v.step,
              static_cast<unsigned long long>(s.seed), v.what.c_str());
  std::fflush(stdout);
  auto small = dst::shrink(s, {}, run);
  dst::run_options traced;
  traced.trace = true;
  auto replay = run(small, traced);
  std::printf("minimal schedule (%zu of %zu steps), reproduce with "
              "--seed-exact %llu:\n%s",
              small.steps.size(), s.steps.size(),
              static_cast<unsigned long long>(s.seed),
              dst::describe(small).c_str());
  std::printf("trace:\n");
  for (const auto& line : replay.trace)
    std::printf("  %s\n", line.c_str());
  if (replay.failure)
    std::printf("shrunk failure: %s at step %zu: %s\n",
                replay.failure->invariant.c_str(), replay.failure->step,
                replay.failure->what.c_str());
}

} // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t exact = 0;
  size_t schedules = 1'000;
  size_t steps = 200;
  double seconds = 0;
  bool trace = false;
  bool actor = false;
  CLI::App cli{"dst: deterministic simulation of the recoverd job model"};
  cli.set_version_flag("--version", std::string{"dst "} + RECOVERD_VERSION);
  cli.add_flag("--actor", actor,
               "drive the job actor (registry, journal, event log under the "
               "deterministic test coordinator) instead of the pure model");
  cli.add_option("--seed", seed, "base seed of the run")->capture_default_str();
  cli.add_option("--seed-exact", exact,
                 "run only the schedule of this seed (as a violation prints "
                 "it)");
  cli.add_option("--schedules", schedules, "schedules to run")
    ->capture_default_str();
  cli.add_option("--steps-per-schedule", steps, "steps in each schedule")
    ->capture_default_str();
  cli.add_option("--seconds", seconds,
                 "run schedules until this much wall time has passed (instead "
                 "of --schedules)");
  cli.add_flag("--trace", trace, "print the trace of every schedule run");
  CLI11_PARSE(cli, argc, argv);
  // The actors' log lines would drown the one summary line.
  configure_logging("error", "text");

  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                         - start)
      .count();
  };
  size_t done = 0;
  size_t total_steps = 0;
  size_t violations = 0;
  dst::run_options opts;
  opts.trace = trace;
  dst::runner run = [actor](const dst::schedule& x,
                            const dst::run_options& o) {
    return actor ? dst::run_actor(x, o) : dst::run(x, o);
  };
  for (uint64_t i = 0;; ++i) {
    if (exact != 0 ? i >= 1
                   : seconds > 0 ? elapsed() >= seconds : i >= schedules)
      break;
    auto s = dst::make_schedule(exact != 0 ? exact : schedule_seed(seed, i),
                                steps);
    auto o = run(s, opts);
    for (const auto& line : o.trace)
      std::printf("%s\n", line.c_str());
    ++done;
    total_steps += o.steps;
    if (o.failure) {
      ++violations;
      report_failure(s, o, run);
      break;
    }
  }
  std::fprintf(stderr, "dst: %.1f s\n", elapsed());
  std::printf("%zu schedules, %zu steps, %zu violations\n", done, total_steps,
              violations);
  return violations == 0 ? 0 : 1;
}
