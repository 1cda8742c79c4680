// The fleet's node registry as a pure model: scores and their decay at
// known times, the quarantine threshold, stress isolation, the operator's
// clear, bounded memory per node, and what a job's events say about its
// nodes.

#include <doctest/doctest.h>

#include "actors/model/job_model.hpp"
#include "actors/model/node_registry.hpp"
#include "fixtures/jobs.hpp"

using namespace recoverd;

namespace {

constexpr int64_t hour = 3'600'000;

node_table table_of(double threshold = 3.0, int64_t half_life = hour,
                    size_t recent = 16) {
  node_table t;
  t.cfg.quarantine_score = threshold;
  t.cfg.half_life_ms = half_life;
  t.cfg.max_recent_faults = recent;
  return t;
}

node_event fault(const std::string& node, const std::string& level,
                 int64_t at, const std::string& job = "jobA") {
  node_fault f;
  f.source = node_fault_source::fault_center;
  f.job_id = job;
  f.device = "0";
  f.codes = {"80C98009"};
  f.level = level;
  f.time_ms = at;
  return node_fault_seen{node, std::move(f)};
}

const node_record& record(const node_table& t, const std::string& node) {
  auto i = t.nodes.find(node);
  REQUIRE(i != t.nodes.end());
  return i->second;
}

} // namespace

TEST_CASE("node registry: a score halves every half-life, read at known "
          "times") {
  auto t = table_of();
  t = recoverd::apply(t, fault("x", "RestartNPU", 0));
  t = recoverd::apply(t, fault("x", "RestartNPU", 0));
  const auto& r = record(t, "x");
  CHECK(score_at(r, 0, t.cfg) == doctest::Approx(2.0));
  CHECK(score_at(r, hour, t.cfg) == doctest::Approx(1.0));
  CHECK(score_at(r, 2 * hour, t.cfg) == doctest::Approx(0.5));
  MESSAGE("a later fault adds to the decayed score");
  t = recoverd::apply(t, fault("x", "RestartNPU", hour));
  CHECK(score_at(record(t, "x"), hour, t.cfg) == doctest::Approx(2.0));
  CHECK(record(t, "x").faults == 3);
  MESSAGE("the listing reads the score at the time asked");
  auto l = list(t, 2 * hour);
  REQUIRE(l.nodes.size() == 1);
  CHECK(l.nodes[0].score == doctest::Approx(1.0));
  CHECK(l.threshold == 3.0);
  CHECK(l.half_life_ms == hour);
}

TEST_CASE("node registry: weights by level; the threshold quarantines and "
          "decay below it does not release") {
  auto t = table_of();
  CHECK(fault_weight(std::get<node_fault_seen>(fault("x", "SeparateNPU", 0))
                       .fault)
        == 3.0);
  CHECK(fault_weight(std::get<node_fault_seen>(fault("x", "SubHealthFault", 0))
                       .fault)
        == 0.25);
  t = recoverd::apply(t, fault("x", "RestartNPU", 0));
  t = recoverd::apply(t, fault("x", "RestartNPU", 0));
  CHECK_FALSE(record(t, "x").quarantined());
  MESSAGE("two faults decayed for a half-life plus two more: 1 + 2 = 3");
  t = recoverd::apply(t, fault("x", "RestartNPU", hour));
  CHECK_FALSE(record(t, "x").quarantined());
  t = recoverd::apply(t, fault("x", "RestartNPU", hour, "jobB"));
  CHECK(record(t, "x").quarantined());
  CHECK(record(t, "x").reason == quarantine_reason::score);
  CHECK(record(t, "x").since_ms == hour);
  CHECK(record(t, "x").last_job_id == "jobB");
  MESSAGE("a day later the score is near 0, the quarantine holds");
  auto later = list(t, 25 * hour);
  CHECK(later.nodes[0].score < 0.001);
  CHECK(later.nodes[0].reason == quarantine_reason::score);
  CHECK(count(t).quarantined == 1);
  CHECK(list(t, 0, true).nodes.size() == 1);
  MESSAGE("three chip restarts a second apart reach 3, though the first "
          "ones decayed a little");
  t = recoverd::apply(t, fault("z", "RestartNPU", 0));
  t = recoverd::apply(t, fault("z", "RestartNPU", 1000));
  t = recoverd::apply(t, fault("z", "RestartNPU", 2000));
  CHECK(score_at(record(t, "z"), 2000, t.cfg) < 3.0);
  CHECK(record(t, "z").quarantined());
  MESSAGE("one device separation alone reaches the default threshold");
  t = recoverd::apply(t, fault("y", "SeparateNPU", 0));
  CHECK(record(t, "y").quarantined());
}

TEST_CASE("node registry: a stress test isolating a node quarantines it at "
          "once; a passed one only counts") {
  auto t = table_of(100.0);
  t = recoverd::apply(t, node_stress_verdict{"x", "jobA", false, false, "0", 10});
  CHECK(record(t, "x").stress_tests == 1);
  CHECK(record(t, "x").faults == 0);
  CHECK_FALSE(record(t, "x").quarantined());
  t = recoverd::apply(t, node_stress_verdict{"x", "jobA", true, true, "2", 20});
  CHECK(record(t, "x").quarantined());
  CHECK(record(t, "x").reason == quarantine_reason::stress_test);
  CHECK(record(t, "x").stress_failures == 1);
  CHECK(record(t, "x").faults == 1);
  CHECK(record(t, "x").since_ms == 20);
  MESSAGE("a rank fault found by a stress test is a fault, not an isolation");
  t = recoverd::apply(t, node_stress_verdict{"y", "jobA", false, true, "3", 30});
  CHECK_FALSE(record(t, "y").quarantined());
  CHECK(record(t, "y").stress_failures == 1);
}

TEST_CASE("node registry: an operator's clear ends the quarantine and the "
          "score, keeps the counts; an unknown node has nothing to clear") {
  auto t = table_of();
  t = recoverd::apply(t, fault("x", "SeparateNPU", 0));
  REQUIRE(record(t, "x").quarantined());
  CHECK_FALSE(decide_clear(t, "nope", "op", 5));
  auto ev = decide_clear(t, "x", "op", 5);
  REQUIRE(ev);
  t = recoverd::apply(t, *ev);
  const auto& r = record(t, "x");
  CHECK_FALSE(r.quarantined());
  CHECK(score_at(r, 5, t.cfg) == 0.0);
  CHECK(r.faults == 1);
  CHECK(r.cleared_by == "op");
  CHECK(r.cleared_ms == 5);
  CHECK(count(t).quarantined == 0);
  CHECK(count(t).tracked == 1);
  MESSAGE("a second clear has nothing to clear");
  CHECK_FALSE(decide_clear(t, "x", "op", 6));
  MESSAGE("after a clear the node is quarantined again only by new faults");
  t = recoverd::apply(t, fault("x", "RestartNPU", 6));
  CHECK_FALSE(record(t, "x").quarantined());
}

TEST_CASE("node registry: memory per node is bounded; counts keep "
          "counting") {
  auto t = table_of(1e9, hour, 4);
  for (int i = 0; i < 100; ++i)
    t = recoverd::apply(t, fault("x", "RestartNPU", i));
  const auto& r = record(t, "x");
  CHECK(r.faults == 100);
  REQUIRE(r.recent.size() == 4);
  CHECK(r.recent.front().time_ms == 96);
  CHECK(r.recent.back().time_ms == 99);
  CHECK(r.last_fault_ms == 99);
}

TEST_CASE("node registry: bad configuration is refused by name") {
  node_registry_config cfg;
  CHECK_FALSE(validate(cfg));
  cfg.half_life_ms = 0;
  CHECK(validate(cfg).message().find("node-score-half-life")
        != std::string::npos);
  cfg = {};
  cfg.quarantine_score = -1;
  CHECK(validate(cfg).message().find("node-quarantine-score")
        != std::string::npos);
}

TEST_CASE("node registry: observations come from a job's events, resolved "
          "through its topology") {
  job_model m;
  m = apply(m, event{1, 100, job_put{test::make_job("jobA"), true}});
  REQUIRE(m.exists);
  SUBCASE("a fault-center snapshot counts only entries new to the job") {
    device_faults_reported first;
    first.faults = {{"n1", "3", {"c1"}, "RestartNPU"}};
    auto xs = observe(m, event{2, 200, first});
    REQUIRE(xs.size() == 1);
    const auto& seen = std::get<node_fault_seen>(xs[0]);
    CHECK(seen.node == "n1");
    CHECK(seen.fault.device == "3");
    CHECK(seen.fault.job_id == "jobA");
    CHECK(seen.fault.time_ms == 200);
    CHECK(seen.fault.source == node_fault_source::fault_center);
    m = apply(m, event{2, 200, first});
    auto second = first;
    second.faults.push_back({"n0", "", {"c2"}, "NormalNPU"});
    second.faults.push_back({"n0", "1", {"c3"}, "SeparateNPU"});
    xs = observe(m, event{3, 300, second});
    REQUIRE(xs.size() == 1);
    CHECK(std::get<node_fault_seen>(xs[0]).node == "n0");
    CHECK(std::get<node_fault_seen>(xs[0]).fault.level == "SeparateNPU");
  }
  SUBCASE("an agent's fault report names ranks: their nodes") {
    flow_stepped step;
    step.input.name = flow_event::fault_occur;
    step.input.kind = report_kind::process;
    step.input.faults = {{"9", "1"}, {"1", "0"}, {"999", "1"}};
    auto xs = observe(m, event{2, 200, step});
    REQUIRE(xs.size() == 2);
    CHECK(std::get<node_fault_seen>(xs[0]).node == "n1");
    CHECK(std::get<node_fault_seen>(xs[0]).fault.device == "1");
    CHECK(std::get<node_fault_seen>(xs[1]).node == "n0");
    CHECK(std::get<node_fault_seen>(xs[1]).fault.source
          == node_fault_source::agent_report);
    MESSAGE("the same ranks again while the flow runs count once per flow");
    m.rec.flow.state = flow_state::wait_recover_strategy;
    m.rec.flow.faults = {{"9", fault_type::uce}, {"1", fault_type::normal}};
    flow_stepped again;
    again.input.name = flow_event::fault_absorbed;
    again.input.kind = report_kind::process;
    again.input.faults = {{"9", "1"}, {"2", "0"}, {"2", "0"}, {"1", "0"}};
    xs = observe(m, event{3, 300, again});
    REQUIRE(xs.size() == 1);
    CHECK(std::get<node_fault_seen>(xs[0]).fault.device == "2");
  }
  SUBCASE("a stress result gives one verdict per node, the worst code") {
    flow_stepped step;
    step.input.kind = report_kind::stress;
    step.input.stress_result["0"]["0"].code = "0";
    step.input.stress_result["1"]["1"].code = "3";
    step.input.stress_result["8"]["0"].code = "4";
    step.input.stress_result["9"]["0"].code = "2";
    auto xs = observe(m, event{2, 200, step});
    REQUIRE(xs.size() == 2);
    const auto& n0 = std::get<node_stress_verdict>(xs[0]);
    const auto& n1 = std::get<node_stress_verdict>(xs[1]);
    CHECK(n0.node == "n0");
    CHECK(n0.code == "3");
    CHECK(n0.failed);
    CHECK_FALSE(n0.isolated);
    CHECK(n1.node == "n1");
    CHECK(n1.code == "2");
    CHECK(n1.isolated);
  }
  SUBCASE("other events say nothing about nodes") {
    CHECK(observe(m, event{2, 200, job_deleted{}}).empty());
  }
}
