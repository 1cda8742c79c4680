// The fault center's input gates (spec §3.4, reference §4.1): levels,
// computed health, node-level faults, entry-by-entry validation, stale pod
// uids. Pure: the job model only.

#include <doctest/doctest.h>

#include <algorithm>

#include "actors/error.hpp"
#include "actors/model/fault_center.hpp"
#include "actors/model/job_model.hpp"
#include "fixtures/jobs.hpp"

using namespace recoverd;

namespace {

job_model step(job_model m, const command& cmd) {
  auto d = decide(m, cmd);
  REQUIRE_MESSAGE(d, (d ? "" : message_of(d.error())));
  for (auto& body : d->events)
    m = apply(m, event{m.seq + 1, 1000 + static_cast<int64_t>(m.seq), body});
  return m;
}

job_model registered(job_spec spec) {
  job_model m;
  auto id = spec.job_id;
  m = step(m, put_cmd{std::move(spec)});
  m = step(m, init_cmd{{id, "taskd", "p"}});
  return step(m, register_cmd{{id, "taskd", "p"}});
}

// A 2x8 job "j" (pods j-pod-0 on n0, j-pod-1 on n1) with `strategies`.
job_model registered_job(std::vector<std::string> strategies
                         = {"recover", "dump"}) {
  auto spec = test::make_job("j");
  spec.recover_strategies = std::move(strategies);
  return registered(std::move(spec));
}

// A snapshot as the job actor sends it: with the stamps of the flow step
// it may cause.
faults_cmd snapshot(std::string health, std::vector<device_fault> faults) {
  faults_cmd cmd{{"j", std::move(health), std::move(faults)}};
  cmd.then = flow_input{};
  cmd.then->now_ms = 5000;
  cmd.then->fresh_uuid = "uuid-1";
  return cmd;
}

const flow_stepped* flow_step_of(const decision& d) {
  for (const auto& e : d.events)
    if (const auto* x = std::get_if<flow_stepped>(&e))
      return x;
  return nullptr;
}

std::vector<std::string> ranks_of(const std::vector<fault_rank>& xs) {
  std::vector<std::string> result;
  for (const auto& x : xs)
    result.push_back(x.rank_id);
  return result;
}

} // namespace

TEST_CASE("fault levels: NotHandleFault, PreSeparateNPU and NormalNPU start "
          "nothing; an unknown level is skipped and named") {
  auto m = registered_job();
  auto d = decide(m, snapshot("UnHealthy",
                              {{"n1", "0", {"81078603"}, "NotHandleFault"},
                               {"n1", "1", {"81078603"}, "PreSeparateNPU"},
                               {"n1", "2", {"81078603"}, "NormalNPU"},
                               {"n1", "3", {"81078603"}, "Bogus"}}));
  REQUIRE(d);
  CHECK(flow_step_of(*d) == nullptr);
  CHECK(d->ignored
        == std::vector<std::string>{
          R"(faults[3]: unknown fault level "Bogus")"});
  MESSAGE("recorded: the two valid faults, without the no-fault entry");
  REQUIRE(d->events.size() == 1);
  const auto& recorded = std::get<device_faults_reported>(d->events[0]);
  REQUIRE(recorded.faults.size() == 2);
  CHECK(recorded.faults[0].fault_level == "NotHandleFault");
  CHECK(recorded.faults[1].fault_level == "PreSeparateNPU");
  m = step(m, snapshot("UnHealthy",
                       {{"n1", "0", {"81078603"}, "NotHandleFault"},
                        {"n1", "1", {"81078603"}, "PreSeparateNPU"}}));
  MESSAGE("a restart-level fault next to them: only it is raised");
  d = decide(m, snapshot("UnHealthy",
                         {{"n1", "0", {"81078603"}, "NotHandleFault"},
                          {"n1", "1", {"81078603"}, "PreSeparateNPU"},
                          {"n1", "4", {"81078603"}, "RestartBusiness"}}));
  REQUIRE(d);
  const auto* s = flow_step_of(*d);
  REQUIRE(s != nullptr);
  CHECK(s->input.name == ev::pre_exit);
  CHECK(ranks_of(s->input.faults) == std::vector<std::string>{"12"});
  CHECK(d->ignored.empty());
  MESSAGE("the empty level of older callers is a plain fault");
  d = decide(m, snapshot("UnHealthy", {{"n1", "5", {"81078603"}, ""}}));
  REQUIRE(d);
  REQUIRE(flow_step_of(*d) != nullptr);
  CHECK(ranks_of(flow_step_of(*d)->input.faults)
        == std::vector<std::string>{"13"});
}

TEST_CASE("fault levels: SubHealthFault counts only while the job is "
          "SubHealthy") {
  auto spec = test::make_job("j");
  spec.recover_strategies = {"dump"};
  spec.sub_healthy_strategy = "graceExit"; // dump-only: the gate lets it by
  auto init = make_init_config(spec);
  std::vector<device_fault> sub{{"n1", "0", {"X"}, "SubHealthFault"}};
  auto unhealthy = fault_center_input({}, spec, init, {}, sub, "UnHealthy");
  CHECK(unhealthy.first == ev::none);
  CHECK(unhealthy.second.empty());
  auto subhealthy = fault_center_input({}, spec, init, {}, sub, "SubHealthy");
  CHECK(subhealthy.first == ev::pre_exit);
  CHECK(ranks_of(subhealthy.second) == std::vector<std::string>{"8"});
  MESSAGE("it counted in the previous snapshot only if that was SubHealthy");
  auto again = fault_center_input({}, spec, init, sub, sub, "SubHealthy",
                                  nullptr, "UnHealthy");
  CHECK(again.first == ev::pre_exit);
  again = fault_center_input({}, spec, init, sub, sub, "SubHealthy", nullptr,
                             "SubHealthy");
  CHECK(again.first == ev::none);
  MESSAGE("with a real fault beside it the job is UnHealthy: the real one only");
  auto m = registered(spec);
  auto d = decide(m, snapshot("", {{"n1", "0", {"X"}, "SubHealthFault"},
                                   {"n0", "2", {"X"}, "RestartRequest"}}));
  REQUIRE(d);
  const auto* s = flow_step_of(*d);
  REQUIRE(s != nullptr);
  CHECK(ranks_of(s->input.faults) == std::vector<std::string>{"2"});
}

TEST_CASE("an empty healthState is computed from the levels kept") {
  struct row {
    std::vector<std::string> levels;
    const char* health;
  };
  std::vector<row> rows = {
    {{}, "Healthy"},
    {{"NotHandleFault"}, "Healthy"},
    {{"PreSeparateNPU", "NormalNPU"}, "Healthy"},
    {{"SubHealthFault"}, "SubHealthy"},
    {{"SubHealthFault", "NotHandleFault"}, "SubHealthy"},
    {{"SubHealthFault", ""}, "UnHealthy"},
    {{"PreSeparateNPU", "RestartRequest"}, "UnHealthy"},
    {{"ManuallySeparateNPU"}, "UnHealthy"},
    {{"Bogus"}, "Healthy"}, // skipped, so it does not count
  };
  for (const auto& r : rows) {
    CAPTURE(r.health);
    std::vector<device_fault> faults;
    for (size_t i = 0; i < r.levels.size(); ++i)
      faults.push_back({"n0", std::to_string(i), {"X"}, r.levels[i]});
    job_model m;
    m = step(m, put_cmd{test::make_job("j")});
    m.health_state = "none yet"; // so that every row records an event
    m = step(m, faults_cmd{{"j", "", faults}});
    CHECK(m.health_state == r.health);
  }
  MESSAGE("an explicit value is kept as given");
  job_model m;
  m = step(m, put_cmd{test::make_job("j")});
  m = step(m, faults_cmd{{"j", "SubHealthy", {{"n0", "0", {"X"}, ""}}}});
  CHECK(m.health_state == "SubHealthy");
  auto bad = decide(m, faults_cmd{{"j", "Sleepy", {}}});
  REQUIRE_FALSE(bad);
  CHECK(message_of(bad.error()).find("healthState") != std::string::npos);
}

TEST_CASE("a node-level fault (empty device id) faults every rank of the "
          "job's pods on its node") {
  auto spec = test::make_job("j", 3, 2);
  // Pods 1 and 2 share node n1.
  spec.pods[2].node_name = "n1";
  spec.pods[2].devices = {{"2", "4"}, {"3", "5"}};
  REQUIRE_FALSE(validate(spec));
  auto m = registered(spec);
  auto d = decide(m, snapshot("UnHealthy", {{"n1", "", {"81078603"}, ""},
                                            {"n9", "", {"81078603"}, ""}}));
  REQUIRE(d);
  CHECK(d->ignored
        == std::vector<std::string>{
          R"(faults[1]: node "n9" runs no pod of the job)"});
  const auto* s = flow_step_of(*d);
  REQUIRE(s != nullptr);
  CHECK(s->input.name == ev::pre_exit);
  CHECK(ranks_of(s->input.faults)
        == std::vector<std::string>{"2", "3", "4", "5"});
  REQUIRE(s->side_signals.size() == 1);
  CHECK(s->side_signals[0].node_rank_ids
        == std::vector<std::string>{"1", "2"});
}

TEST_CASE("per-device validation: an unknown device does not hide the job's "
          "real fault") {
  auto m = registered_job({"retry", "recover", "dump"});
  auto d = decide(m, snapshot("UnHealthy",
                              {{"n1", "9", {"80E01801"}, "RestartBusiness"},
                               {"n1", "0", {"80E01801"}, "RestartBusiness"},
                               {"n1", "1", {}, "RestartBusiness"}}));
  REQUIRE(d);
  CHECK(d->ignored
        == std::vector<std::string>{
          R"(faults[0]: device "9" on node "n1" is not in the job's topology)",
          "faults[2]: no fault codes"});
  REQUIRE(d->events.size() == 2);
  const auto& recorded = std::get<device_faults_reported>(d->events[0]);
  REQUIRE(recorded.faults.size() == 1);
  CHECK(recorded.faults[0].device_id == "0");
  m = step(m, snapshot("UnHealthy",
                       {{"n1", "9", {"80E01801"}, "RestartBusiness"},
                        {"n1", "0", {"80E01801"}, "RestartBusiness"}}));
  MESSAGE("the UCE on rank 8 started a step-retry flow");
  CHECK(m.rec.flow.state != st::init);
  REQUIRE(m.rec.flow.faults.count("8") == 1);
  CHECK(m.rec.flow.faults.at("8") == fault_type::uce);
  CHECK(m.device_faults.size() == 1);
}

TEST_CASE("a fault seen on a pod that has since been replaced is skipped") {
  auto m = registered_job();
  auto d = decide(m, snapshot("UnHealthy",
                              {{"n1", "0", {"81078603"}, "", "old"},
                               {"n1", "", {"81078603"}, "", "old"}}));
  REQUIRE(d);
  CHECK(flow_step_of(*d) == nullptr);
  REQUIRE(d->ignored.size() == 2);
  CHECK(d->ignored[0]
        == R"(faults[0]: pod of node "n1" device "0" was replaced (uid "old" != "j-pod-1"))");
  CHECK(d->ignored[1].find("faults[1]: pod \"old\" of node \"n1\" was "
                           "replaced")
        == 0);
  MESSAGE("the uid of the pod there now: a fault");
  d = decide(m, snapshot("UnHealthy",
                         {{"n1", "0", {"81078603"}, "", "j-pod-1"}}));
  REQUIRE(d);
  CHECK(d->ignored.empty());
  REQUIRE(flow_step_of(*d) != nullptr);
  CHECK(ranks_of(flow_step_of(*d)->input.faults)
        == std::vector<std::string>{"8"});
  MESSAGE("the pod uid is part of the recorded snapshot");
  m = step(m, snapshot("UnHealthy", {{"n1", "0", {"81078603"}, "", "j-pod-1"}}));
  REQUIRE(m.device_faults.size() == 1);
  CHECK(m.device_faults[0].pod_uid == "j-pod-1");
}
