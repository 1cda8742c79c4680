#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <string>

#include "actors/model/job_model.hpp"
#include "tools/dst/sim.hpp"

using namespace recoverd;

namespace {

std::string explain(const dst::schedule& s, const dst::outcome& o) {
  if (!o.failure)
    return "";
  return o.failure->invariant + " at step " + std::to_string(o.failure->step)
    + ": " + o.failure->what + "\n" + dst::describe(dst::shrink(s));
}

} // namespace

TEST_CASE("dst: a few hundred seeded schedules keep every invariant") {
  auto start = std::chrono::steady_clock::now();
  size_t steps = 0;
  size_t flows = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    auto s = dst::make_schedule(seed, 120);
    auto o = dst::run(s);
    REQUIRE_MESSAGE(!o.failure, explain(s, o));
    steps += o.steps;
    flows += o.flows;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - start)
              .count();
  MESSAGE("300 schedules, " << steps << " steps, " << flows << " flows ended, "
                            << ms << " ms");
  CHECK(steps == size_t{300 * 120});
  // The schedules get somewhere: flows start and end.
  CHECK(flows > size_t{300});
}

TEST_CASE("dst: a schedule is a function of its seed") {
  auto a = dst::make_schedule(42, 80);
  auto b = dst::make_schedule(42, 80);
  CHECK(dst::describe(a) == dst::describe(b));
  dst::run_options traced;
  traced.trace = true;
  CHECK(dst::run(a, traced).trace == dst::run(b, traced).trace);
  CHECK(dst::describe(a) != dst::describe(dst::make_schedule(43, 80)));
}

TEST_CASE("dst: a corrupted replay is caught and shrunk") {
  // Every crash-restart reads the reset document's check code of each flow
  // step wrongly: the replayed job differs from the live one.
  std::optional<dst::schedule> failing;
  for (uint64_t seed = 1; seed <= 50 && !failing; ++seed) {
    auto s = dst::make_schedule(seed, 150);
    dst::run_options opts;
    opts.tamper_replay = [](event& ev) {
      if (auto* x = std::get_if<flow_stepped>(&ev.body))
        if (x->change.replaces(recovery_field::reset_check))
          x->change.values.job.reset_check += "0";
      return true;
    };
    auto o = dst::run(s, opts);
    if (o.failure) {
      failing = s;
      REQUIRE(o.failure->invariant == "replay");
      auto small = dst::shrink(s, opts);
      auto again = dst::run(small, opts);
      REQUIRE(again.failure);
      CHECK(again.failure->invariant == "replay");
      CHECK(small.steps.size() < s.steps.size());
      MESSAGE("corrupted replay caught in seed " << seed << ", shrunk from "
                                                 << s.steps.size() << " to "
                                                 << small.steps.size()
                                                 << " steps: "
                                                 << again.failure->what);
    }
  }
  CHECK(failing.has_value());
}

TEST_CASE("dst: a lost acknowledged event is caught at restart") {
  bool caught = false;
  for (uint64_t seed = 1; seed <= 50 && !caught; ++seed) {
    auto s = dst::make_schedule(seed, 150);
    dst::run_options opts;
    // The replay drops every device-fault snapshot: the events exist in the
    // log but are lost to the restarted job.
    opts.tamper_replay = [](event& ev) {
      return !std::holds_alternative<device_faults_reported>(ev.body);
    };
    auto o = dst::run(s, opts);
    if (o.failure) {
      caught = true;
      CHECK((o.failure->invariant == "durability"
             || o.failure->invariant == "replay"));
    }
  }
  CHECK(caught);
}

TEST_CASE("dst: a fabricated violation is shrunk to the steps that cause it") {
  // "The job never waits for a recover strategy" is false for any schedule
  // that gets a flow that far; the shrunk schedule keeps only what it takes:
  // a fault, the stopTrain delivery, the stop report and the globalFault
  // delivery (plus waits that must fire in between for some configurations).
  dst::run_options opts;
  opts.extra_check = [](const job_model& m) {
    return m.rec.flow.state == flow_state::wait_recover_strategy
             ? std::string{"reached WaitRecoverStrategy"}
             : std::string{};
  };
  bool caught = false;
  for (uint64_t seed = 1; seed <= 40 && !caught; ++seed) {
    auto s = dst::make_schedule(seed, 200);
    auto o = dst::run(s, opts);
    if (!o.failure)
      continue;
    caught = true;
    CHECK(o.failure->invariant == "extra");
    auto small = dst::shrink(s, opts);
    auto again = dst::run(small, opts);
    REQUIRE(again.failure);
    CHECK(again.failure->invariant == "extra");
    // Minimal: no single step can be dropped.
    for (size_t i = 0; i < small.steps.size(); ++i) {
      auto fewer = small;
      fewer.steps.erase(fewer.steps.begin() + static_cast<std::ptrdiff_t>(i));
      auto o2 = dst::run(fewer, opts);
      CHECK_FALSE((o2.failure && o2.failure->invariant == "extra"));
    }
    CHECK(small.steps.size() <= size_t{8});
    MESSAGE("seed " << seed << ": " << o.failure->step + 1 << " steps shrunk to "
                    << small.steps.size() << "\n"
                    << dst::describe(small));
  }
  CHECK(caught);
}

TEST_CASE("dst: first_difference names the differing field") {
  job_model a;
  a.spec.job_id = "j";
  auto b = a;
  CHECK(dst::first_difference(a, b).empty());
  b.rec.flow.uuid = "u";
  CHECK(dst::first_difference(a, b) == "rec.flow.uuid");
  b = a;
  b.seq = 3;
  CHECK(dst::first_difference(a, b) == "seq");
  b = a;
  b.spec.pods.push_back({});
  CHECK(dst::first_difference(a, b) == "spec.pods (count)");
}
