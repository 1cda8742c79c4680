// The deterministic simulation of the job actor (tools/dst --actor): a
// short run of seeded schedules, and the checker catching what it must.

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "actors/log.hpp"
#include "tools/dst/actor_sim.hpp"

using namespace recoverd;

namespace {

std::string explain(const dst::schedule& s, const dst::outcome& o) {
  if (!o.failure)
    return "";
  return o.failure->invariant + " at step " + std::to_string(o.failure->step)
    + ": " + o.failure->what + "\n" + dst::describe(s);
}

// The actors log every flow step at info.
struct quiet_logs {
  quiet_logs() {
    configure_logging("error", "text");
  }
  ~quiet_logs() {
    configure_logging("info", "text");
  }
};

} // namespace

TEST_CASE("dst --actor: seeded schedules keep every invariant on the job "
          "actor") {
  quiet_logs quiet;
  auto start = std::chrono::steady_clock::now();
  size_t steps = 0;
  size_t flows = 0;
  constexpr uint64_t schedules = 12;
  for (uint64_t seed = 1; seed <= schedules; ++seed) {
    auto s = dst::make_schedule(seed, 100);
    auto o = dst::run_actor(s);
    REQUIRE_MESSAGE(!o.failure, explain(s, o));
    steps += o.steps;
    flows += o.flows;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - start)
              .count();
  MESSAGE(schedules << " schedules, " << steps << " steps, " << flows
                    << " flows ended, " << ms << " ms");
  CHECK(steps == size_t{schedules * 100});
  // The schedules get somewhere: flows start and end.
  CHECK(flows > size_t{schedules});
}

TEST_CASE("dst --actor: a seed replays the same run") {
  quiet_logs quiet;
  auto s = dst::make_schedule(7, 60);
  dst::run_options traced;
  traced.trace = true;
  auto a = dst::run_actor(s, traced);
  auto b = dst::run_actor(s, traced);
  CHECK(a.trace == b.trace);
  CHECK(a.trace.size() == size_t{61});
}

TEST_CASE("dst --actor: a fold of the log that differs from the live job is "
          "caught") {
  quiet_logs quiet;
  // The checker reads every flow step's reset check code wrongly.
  dst::run_options opts;
  opts.tamper_replay = [](event& ev) {
    if (auto* x = std::get_if<flow_stepped>(&ev.body))
      if (x->change.replaces(recovery_field::reset_check))
        x->change.values.job.reset_check += "0";
    return true;
  };
  bool caught = false;
  for (uint64_t seed = 1; seed <= 20 && !caught; ++seed) {
    auto o = dst::run_actor(dst::make_schedule(seed, 100), opts);
    if (o.failure) {
      caught = true;
      CHECK(o.failure->invariant == "replay");
      MESSAGE("seed " << seed << ": " << o.failure->what);
    }
  }
  CHECK(caught);
}

TEST_CASE("dst --actor: acknowledged state lost at a restart is caught") {
  quiet_logs quiet;
  // The restart forgets the job's registration.
  dst::actor_options aopts;
  aopts.tamper_restart = [](job_model& m) { m.registered = false; };
  bool caught = false;
  for (uint64_t seed = 1; seed <= 20 && !caught; ++seed) {
    auto o = dst::run_actor(dst::make_schedule(seed, 100), {}, aopts);
    if (o.failure) {
      caught = true;
      CHECK(o.failure->invariant == "durability");
      MESSAGE("seed " << seed << ": " << o.failure->what);
    }
  }
  CHECK(caught);
}
