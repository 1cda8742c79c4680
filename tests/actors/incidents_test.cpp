// Incidents and event summaries: pure functions of a job's events, tested
// without threads on hand-made event lists with chosen times.

#include <doctest/doctest.h>

#include "actors/model/incidents.hpp"

using namespace recoverd;

namespace {

/// Builds a job's event list with consecutive sequence numbers.
struct history_builder {
  std::vector<event> evs;
  recovery rec;  // the machine's state after the last step
  recovery seen; // the state the last recorded step left

  void add(int64_t t, event_body body) {
    evs.push_back({evs.size() + 1, t, std::move(body)});
  }

  // One machine step from the current state through `states`.
  flow_stepped& step(int64_t t, flow_event input,
                     std::vector<flow_state> states) {
    flow_stepped x;
    x.input.name = input;
    x.path.push_back(rec.flow.state);
    for (auto s : states)
      x.path.push_back(s);
    rec.flow.state = x.path.back();
    x.change = diff(seen, recovery{rec});
    seen = rec;
    add(t, std::move(x));
    return std::get<flow_stepped>(evs.back().body);
  }

  // The incremental history of every event so far.
  job_history history(size_t keep = SIZE_MAX) const {
    job_history result{keep};
    for (const auto& ev : evs)
      result.add(ev);
    return result;
  }
};

job_spec spec() {
  job_spec s;
  s.job_id = "j";
  s.pods = {{0, "u0", "n0", true, -1, {{"0", "0"}, {"1", "1"}}}};
  return s;
}

// A recovery from fault to success, then a second fault still running.
history_builder recovery_story() {
  history_builder h;
  h.add(1000, job_put{spec(), true});
  h.add(1000, job_inited{{}, "agent"});
  h.add(1000, job_registered{"agent"});
  h.add(1100, subscriber_attached{1, "agent", "ipv4:127.0.0.1:5"});
  h.rec.flow.uuid = "U1";
  h.rec.flow.faults = {{"1", fault_type::normal}};
  auto& f = h.step(2000, ev::fault_occur, {st::notify_wait_fault_flushing});
  f.input.faults = {{"1", "1"}};
  h.step(2000, ev::notify_finish, {st::notify_stop_train});
  h.step(2010, ev::notify_success, {st::wait_stop_complete});
  auto& stop = h.step(2110, ev::receive_report, {st::wait_fault_flush_finished});
  stop.input.kind = report_kind::stop;
  h.step(2110, ev::flush_finished, {st::notify_global_fault});
  h.step(2120, ev::notify_success, {st::wait_recover_strategy});
  h.rec.flow.decided = {"recover"};
  auto& decide = h.step(2400, ev::receive_report, {st::notify_decided_strategy});
  decide.input.kind = report_kind::strategy;
  decide.input.strategies = {"recover", "dump"};
  h.step(2410, ev::notify_recover_strategy_success,
         {st::wait_process_recover_status});
  h.rec.flow.decided.clear();
  h.rec.flow.uuid.clear();
  h.rec.flow.faults.clear();
  h.rec.job.last_outcome = "recover-success";
  h.rec.job.flows = 1;
  auto& done = h.step(2900, ev::receive_report,
                      {st::check_recover_result, st::init});
  done.input.kind = report_kind::status;
  done.annotations = {{"ProcessRecoverStatus", "recover-success"}};
  h.add(3000, device_faults_reported{"Healthy", {}});
  h.rec.flow.uuid = "U2";
  h.rec.flow.faults = {{"0", fault_type::normal}};
  h.step(5000, ev::fault_occur, {st::notify_wait_fault_flushing});
  return h;
}

} // namespace

TEST_CASE("incidents: a recovery's phases and durations follow its event "
          "times") {
  auto h = recovery_story();
  auto xs = build_incidents(h.evs);
  REQUIRE(xs.size() == 2);
  const auto& x = xs[0];
  CHECK(x.kind == "recovery");
  CHECK(x.uuid == "U1");
  CHECK_FALSE(x.active);
  CHECK(x.first_seq == 5);
  CHECK(x.last_seq == 13);
  CHECK(x.started_ms == 2000);
  CHECK(x.ended_ms == 2900);
  CHECK(x.duration_ms() == 900);
  CHECK(x.outcome == "recover-success");
  CHECK(x.strategy == "recover");
  CHECK(x.strategies == std::vector<std::string>{"recover"});
  CHECK(x.fault_ranks == std::vector<std::string>{"1"});
  CHECK(x.steps == 9);
  CHECK(x.state == "INIT");
  std::vector<std::tuple<std::string, int64_t, int64_t>> phases;
  for (const auto& p : x.phases)
    phases.emplace_back(p.name, p.since_start_ms, p.duration_ms);
  CHECK(phases
        == std::vector<std::tuple<std::string, int64_t, int64_t>>{
          {"fault_seen", 0, 0},
          {"stop_acknowledged", 110, 110},
          {"strategy_decided", 400, 290},
          {"result", 900, 500}});
  CHECK(x.phase("stop_acknowledged")->seq == 8);
  MESSAGE("the second fault's flow is running");
  const auto& y = xs[1];
  CHECK(y.active);
  CHECK(y.uuid == "U2");
  CHECK(y.state == to_string(st::notify_wait_fault_flushing));
  CHECK(y.outcome.empty());
  CHECK(y.ended_ms == 0);
  REQUIRE(y.phases.size() == 1);
  CHECK(y.phases[0].name == "fault_seen");
}

TEST_CASE("incidents: the incremental history keeps the last one, counts "
          "all, and knows the subscription") {
  auto h = recovery_story();
  auto hist = h.history(1);
  CHECK(hist.seq() == h.evs.size());
  CHECK(hist.exists());
  CHECK(hist.registered());
  REQUIRE(hist.last_finished() != nullptr);
  CHECK(hist.last_finished()->uuid == "U1");
  REQUIRE(hist.active());
  CHECK(hist.active()->uuid == "U2");
  CHECK(hist.counts().size() == 1);
  CHECK(hist.counts().at({"recovery", "recover", "recover-success"}) == 1);
  CHECK(hist.subscription().generation == 1);
  CHECK(hist.subscription().peer == "ipv4:127.0.0.1:5");
  CHECK(hist.subscription().time_ms == 1100);
  MESSAGE("deleting the job ends the running flow");
  hist.add({h.evs.size() + 1, 6000, job_deleted{}});
  CHECK_FALSE(hist.active());
  CHECK_FALSE(hist.exists());
  CHECK_FALSE(hist.registered());
  CHECK(hist.finished().size() == 1); // keeps one
  CHECK(hist.last_finished()->outcome == "job deleted");
  CHECK(hist.last_finished()->duration_ms() == 1000);
  CHECK(hist.counts().at({"recovery", "", "job deleted"}) == 1);
}

TEST_CASE("incidents: a link switch, and one that hands over to a recovery "
          "in the same step") {
  history_builder h;
  h.add(10, job_put{spec(), true});
  h.rec.action.kind = om_kind::switch_nic;
  h.rec.flow.uuid = "S1";
  auto& start = h.step(100, ev::start_switch_nic, {st::notify_pause_train});
  start.input.switch_ranks = {"0"};
  h.step(110, ev::notify_success, {st::wait_pause_complete});
  h.step(150, ev::receive_report, {st::notify_switch_nic}).input.kind = report_kind::stop;
  h.step(160, ev::notify_success, {st::wait_switch_nic_finished});
  h.step(400, ev::receive_report, {st::notify_continue_train}).input.kind = report_kind::switch_nic;
  h.step(410, ev::notify_continue_success, {st::wait_continue_train});
  h.rec.action.kind = om_kind::none;
  h.rec.flow.uuid.clear();
  h.rec.job.last_outcome = "recovered";
  h.rec.job.flows = 1;
  auto& end = h.step(500, ev::switch_nic_recv_continue, {st::init});
  end.om_messages = {"switch nic finish"};
  end.om_final = true;
  MESSAGE("a second switch during which a fault arrived");
  h.rec.action.kind = om_kind::switch_nic;
  h.rec.flow.uuid = "S2";
  h.step(1000, ev::start_switch_nic, {st::notify_pause_train});
  h.step(1010, ev::notify_success, {st::wait_continue_train});
  h.rec.action.kind = om_kind::none;
  h.rec.flow.uuid = "R1";
  h.rec.flow.faults = {{"1", fault_type::normal}};
  auto& handover = h.step(1200, ev::switch_nic_recv_continue,
                          {st::init, st::notify_wait_fault_flushing});
  handover.om_messages = {"switch nic finish"};
  handover.om_final = true;
  auto xs = build_incidents(h.evs);
  REQUIRE(xs.size() == 3);
  CHECK(xs[0].kind == "switch");
  CHECK(xs[0].uuid == "S1");
  CHECK(xs[0].outcome == "switch nic finish");
  std::vector<std::string> names;
  for (const auto& p : xs[0].phases)
    names.push_back(p.name);
  CHECK(names
        == std::vector<std::string>{"requested", "stop_acknowledged",
                                    "switch_reported", "result"});
  CHECK(xs[0].phase("switch_reported")->duration_ms == 250);
  CHECK(xs[0].duration_ms() == 400);
  CHECK(xs[1].kind == "switch");
  CHECK_FALSE(xs[1].active);
  CHECK(xs[1].outcome == "switch nic finish");
  CHECK(xs[1].last_seq == xs[2].first_seq);
  CHECK(xs[2].kind == "recovery");
  CHECK(xs[2].active);
  CHECK(xs[2].uuid == "R1");
  CHECK(xs[2].fault_ranks == std::vector<std::string>{"1"});
  REQUIRE(xs[2].phases.size() == 1);
  CHECK(xs[2].phases[0].name == "fault_seen");
}

TEST_CASE("describe: one readable line per event") {
  auto h = recovery_story();
  CHECK(describe(h.evs[0]) == "job created: 1 pods, 2 ranks");
  CHECK(describe(h.evs[3])
        == "agent stream #1 attached (agent at ipv4:127.0.0.1:5)");
  CHECK(describe(h.evs[4])
        == "faultOccur: INIT -> NotifyWaitFaultFlushingState; faults 1:1");
  CHECK(describe(h.evs[7])
        == "receiveReport stop (code 0): WaitReportStopCompleteState -> "
           "WaitFaultFlushFinishedState");
  auto last = describe(h.evs[12]);
  CHECK(last.find("annotation ProcessRecoverStatus=recover-success")
        != std::string::npos);
  CHECK(last.find("outcome recover-success") != std::string::npos);
  event del{99, 1, job_deleted{}};
  CHECK(describe(del) == "job deleted");
  event faults{100, 1,
               device_faults_reported{"UnHealthy",
                                      {{"n0", "1", {"80E01801"}, "L2"}}}};
  CHECK(describe(faults)
        == "fault center: UnHealthy, 1 device faults n0/1:80E01801");
}

TEST_CASE("incidents: a stress test, its result phase and what the operator "
          "was told") {
  history_builder h;
  h.add(10, job_put{spec(), true});
  h.rec.action.kind = om_kind::stress;
  h.rec.flow.uuid = "T1";
  h.step(100, ev::start_stress_test, {st::notify_pause_train});
  h.step(110, ev::notify_success, {st::wait_pause_complete});
  h.step(150, ev::receive_report, {st::notify_stress_test}).input.kind = report_kind::stop;
  h.step(160, ev::notify_success, {st::wait_stress_test_finished});
  auto& result = h.step(700, ev::receive_report, {st::notify_continue_train});
  result.input.kind = report_kind::stress;
  result.om_messages = {"stress test finish, result:{}"};
  h.step(710, ev::notify_continue_success, {st::wait_continue_train});
  h.rec.action.kind = om_kind::none;
  h.rec.job.last_outcome = "recovered";
  auto& end = h.step(800, ev::stress_test_recv_continue, {st::init});
  end.om_final = true;
  auto xs = build_incidents(h.evs);
  REQUIRE(xs.size() == 1);
  CHECK(xs[0].kind == "stress");
  CHECK(xs[0].outcome == "stress test finish, result:{}");
  REQUIRE(xs[0].phase("stress_reported") != nullptr);
  CHECK(xs[0].phase("stress_reported")->duration_ms == 550);
  CHECK(xs[0].duration_ms() == 700);
}

namespace {

// Two pods on two nodes: ranks 0, 1 on n0 (devices d0, d1), ranks 2, 3 on
// n1 (devices d0, d1).
job_spec two_node_spec() {
  job_spec s;
  s.job_id = "j";
  s.pods = {{0, "u0", "n0", true, -1, {{"d0", "0"}, {"d1", "1"}}},
            {1, "u1", "n1", true, -1, {{"d0", "2"}, {"d1", "3"}}}};
  return s;
}

// A recovery from the step `start` (already recorded at t0) on: stop
// acknowledged at t0 + a, strategy decided at t0 + b, the flow ends with
// `outcome` at t0 + c.
void recover(history_builder& h, int64_t t0, int64_t a, int64_t b, int64_t c,
             const std::string& outcome) {
  h.step(t0, ev::notify_finish, {st::notify_stop_train});
  h.step(t0, ev::notify_success, {st::wait_stop_complete});
  h.step(t0 + a, ev::receive_report, {st::wait_fault_flush_finished})
    .input.kind = report_kind::stop;
  h.step(t0 + a, ev::flush_finished, {st::wait_recover_strategy});
  h.rec.flow.decided = {"recover"};
  h.step(t0 + b, ev::receive_report, {st::wait_process_recover_status})
    .input.kind = report_kind::strategy;
  h.rec.flow.decided.clear();
  h.rec.job.last_outcome = outcome;
  h.step(t0 + c, ev::receive_report, {st::check_recover_result, st::init})
    .input.kind = report_kind::status;
}

// An operator action started by `start` at t that ends at t + d.
flow_stepped& operator_action(history_builder& h, om_kind kind, flow_event start,
                              int64_t t, int64_t d) {
  h.rec.action.kind = kind;
  h.step(t, start, {st::notify_pause_train});
  auto index = h.evs.size() - 1;
  h.rec.action.kind = om_kind::none;
  h.rec.job.last_outcome = "recovered";
  h.step(t + d, ev::notify_continue_success, {st::init}).om_messages
    = {kind == om_kind::stress ? "stress test finish, result:{}"
                               : "switch nic finish"};
  return std::get<flow_stepped>(h.evs[index].body);
}

// The scripted scenario: job created at 0; an agent report (lost 20 s), a
// fault-center fault (30 s, killed), a stress test (5 s), a link switch
// (2 s).
history_builder goodput_story() {
  history_builder h;
  h.add(0, job_put{two_node_spec(), true});
  h.add(0, job_registered{"agent"});
  MESSAGE("agent report of rank 2 at t0 = 10 s");
  auto& report
    = h.step(10'000, ev::fault_occur, {st::notify_wait_fault_flushing});
  report.input.kind = report_kind::process;
  report.input.faults = {{"2", "1"}};
  recover(h, 10'000, 1'500, 4'000, 20'000, "recover-success");
  MESSAGE("fault center at t1 = 100 s: n1/d1 (rank 3), plus n0/d0 unrelated");
  h.add(100'000,
        device_faults_reported{
          "UnHealthy",
          {{"n1", "d1", {"80E01801", "80C98009"}, "SeparateNPU"},
           {"n0", "d0", {"11111111"}, "NotHandleFault"},
           {"n1", "", {"80C98009", "80CB8002"}, "RestartRequest"}}});
  h.step(100'000, ev::fault_occur, {st::notify_wait_fault_flushing})
    .input.faults = {{"3", "1"}};
  recover(h, 100'000, 1'000, 2'000, 30'000, "killed");
  MESSAGE("stress test of n0's rank 1 at 200 s, link switch of rank 1 at 300 s");
  operator_action(h, om_kind::stress, ev::start_stress_test, 200'000, 5'000)
    .input.stress_params = {{"1", {0}}};
  operator_action(h, om_kind::switch_nic, ev::start_switch_nic, 300'000,
                  2'000)
    .input.switch_ranks = {"1", "0"};
  return h;
}

} // namespace

TEST_CASE("goodput: time lost, its split by phase, MTTR and ETTR of a "
          "scripted scenario with known times") {
  auto h = goodput_story();
  auto hist = h.history(2);
  auto xs = build_incidents(h.evs);
  REQUIRE(xs.size() == 4);
  const auto& a = xs[0];
  CHECK(a.kind == "recovery");
  CHECK(a.outcome == "recover-success");
  CHECK(a.time_lost_ms() == 20'000);
  CHECK(a.lost_by_phase()
        == std::map<std::string, int64_t>{{"fault_seen", 0},
                                          {"stop_acknowledged", 1'500},
                                          {"strategy_decided", 2'500},
                                          {"result", 16'000}});
  CHECK(xs[1].time_lost_ms() == 30'000);
  CHECK(xs[1].outcome == "killed");
  CHECK(xs[1].lost_by_phase()
        == std::map<std::string, int64_t>{{"fault_seen", 0},
                                          {"stop_acknowledged", 1'000},
                                          {"strategy_decided", 1'000},
                                          {"result", 28'000}});
  CHECK(xs[2].kind == "stress");
  CHECK(xs[2].time_lost_ms() == 5'000);
  CHECK(xs[3].kind == "switch");
  CHECK(xs[3].time_lost_ms() == 2'000);
  for (const auto& x : xs) {
    int64_t sum = 0;
    for (const auto& [phase, ms] : x.lost_by_phase())
      sum += ms;
    CHECK(sum == x.time_lost_ms());
  }

  MESSAGE("at 400 s: 57 s lost of 400 s observed; MTTR of the 2 recoveries");
  auto f = hist.figures(400'000);
  CHECK(f.incidents == 4);
  CHECK(f.active == 0);
  CHECK(f.recoveries == 2);
  CHECK(f.mttr_ms == 25'000);
  CHECK(f.time_lost_ms == 57'000);
  CHECK(f.observed_ms == 400'000);
  CHECK(f.ettr == doctest::Approx(343.0 / 400.0).epsilon(1e-12));
  CHECK(f.by_cause
        == std::map<std::string, uint64_t>{{"agent-report", 1},
                                           {"fault-center", 1},
                                           {"stress-test", 1},
                                           {"operator", 1}});

  MESSAGE("a fault at 900 s still running at 1000 s counts until then");
  h.step(900'000, ev::fault_occur, {st::notify_wait_fault_flushing})
    .input.kind = report_kind::process;
  hist.add(h.evs.back());
  f = hist.figures(1'000'000);
  CHECK(f.incidents == 5);
  CHECK(f.active == 1);
  CHECK(f.recoveries == 2);
  CHECK(f.mttr_ms == 25'000);
  CHECK(f.time_lost_ms == 157'000);
  CHECK(f.ettr == doctest::Approx(843.0 / 1000.0).epsilon(1e-12));
  CHECK(f.by_cause.at("agent-report") == 2);

  MESSAGE("deleting the job at 950 s ends the flow and the observed time");
  hist.add({h.evs.size() + 1, 950'000, job_deleted{}});
  f = hist.figures(2'000'000);
  CHECK(f.incidents == 5);
  CHECK(f.active == 0);
  CHECK(f.recoveries == 3);
  CHECK(f.mttr_ms == (20'000 + 30'000 + 50'000) / 3);
  CHECK(f.time_lost_ms == 107'000);
  CHECK(f.observed_ms == 950'000);
  CHECK(f.ettr == doctest::Approx(843.0 / 950.0).epsilon(1e-12));

  MESSAGE("the fleet: two jobs' sums, ratios of the sums");
  job_history other;
  other.add({1, 0, job_put{two_node_spec(), true}});
  goodput_figures fleet;
  fleet.merge(f);
  fleet.merge(other.figures(50'000));
  fleet.finish();
  CHECK(fleet.incidents == 5);
  CHECK(fleet.observed_ms == 1'000'000);
  CHECK(fleet.mttr_ms == f.mttr_ms);
  CHECK(fleet.ettr == doctest::Approx(893.0 / 1000.0).epsilon(1e-12));
  CHECK(other.figures(50'000).ettr == 1.0);
}

TEST_CASE("goodput: attribution names the source, node, device, codes and "
          "level of what started each incident") {
  auto xs = build_incidents(goodput_story().evs);
  REQUIRE(xs.size() == 4);
  MESSAGE("agent report: rank 2 is n1/d0; its fault type is the level");
  const auto& agent = xs[0].attribution;
  CHECK(agent.source == "agent-report");
  CHECK(agent.node == "n1");
  CHECK(agent.device == "d0");
  CHECK(agent.codes.empty());
  CHECK(agent.level == "normal");
  MESSAGE("fault center: the faults on rank 3's device and node, not n0's");
  const auto& center = xs[1].attribution;
  CHECK(center.source == "fault-center");
  CHECK(center.node == "n1");
  CHECK(center.device == "d1");
  CHECK(center.codes
        == std::vector<std::string>{"80C98009", "80CB8002", "80E01801"});
  CHECK(center.level == "SeparateNPU");
  MESSAGE("stress test: the node of its first rank, no device");
  const auto& stress = xs[2].attribution;
  CHECK(stress.source == "stress-test");
  CHECK(stress.node == "n0");
  CHECK(stress.device.empty());
  MESSAGE("operator's link switch: the first rank to switch");
  const auto& op = xs[3].attribution;
  CHECK(op.source == "operator");
  CHECK(op.node == "n0");
  CHECK(op.device == "d1");
  MESSAGE("a flow the log does not trace is 'other'");
  auto story = build_incidents(recovery_story().evs);
  CHECK(story[0].attribution.source == "other");
  CHECK(story[0].attribution.node == "n0");
  CHECK(story[0].attribution.device == "1");
}

TEST_CASE("goodput: histograms and labels are bounded, kept incidents count "
          "as folded ones") {
  CHECK(kind_label("recovery") == "recovery");
  CHECK(kind_label("anything") == "other");
  CHECK(strategy_label("") == "none");
  CHECK(strategy_label("recover") == "recover");
  CHECK(strategy_label("made-up") == "other");
  CHECK(outcome_label("recover-success") == "recover-success");
  CHECK(outcome_label("stress test finish, result:{\"0\":{}}")
        == "stress test finish");
  CHECK(outcome_label("om failed, pause train failed") == "operator failed");
  CHECK(outcome_label("free text from somewhere") == "other");
  CHECK(cause_label("fault-center") == "fault-center");
  CHECK(cause_label("") == "other");
  CHECK(cause_label("client-chosen") == "other");

  auto h = goodput_story();
  auto hist = h.history();
  const auto& t = hist.tally();
  CHECK(t.incidents == 4);
  const auto& recovered
    = t.flow_durations.at({"recovery", "recover", "recover-success"});
  CHECK(recovered.count == 1);
  CHECK(recovered.sum_ms == 20'000);
  // 20 s falls in the bucket up to 30 s (1, 5, 10, 30, ...).
  REQUIRE(recovered.buckets.size() == duration_bounds_ms().size() + 1);
  CHECK(recovered.buckets[3] == 1);
  CHECK(t.flow_durations.count({"stress", "none", "stress test finish"}) == 1);
  CHECK(t.lost_by_cause.at("fault-center").sum_ms == 30'000);
  duration_histogram longest;
  longest.add(10 * 3'600'000);
  CHECK(longest.buckets.back() == 1);

  MESSAGE("a history seeded with kept incidents counts them the same");
  job_history seeded;
  for (const auto& x : build_incidents(h.evs))
    seeded.add_kept(x);
  CHECK(seeded.tally().incidents == 4);
  CHECK(seeded.tally().lost_ms == t.lost_ms);
  CHECK(seeded.tally().by_cause == t.by_cause);
  CHECK(seeded.counts() == hist.counts());
}
