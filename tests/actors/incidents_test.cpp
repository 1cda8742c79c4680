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
  job_history hist{1};
  for (const auto& ev : h.evs)
    hist.add(ev);
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
