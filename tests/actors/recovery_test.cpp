#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "actors/model/recovery.hpp"
#include "actors/model/reset_document.hpp"
#include "actors/model/text.hpp"
#include "fixtures/jobs.hpp"

using namespace recoverd;

namespace {

timeouts fast_waits() {
  timeouts w;
  w.fault_flush = millis{0};
  w.resource_release = millis{0};
  w.hccl_convergence = millis{0};
  w.restart_all = millis{0};
  return w;
}

struct machine {
  job_spec spec = test::make_job("j");
  init_config init;
  recovery rec;
  timeouts waits = fast_waits();
  int64_t now = 1'000'000;
  std::vector<flow_state> last_path;
  string_map last_annotations;
  std::vector<process_signal> last_side;

  explicit machine(std::vector<std::string> strategies = {"recover", "dump"}) {
    spec.recover_strategies = std::move(strategies);
    init = make_init_config(spec);
  }

  expected<flow_step> raw(flow_input in) {
    in.now_ms = now;
    if (in.fresh_uuid.empty())
      in.fresh_uuid = "UUID-" + std::to_string(now);
    return step(rec, spec, init, in, waits);
  }

  // Feeds an input that must be accepted.
  void feed(flow_input in) {
    auto s = raw(std::move(in));
    REQUIRE_MESSAGE(s, (s ? "" : message_of(s.error())));
    rec = s->after;
    last_path = s->path;
    last_annotations = s->annotations;
    last_side = s->side_signals;
    ++now;
  }

  void fault(std::vector<fault_rank> faults, flow_event name = ev::fault_occur) {
    flow_input in;
    in.name = name;
    in.faults = std::move(faults);
    feed(in);
  }

  // Feeds an input that is only an event (a timer, a check).
  void input(flow_event name) {
    flow_input in;
    in.name = name;
    feed(in);
  }

  // Confirms delivery of the outbox signal.
  process_signal deliver() {
    REQUIRE(rec.flow.outbox.has_value());
    auto sig = *rec.flow.outbox;
    flow_input in;
    in.name = send_result_event(sig);
    in.delivered = sig;
    feed(in);
    return sig;
  }

  void report(report_kind kind, int code = 0,
              const std::string& strategy = "",
              std::vector<std::string> strategies = {}) {
    flow_input in;
    in.name = ev::receive_report;
    in.kind = kind;
    in.report.code = code;
    in.report.strategy = strategy;
    in.strategies = std::move(strategies);
    feed(in);
  }

  // Runs a normal fault on rank 8 up to the strategy wait.
  void up_to_strategy_wait() {
    fault({{"8", "1"}});
    deliver(); // stopTrain
    report(report_kind::stop);
    deliver(); // globalFault
    REQUIRE(rec.flow.state == st::wait_recover_strategy);
  }
};

} // namespace

TEST_CASE("every row of the transition table is reachable and lands where "
          "the table says") {
  for (const auto& t : transitions()) {
    CAPTURE(t.from);
    CAPTURE(t.event);
    machine m{{"retry", "recover", "dump"}};
    m.rec.flow.state = t.from;
    m.rec.flow.uuid = "U";
    m.rec.flow.faults = {{"8", fault_type::normal}};
    m.rec.flow.fault_pods = {1};
    m.rec.flow.agent_strategies = {"recover", "dump"};
    m.rec.flow.decided = {"recover"};
    m.rec.flow.results = {{0, "recover", {}}};
    m.rec.flow.wait_until_ms = m.now - 1;
    flow_input in;
    in.name = t.event;
    in.kind = expected_report(t.from);
    auto s = m.raw(in);
    REQUIRE_MESSAGE(s, (s ? "" : message_of(s.error())));
    if (t.from != t.to) {
      REQUIRE(s->path.size() >= 2);
      CHECK(s->path[1] == t.to);
    }
  }
}

TEST_CASE("inputs a state does not wait for are refused and change nothing") {
  machine m;
  flow_input in;
  in.name = ev::receive_report;
  in.kind = report_kind::status;
  auto s = m.raw(in);
  REQUIRE_FALSE(s);
  CHECK(errc_of(s.error()) == errc::unexpected_report);
  m.up_to_strategy_wait();
  in.kind = report_kind::stop;
  s = m.raw(in);
  REQUIRE_FALSE(s);
  CHECK(message_of(s.error()).find(to_string(st::wait_recover_strategy))
        != std::string::npos);
  in.name = ev::fault_occur;
  CHECK_FALSE(m.raw(in));
}

// Found by tools/dst (a late duplicate delivery): the machine took any
// delivery result for the pending signal, so a stale stopTrain confirmation
// passed for the globalFault, or for the next flow's stopTrain.
TEST_CASE("a delivery result that is not for the pending signal is refused") {
  machine m;
  m.fault({{"8", "1"}});
  auto stop = m.deliver();
  m.report(report_kind::stop);
  REQUIRE(m.rec.flow.state == st::notify_global_fault);
  flow_input late;
  late.name = ev::notify_success;
  late.delivered = stop;
  auto s = m.raw(late);
  REQUIRE_FALSE(s);
  CHECK(errc_of(s.error()) == errc::unexpected_report);
  CHECK(m.rec.flow.state == st::notify_global_fault);
  // The next flow's stopTrain is not confirmed by the old one either.
  m.rec = {};
  m.fault({{"8", "1"}});
  REQUIRE(m.rec.flow.state == st::notify_stop_train);
  REQUIRE(m.rec.flow.uuid != stop.uuid);
  CHECK_FALSE(m.raw(late));
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_stop_complete);
}

// Found by tools/dst: after the fault pods came back, a second pod change
// re-ran the reschedule check, which re-armed the wait with the cleared
// `wait_until_ms` (0): the state waited for the agent with no deadline.
TEST_CASE("a pod change after the pods are back keeps the report deadline") {
  machine m;
  m.up_to_strategy_wait();
  m.report(report_kind::strategy, 0, "", {"recover", "dump"});
  m.deliver(); // changeStrategy(recover)
  REQUIRE(m.rec.flow.state == st::wait_process_recover_status);
  CHECK(m.rec.flow.deadline_event == ev::reschedule_check);
  flow_input changed;
  changed.name = ev::job_changed;
  m.spec.pods[1].uid = "uid-1-rescheduled";
  m.feed(changed);
  REQUIRE(m.rec.flow.deadline_event == ev::receive_timeout);
  auto deadline = m.rec.flow.deadline_ms;
  REQUIRE(deadline > 0);
  m.spec.pods[1].running = false;
  m.feed(changed);
  CHECK(m.rec.flow.state == st::wait_process_recover_status);
  CHECK(m.rec.flow.deadline_ms == deadline);
  CHECK(m.rec.flow.deadline_event == ev::receive_timeout);
}

TEST_CASE("a normal fault: stopTrain, then globalFault over the whole pod") {
  machine m;
  m.fault({{"8", "1"}});
  CHECK(m.rec.flow.state == st::notify_stop_train);
  REQUIRE(m.rec.flow.outbox);
  auto stop = *m.rec.flow.outbox;
  CHECK(stop.signal_type == "stopTrain");
  CHECK(stop.actions == std::vector<std::string>{"stop_train"});
  CHECK_FALSE(stop.uuid.empty());
  REQUIRE(stop.fault_ranks.size() == 1);
  CHECK(stop.fault_ranks[0].rank_id == "8");
  CHECK(m.rec.job.reset_json.find("\"FaultFlushing\":true") != std::string::npos);
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_stop_complete);
  CHECK(m.rec.flow.deadline_event == ev::receive_timeout);
  m.report(report_kind::stop);
  REQUIRE(m.rec.flow.outbox);
  auto global = *m.rec.flow.outbox;
  CHECK(global.signal_type == "globalFault");
  CHECK(global.uuid == stop.uuid);
  CHECK(global.actions
        == std::vector<std::string>{"on_global_rank", "fault_nodes_exit"});
  REQUIRE(global.fault_ranks.size() == 8);
  CHECK(global.fault_ranks.front().rank_id == "8");
  CHECK(global.fault_ranks.back().rank_id == "15");
  for (const auto& f : global.fault_ranks)
    CHECK(f.fault_type == "1");
  CHECK(global.node_rank_ids == std::vector<std::string>{"1"});
  CHECK(m.rec.job.reset_json.find("\"RankId\":15") != std::string::npos);
}

TEST_CASE("a fault pod replaced since it became one is not told to exit; "
          "its ranks stay faults") {
  machine m;
  m.fault({{"0", "1"}, {"8", "1"}});
  m.deliver(); // stopTrain
  MESSAGE("pod 1 runs again under a new uid before the globalFault");
  m.spec.pods[1].uid = "j-pod-1-replacement";
  flow_input changed;
  changed.name = ev::job_changed;
  m.feed(changed);
  m.report(report_kind::stop);
  REQUIRE(m.rec.flow.outbox);
  auto global = *m.rec.flow.outbox;
  CHECK(global.signal_type == "globalFault");
  CHECK(global.node_rank_ids == std::vector<std::string>{"0"});
  REQUIRE(global.fault_ranks.size() == 16);
  CHECK(global.fault_ranks.back().rank_id == "15");
  MESSAGE("the pod stays a fault pod: its rescheduling is still seen");
  CHECK(m.rec.flow.fault_pods.count(1) == 1);
}

TEST_CASE("preExitProcess leaves out a pod the snapshot saw under another "
          "uid; with no pod left nothing is sent") {
  machine m;
  flow_input in;
  in.name = ev::pre_exit;
  in.now_ms = m.now;
  in.fresh_uuid = "pre";
  in.faults = {{"0", "1"}, {"8", "1"}};
  std::vector<device_fault> snapshot{{"n0", "0", {"81078603"}, "", "j-pod-0"},
                                     {"n1", "0", {"81078603"}, "", "old"}};
  auto s = step(m.rec, m.spec, m.init, in, m.waits, snapshot);
  REQUIRE(s);
  REQUIRE(s->side_signals.size() == 1);
  CHECK(s->side_signals[0].node_rank_ids == std::vector<std::string>{"0"});
  CHECK(s->side_signals[0].fault_ranks.size() == 2);
  MESSAGE("without pod uids: both pods");
  snapshot[1].pod_uid.clear();
  s = step(m.rec, m.spec, m.init, in, m.waits, snapshot);
  REQUIRE(s);
  REQUIRE(s->side_signals.size() == 1);
  CHECK(s->side_signals[0].node_rank_ids
        == std::vector<std::string>{"0", "1"});
  MESSAGE("only the replaced pod: nothing");
  in.faults = {{"8", "1"}};
  snapshot[1].pod_uid = "old";
  s = step(m.rec, m.spec, m.init, in, m.waits, snapshot);
  REQUIRE(s);
  CHECK(s->side_signals.empty());
}

TEST_CASE("stop-complete 404 kills the job") {
  machine m;
  m.fault({{"8", "1"}});
  m.deliver();
  m.report(report_kind::stop, 404);
  CHECK(m.rec.flow.state == st::notify_kill_job);
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->signal_type == "killMaster");
  CHECK(m.rec.flow.outbox->actions.empty());
  m.deliver();
  CHECK(m.rec.flow.state == st::init);
  CHECK(m.rec.job.last_outcome == "killed");
  CHECK(m.rec.flow.uuid.empty());
}

TEST_CASE("the strategy ladder: configured x agent-reported") {
  struct row {
    std::vector<std::string> configured;
    std::vector<std::string> agent;
    std::string expected;
  };
  std::vector<row> rows{
    {{"recover", "dump"}, {"recover", "dump"}, "recover"},
    {{"recover", "dump"}, {"dump"}, "dump"},
    {{"recover", "dump"}, {}, "exit"},
    {{"dump"}, {"recover", "dump"}, "dump"},
    {{"recover"}, {"dump"}, "exit"},
    {{}, {"recover", "dump", "retry"}, "exit"},
    {{"retry", "recover"}, {"retry", "recover"}, "recover"}, // normal fault: no retry
  };
  for (const auto& r : rows) {
    CAPTURE(r.expected);
    machine m{r.configured};
    m.fault({{"8", "1"}});
    if (m.rec.flow.state == st::notify_dump)
      continue; // dump-only jobs take the dying-gasp path; tested below
    m.deliver();
    m.report(report_kind::stop);
    m.deliver();
    m.report(report_kind::strategy, 0, "", r.agent);
    REQUIRE(m.rec.flow.outbox);
    CHECK(m.rec.flow.outbox->signal_type == "changeStrategy");
    CHECK(m.rec.flow.outbox->change_strategy == r.expected);
    CHECK(m.rec.flow.outbox->actions == std::vector<std::string>{"change_strategy"});
  }
}

TEST_CASE("retry faults: global fault lists the retry ranks; type 2 gives "
          "timeout 33; agent without retry gets dump or exit") {
  for (auto type : {"0", "2"}) {
    CAPTURE(type);
    machine m{{"retry", "recover", "dump"}};
    m.fault({{"3", type}});
    m.deliver();
    m.report(report_kind::stop);
    REQUIRE(m.rec.flow.outbox);
    CHECK(m.rec.flow.outbox->signal_type == "globalFault");
    CHECK(m.rec.flow.outbox->actions == std::vector<std::string>{"on_global_rank"});
    REQUIRE(m.rec.flow.outbox->fault_ranks.size() == 1);
    CHECK(m.rec.flow.outbox->fault_ranks[0].fault_type == type);
    CHECK(m.rec.flow.outbox->timeout == (std::string{type} == "2" ? 33 : 0));
    m.deliver();
    m.report(report_kind::strategy, 0, "", {"retry", "recover", "dump"});
    CHECK(m.rec.flow.outbox->change_strategy == "retry");
    REQUIRE(m.rec.flow.outbox->fault_ranks.size() == 1);
    CHECK(m.rec.flow.outbox->fault_ranks[0].rank_id == "3");
  }
  machine m{{"retry", "recover", "dump"}};
  m.fault({{"3", "0"}});
  m.deliver();
  m.report(report_kind::stop);
  m.deliver();
  m.report(report_kind::strategy, 0, "", {"recover", "dump"});
  CHECK(m.rec.flow.outbox->change_strategy == "dump");
  machine n{{"retry", "recover"}};
  n.fault({{"3", "0"}});
  n.deliver();
  n.report(report_kind::stop);
  n.deliver();
  n.report(report_kind::strategy, 0, "", {"recover"});
  CHECK(n.rec.flow.outbox->change_strategy == "exit");
}

TEST_CASE("result check: retry 405 goes round again with normal faults; 406 "
          "never recovers") {
  machine m{{"retry", "recover", "dump"}};
  m.fault({{"3", "0"}});
  m.deliver();
  m.report(report_kind::stop);
  m.deliver();
  m.report(report_kind::strategy, 0, "", {"retry", "recover", "dump"});
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_step_retry_status);
  m.report(report_kind::status, 405, "retry");
  CHECK(m.last_annotations.at("ProcessRecoverStatus") == "retry-failed");
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->signal_type == "globalFault");
  REQUIRE(m.rec.flow.outbox->fault_ranks.size() == 8);
  CHECK(m.rec.flow.outbox->fault_ranks[0].fault_type == "1");
  m.deliver();
  m.report(report_kind::strategy, 0, "", {"retry", "recover", "dump"});
  CHECK(m.rec.flow.outbox->change_strategy == "recover");

  machine k{{"retry", "recover", "dump"}};
  k.fault({{"3", "0"}});
  k.deliver();
  k.report(report_kind::stop);
  k.deliver();
  k.report(report_kind::strategy, 0, "", {"retry", "recover", "dump"});
  k.deliver();
  k.report(report_kind::status, 406, "retry");
  REQUIRE(k.rec.flow.outbox);
  CHECK(k.rec.flow.outbox->change_strategy == "dump");
  machine q{{"retry", "recover", "dump"}};
  q.fault({{"3", "0"}});
  q.deliver();
  q.report(report_kind::stop);
  q.deliver();
  q.report(report_kind::strategy, 0, "", {"retry", "recover", "dump"});
  q.deliver();
  q.report(report_kind::status, 499, "retry");
  CHECK(q.rec.flow.outbox->change_strategy == "exit");
}

TEST_CASE("recover success and failure") {
  machine m;
  m.up_to_strategy_wait();
  m.report(report_kind::strategy, 0, "", {"recover", "dump"});
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_process_recover_status);
  m.report(report_kind::status, 0, "recover");
  CHECK(m.rec.flow.state == st::init);
  CHECK(m.last_annotations.at("ProcessRecoverStatus") == "recover-success");
  CHECK(m.rec.job.last_outcome == "recover-success");
  CHECK(m.rec.job.flows == 1);
  CHECK(m.rec.job.reset_json.find("\"RankList\":[]") != std::string::npos);

  machine f;
  f.up_to_strategy_wait();
  f.report(report_kind::strategy, 0, "", {"recover", "dump"});
  f.deliver();
  f.report(report_kind::status, 1, "recover");
  CHECK(f.last_annotations.at("ProcessRecoverStatus") == "recover-failed");
  REQUIRE(f.rec.flow.outbox);
  CHECK(f.rec.flow.outbox->change_strategy == "dump");
}

TEST_CASE("dump then exit: dump_exit, reschedule, restart-all, fallback") {
  machine m;
  m.up_to_strategy_wait();
  m.report(report_kind::strategy, 0, "", {"dump"});
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_dump_status);
  m.report(report_kind::status, 0, "dump");
  CHECK(m.last_annotations.at("ProcessRecoverStatus") == "dump-success");
  REQUIRE(m.last_side.size() == 1);
  CHECK(m.last_side[0].change_strategy == "exit");
  CHECK(m.last_side[0].extra_params == "dump_exit");
  CHECK(m.last_side[0].node_rank_ids == std::vector<std::string>{"1"});
  CHECK(m.rec.flow.state == st::listen_schedule_result);
  MESSAGE("the platform replaces pod 1");
  m.spec.pods[1].uid = "new-uid";
  flow_input changed;
  changed.name = ev::job_changed;
  m.feed(changed);
  CHECK(m.rec.job.retry_time == 1);
  CHECK(m.rec.flow.state == st::fault_retry);
  CHECK(m.rec.job.label == "pause");
  CHECK(m.rec.flow.deadline_event == ev::fallback_check);
  m.input(ev::fallback_check);
  CHECK(m.rec.flow.state == st::init);
  CHECK(m.rec.job.label == "on");
  CHECK(m.rec.job.last_outcome == "job-level-fallback");
}

TEST_CASE("every wait has a deadline") {
  machine m;
  m.fault({{"8", "1"}});
  CHECK(m.rec.flow.deadline_ms > 0); // stopTrain nobody takes
  CHECK(m.rec.flow.deadline_event == ev::notify_fail);
  flow_input timeout;
  timeout.name = ev::notify_fail;
  m.feed(timeout);
  CHECK(m.rec.flow.state == st::fault_retry);
  CHECK(m.last_path[1] == st::fault_clear);
  MESSAGE("the job never runs again: kill");
  m.spec.pods[0].running = false;
  m.now = m.rec.flow.wait_until_ms + 1;
  m.input(ev::fallback_check);
  CHECK(m.rec.flow.state == st::notify_kill_job);
  CHECK(m.rec.flow.deadline_event == ev::finish);
  flow_input give_up;
  give_up.name = ev::finish;
  m.feed(give_up);
  CHECK(m.rec.flow.state == st::init);
}

TEST_CASE("faults during a flow are absorbed, not restarted") {
  machine m;
  m.up_to_strategy_wait();
  auto uuid = m.rec.flow.uuid;
  m.fault({{"2", "1"}}, ev::fault_absorbed);
  CHECK(m.rec.flow.state == st::wait_recover_strategy);
  CHECK(m.rec.flow.uuid == uuid);
  m.report(report_kind::strategy, 0, "", {"recover"});
  REQUIRE(m.rec.flow.outbox);
  bool has_two = false;
  for (const auto& f : m.rec.flow.outbox->fault_ranks)
    has_two = has_two || f.rank_id == "2";
  CHECK(has_two);
}

TEST_CASE("ReportProcessFault classification and validation") {
  machine m{{"recover"}};
  auto k = classify_process_fault(m.rec, m.spec, m.init, {{"8", "1"}});
  REQUIRE(k);
  CHECK(*k == ev::fault_occur);
  k = classify_process_fault(m.rec, m.spec, m.init, {{"8", "0"}});
  REQUIRE(k);
  CHECK(*k == ev::pre_exit);
  machine r{{"retry"}};
  k = classify_process_fault(r.rec, r.spec, r.init, {{"8", "0"}});
  REQUIRE(k);
  CHECK(*k == ev::fault_occur);
  k = classify_process_fault(m.rec, m.spec, m.init, {{"99", "1"}});
  REQUIRE_FALSE(k);
  CHECK(message_of(k.error()).find("faultRanks[0].rankId") != std::string::npos);
  k = classify_process_fault(m.rec, m.spec, m.init, {{"eight", "1"}});
  CHECK_FALSE(k);
  k = classify_process_fault(m.rec, m.spec, m.init, {{"8", "7"}});
  REQUIRE_FALSE(k);
  CHECK(message_of(k.error()).find("faultType") != std::string::npos);
  m.rec.flow.state = st::wait_recover_strategy;
  k = classify_process_fault(m.rec, m.spec, m.init, {{"8", "1"}});
  REQUIRE(k);
  CHECK(*k == ev::fault_absorbed);
}

TEST_CASE("the reset document is Go's JSON and checkCode its SHA-256") {
  CHECK(sha256_hex("abc")
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto doc = reset_document("fault", {8, 9}, 1700000000, 2, false);
  CHECK(doc
        == R"({"RankList":[{"RankId":8,"LogicId":0,"Status":"fault","Policy":"","InitialPolicy":"","ErrorCode":null,"ErrorCodeHex":""},{"RankId":9,"LogicId":0,"Status":"fault","Policy":"","InitialPolicy":"","ErrorCode":null,"ErrorCodeHex":""}],"UpdateTime":1700000000,"RetryTime":2,"FaultFlushing":false,"GracefulExit":0,"RestartFaultProcess":false})");
  CHECK(reset_document("notifyFaultFlushing", {}, 5, 0, false)
        == R"({"RankList":[],"UpdateTime":5,"RetryTime":0,"FaultFlushing":true,"GracefulExit":0,"RestartFaultProcess":false})");
}

TEST_CASE("send results map as the reference's handleSendResult") {
  process_signal s;
  s.signal_type = "keep-alive";
  CHECK(send_result_event(s) == ev::none);
  s.signal_type = "killMaster";
  CHECK(send_result_event(s) == ev::finish);
  s.signal_type = "stopTrain";
  CHECK(send_result_event(s) == ev::notify_success);
  s.signal_type = "changeStrategy";
  s.change_strategy = "recover";
  CHECK(send_result_event(s) == ev::notify_recover_strategy_success);
  s.extra_params = "dump_exit";
  CHECK(send_result_event(s) == ev::none);
}

TEST_CASE("B45: DP scale-in, isolate ranks, scale-out") {
  machine m{{"elastic-training", "dump"}};
  m.up_to_strategy_wait();
  m.report(report_kind::strategy, 0, "", {"downgrade", "dump"});
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->change_strategy == "downgrade");
  CHECK(m.rec.flow.outbox->extra_params == R"({"scale-in-strategy": "DP"})");
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_scale_in_isolate);
  flow_input in;
  in.name = ev::receive_report;
  in.kind = report_kind::status;
  in.report = {201, "downgrade", {"0"}};
  m.feed(in);
  CHECK(m.rec.flow.state == st::check_scale_in_isolate);
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->signal_type == "faultNodesExit");
  CHECK(m.rec.flow.outbox->actions == std::vector<std::string>{"fault_nodes_exit"});
  CHECK(m.rec.flow.outbox->node_rank_ids == std::vector<std::string>{"0"});
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_scale_in_status);
  m.report(report_kind::status, 0, "downgrade");
  CHECK(m.rec.flow.state == st::scale_running);
  MESSAGE("a replacement pod runs: scale out");
  m.spec.pods[1].uid = "replacement";
  flow_input changed;
  changed.name = ev::job_changed;
  m.feed(changed);
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->change_strategy == "upgrade");
  CHECK(m.rec.flow.outbox->extra_params == R"({"scale-out-strategy": "DP"})");
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_scale_out_status);
  m.report(report_kind::status, 0, "upgrade");
  CHECK(m.rec.flow.state == st::init);
}

TEST_CASE("no scale-in when pod 0 is faulty or the agent cannot downgrade") {
  machine m{{"elastic-training", "dump"}};
  m.fault({{"1", "1"}});
  m.deliver();
  m.report(report_kind::stop);
  m.deliver();
  m.report(report_kind::strategy, 0, "", {"downgrade", "dump"});
  CHECK(m.rec.flow.outbox->change_strategy == "dump");
  machine n{{"elastic-training"}};
  n.up_to_strategy_wait();
  n.report(report_kind::strategy, 0, "", {"dump"});
  CHECK(n.rec.flow.outbox->change_strategy == "exit");
}

namespace {

// A software fault on rank 8 of a recover-in-place job, up to the in-place
// check.
machine in_place_up_to_check() {
  machine m{{"recover-in-place", "recover", "dump"}};
  flow_input in;
  in.name = ev::fault_occur;
  in.kind = report_kind::process;
  in.faults = {{"8", "1"}};
  m.feed(in);
  m.deliver();
  m.report(report_kind::stop);
  return m;
}

// The same through the in-place check that sees the fault center's
// `faults`: the machine after it.
recovery in_place_checked_with(std::vector<device_fault> faults) {
  auto m = in_place_up_to_check();
  flow_input checked;
  checked.name = ev::in_place_checked;
  checked.now_ms = m.now;
  checked.fresh_uuid = "x";
  auto s = step(m.rec, m.spec, m.init, checked, m.waits, faults);
  REQUIRE(s);
  return s->after;
}

} // namespace

TEST_CASE("recover-in-place: software-fault pods restart in place; a pod with "
          "a device fault must exit") {
  auto m = in_place_up_to_check();
  CHECK(m.rec.flow.deadline_event == ev::in_place_checked);
  flow_input checked;
  checked.name = ev::in_place_checked;
  m.feed(checked);
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->signal_type == "globalFault");
  CHECK(m.rec.flow.outbox->node_rank_ids.empty()); // nobody must exit
  CHECK(m.rec.flow.outbox->fault_ranks.size() == 1); // not expanded
  CHECK(m.rec.job.reset_json.find("\"RestartFaultProcess\":true") != std::string::npos);
  m.deliver();
  m.report(report_kind::strategy, 0, "", {"recover", "dump"});
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->change_strategy == "recover");
  CHECK(m.rec.flow.outbox->extra_params == "recover-in-place");
  CHECK(m.rec.flow.outbox->actions
        == std::vector<std::string>{"change_strategy", "fault_nodes_restart"});
  CHECK(m.rec.flow.outbox->node_rank_ids == std::vector<std::string>{"1"});

  MESSAGE("the same with a device fault on the pod's node: it must exit");
  auto n = in_place_checked_with({{"n1", "0", {"81078603"}, ""}});
  REQUIRE(n.flow.outbox);
  CHECK(n.flow.outbox->node_rank_ids == std::vector<std::string>{"1"});
  CHECK(n.flow.outbox->fault_ranks.size() == 8);
  CHECK_FALSE(n.flow.restart_in_place);
}

TEST_CASE("recover-in-place: a node-level fault makes the pod exit; a "
          "NotHandleFault does not") {
  auto exits = [](std::vector<device_fault> faults) {
    auto after = in_place_checked_with(std::move(faults));
    REQUIRE(after.flow.outbox);
    return after.flow.outbox->node_rank_ids;
  };
  CHECK(exits({{"n1", "", {"81078603"}, ""}})
        == std::vector<std::string>{"1"});
  CHECK(exits({{"n1", "0", {"81078603"}, "NotHandleFault"}}).empty());
  CHECK(exits({{"n0", "", {"81078603"}, ""}}).empty());
}

TEST_CASE("R4: a dump-only job takes the dying-gasp dump") {
  machine m{{"dump"}};
  m.fault({{"8", "1"}});
  CHECK(m.rec.flow.state == st::notify_dump);
  REQUIRE(m.rec.flow.outbox);
  CHECK(m.rec.flow.outbox->signal_type == "saveAndExit");
  CHECK(m.rec.flow.outbox->actions == std::vector<std::string>{"save_and_exit"});
  CHECK(m.rec.flow.outbox->node_rank_ids == std::vector<std::string>{"1"});
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_dump_status);
  m.report(report_kind::status, 0, "dump");
  CHECK(m.last_annotations.at("ProcessRecoverStatus") == "dump-success");
}

TEST_CASE("the ladder in platform mode follows the platform's strategy") {
  struct row {
    std::string plat;
    std::vector<std::string> agent;
    std::string expected;
  };
  std::vector<row> rows{
    {"recover", {"recover", "dump"}, "recover"},
    // plat=dump makes the job dump-only: the R4 dying-gasp path instead.
    {"exit", {"recover", "dump"}, "exit"},
    {"recover", {"dump"}, "exit"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.plat);
    machine m{{"recover", "dump"}};
    m.spec.platform_mode = true;
    m.init = make_init_config(m.spec);
    m.spec.annotations["ProcessRecoverStrategy"] = r.plat;
    m.fault({{"8", "1"}});
    m.deliver();
    m.report(report_kind::stop);
    REQUIRE(m.rec.flow.platform_round);
    CHECK(m.last_annotations.at("ProcessConfirmFault") == "8:1");
    m.spec.annotations["ProcessResultFault"] = "";
    flow_input changed;
    changed.name = ev::annotations_changed;
    m.feed(changed);
    m.deliver();
    m.report(report_kind::strategy, 0, "", r.agent);
    REQUIRE(m.rec.flow.outbox);
    CHECK(m.rec.flow.outbox->change_strategy == r.expected);
  }
}

TEST_CASE("fault center: SubHealthy faults are skipped unless graceExit and "
          "dump-only") {
  machine m{{"recover"}};
  std::vector<device_fault> now{{"n1", "0", {"X"}, ""}};
  CHECK(fault_center_input(m.rec, m.spec, m.init, {}, now, "SubHealthy")
          .first == ev::none);
  CHECK(fault_center_input(m.rec, m.spec, m.init, {}, now, "UnHealthy").first
        == ev::pre_exit);
  machine d{{"dump"}};
  d.spec.sub_healthy_strategy = "graceExit";
  d.init = make_init_config(d.spec);
  CHECK(fault_center_input(d.rec, d.spec, d.init, {}, now, "SubHealthy").first
        == ev::pre_exit);
}

// -- operator actions (reference §8.2, §9.2) -----------------------------------

namespace {

// Starts an operator action and takes it to the worker's turn.
void om_up_to_worker(machine& m, flow_input start) {
  start.who = "ipv4:127.0.0.1:5555";
  m.feed(start);
  CHECK(m.rec.flow.state == st::notify_pause_train);
  CHECK(m.rec.action.who == "ipv4:127.0.0.1:5555");
  auto pause = m.deliver();
  CHECK(pause.signal_type == "stopTrain");
  REQUIRE(pause.actions == std::vector<std::string>{"pause_train"});
  CHECK(m.rec.flow.state == st::wait_pause_complete);
  CHECK(m.rec.flow.deadline_event == ev::receive_timeout);
  m.report(report_kind::stop);
}

flow_input stress_on(const std::string& node, std::vector<int64_t> ops,
                     const job_spec& spec) {
  flow_input in;
  in.name = ev::start_stress_test;
  for (const auto& p : spec.pods)
    if (p.node_name == node)
      for (const auto& d : p.devices)
        in.stress_params[d.rank_id] = ops;
  return in;
}

void stress_result(machine& m, stress_results results) {
  flow_input in;
  in.name = ev::receive_report;
  in.kind = report_kind::stress;
  in.stress_result = std::move(results);
  m.feed(in);
}

} // namespace

TEST_CASE("O&M rows: a link switch pauses, hands the list to the worker, "
          "continues and ends with switch nic finish") {
  machine m;
  flow_input start;
  start.name = ev::start_switch_nic;
  start.switch_ranks = {"11"};
  start.switch_ops = {true};
  om_up_to_worker(m, start);
  CHECK(m.rec.flow.state == st::notify_switch_nic);
  REQUIRE(m.rec.flow.outbox.has_value());
  CHECK(m.rec.flow.outbox->signal_type == "SwitchRankList");
  CHECK(m.rec.flow.deadline_event == ev::notify_fail);
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_switch_nic_finished);
  m.report(report_kind::switch_nic);
  CHECK(m.rec.flow.state == st::notify_continue_train);
  auto cont = m.deliver();
  CHECK(cont.change_strategy == "continue");
  auto s = m.raw([] {
    flow_input in;
    in.name = ev::receive_report;
    in.kind = report_kind::status;
    return in;
  }());
  REQUIRE(s);
  CHECK(s->after.flow.state == st::init);
  CHECK(s->om_messages == std::vector<std::string>{"switch nic finish"});
  CHECK(s->om_final);
  CHECK(s->after.action.kind == om_kind::none);
  CHECK(s->after.job.om_last_kind == om_kind::switch_nic);
}

TEST_CASE("O&M rows: a stress test, all passed") {
  machine m;
  om_up_to_worker(m, stress_on("n1", {0, 1}, m.spec));
  CHECK(m.rec.flow.state == st::notify_stress_test);
  REQUIRE(m.rec.flow.outbox.has_value());
  CHECK(m.rec.flow.outbox->signal_type == "StressTestRankParams");
  CHECK(m.rec.action.stress_params.size() == 8);
  m.deliver();
  CHECK(m.rec.flow.state == st::wait_stress_test_finished);
  REQUIRE(m.last_side.size() == 1);
  CHECK(m.last_side[0].signal_type == "pauseStartAgent");
  CHECK(m.rec.job.reset_json.find("\"FaultFlushing\":true") != std::string::npos);
  CHECK(m.rec.flow.deadline_event == ev::receive_timeout);
  auto paused_uuid = m.last_side[0].uuid;
  stress_result(m, {{"8", {{"0", {"0", "ok"}}, {"1", {"1", "skipped"}}}}});
  CHECK(m.rec.flow.state == st::notify_continue_train);
  REQUIRE(m.last_side.size() == 1);
  CHECK(m.last_side[0].signal_type == "continueStartAgent");
  CHECK(m.last_side[0].uuid != paused_uuid);
  CHECK(m.rec.job.reset_json.find("\"FaultFlushing\":false") != std::string::npos);
  CHECK(m.rec.job.om_last_message.rfind("stress test finish, result:", 0) == 0);
  CHECK_FALSE(m.rec.job.om_done);
  m.deliver(); // changeStrategy continue
  m.report(report_kind::status);
  CHECK(m.rec.flow.state == st::init);
  CHECK(m.rec.job.om_done);
  CHECK(m.rec.action.stress_params.empty());
  CHECK(m.rec.job.unhealthy_nodes.empty());
}

TEST_CASE("O&M rows: stress code 2 isolates the node, 3/4 fault the rank, "
          "406 fails the test, a timeout recovers") {
  SUBCASE("code 2") {
    machine m;
    om_up_to_worker(m, stress_on("n1", {0}, m.spec));
    m.deliver();
    stress_result(m, {{"9", {{"0", {"2", "hbm"}}}}});
    CHECK(m.rec.flow.state == st::notify_stop_train);
    CHECK(m.last_path[1] == st::notify_stop_train);
    CHECK(m.rec.job.unhealthy_nodes.count("n1") == 1);
    CHECK(m.rec.flow.faults.size() == 8);
    CHECK(m.rec.flow.faults.at("15") == fault_type::normal);
    CHECK(m.rec.action.kind == om_kind::none);
    CHECK(m.rec.job.om_done);
    CHECK(m.rec.job.om_last_message.rfind("stress test find fault, isolate node:[n1],", 0)
          == 0);
    auto stop = m.deliver();
    CHECK(stop.actions == std::vector<std::string>{"stop_train"});
    MESSAGE("the health record outlives the flow; an operator clears it");
    recovery kept = m.rec;
    kept.flow.state = st::init;
    m.rec = kept;
    flow_input clear;
    clear.name = ev::node_health_cleared;
    clear.node = "n0";
    CHECK_FALSE(m.raw(clear));
    clear.node = "n1";
    m.feed(clear);
    CHECK(m.rec.job.unhealthy_nodes.empty());
  }
  SUBCASE("codes 3 and 4") {
    machine m;
    om_up_to_worker(m, stress_on("n1", {0}, m.spec));
    m.deliver();
    stress_result(m, {{"9", {{"0", {"3", ""}}}}, {"12", {{"0", {"4", ""}}}}});
    CHECK(m.rec.flow.state == st::notify_stop_train);
    CHECK(m.rec.flow.faults == std::map<std::string, fault_type>{{"12", fault_type::normal}, {"9", fault_type::normal}});
    CHECK(m.rec.job.unhealthy_nodes.empty());
    CHECK(m.rec.job.om_last_message.rfind("stress test timeout fault, faultRank:[9 12],", 0)
          == 0);
  }
  SUBCASE("406 then a clean result") {
    machine m;
    om_up_to_worker(m, stress_on("n0", {1}, m.spec));
    m.deliver();
    m.report(report_kind::status, 406);
    CHECK(m.rec.flow.state == st::wait_stress_test_finished);
    CHECK(m.rec.action.stress_fault);
    CHECK(m.rec.job.om_last_message == "recv fault, when stressing test");
    stress_result(m, {{"1", {{"1", {"0", ""}}}}});
    CHECK(m.rec.flow.state == st::notify_stop_train);
  }
  SUBCASE("timeout") {
    machine m;
    om_up_to_worker(m, stress_on("n0", {1}, m.spec));
    m.deliver();
    flow_input t;
    t.name = ev::receive_timeout;
    m.feed(t);
    CHECK(m.rec.flow.state == st::notify_stop_train);
    CHECK(m.rec.job.om_last_message == "stress test failed, report stress test timeout");
    CHECK(m.rec.job.om_done);
  }
  SUBCASE("an unexpected status code is refused; the deadline stays") {
    machine m;
    om_up_to_worker(m, stress_on("n0", {1}, m.spec));
    m.deliver();
    auto deadline = m.rec.flow.deadline_ms;
    flow_input in;
    in.name = ev::receive_report;
    in.kind = report_kind::status;
    in.report.code = 0;
    auto s = m.raw(in);
    REQUIRE_FALSE(s);
    CHECK(errc_of(s.error()) == errc::unexpected_report);
    CHECK(m.rec.flow.deadline_ms == deadline);
  }
}

TEST_CASE("validate_stress: reference texts, allNodesOps wins, running and "
          "subscribed required") {
  machine m;
  stress_ops_map params;
  auto check = [&](stress_request req, bool subscribed = true) {
    params.clear();
    return validate_stress(m.rec, m.spec, true, subscribed, req, params);
  };
  CHECK(check({{2}, {}}).info == "op:2 not exist in support operation:[0 1]");
  CHECK(check({{1, 1}, {}}).info == "node:AllNodes stress test ops should not repeat");
  CHECK(check({{}, {}}).info == "stress test node is nil");
  CHECK(check({{}, {{"n1", {}}}}).info == "node:n1 stress test ops is 0");
  CHECK(check({{}, {{"nx", {0}}}}).info == "node:nx not exist in job:j");
  auto ok = check({{0}, {{"bogus", {9}}}});
  CHECK(ok.code == 0);
  CHECK(params.size() == 16);
  CHECK(check({{0}, {}}, false).info == "job:j has no agent subscribed");
  CHECK(validate_stress(m.rec, m.spec, false, true, {{0}, {}}, params).info
        == "job:j is not registered");
  m.spec.pods[0].running = false;
  CHECK(check({{0}, {}}).info == "job:j is not running");
  m.spec.pods[0].running = true;
  m.rec.flow.state = st::wait_stop_complete;
  auto busy = check({{0}, {}});
  CHECK(busy.code == 411);
  CHECK(busy.info == "jobId=j om is running, or job recovering");
  CHECK(validate_stress_results(m.spec, {{"3", {{"0", {"5", ""}}}}}));
  CHECK(validate_stress_results(m.spec, {{"30", {{"0", {"0", ""}}}}}));
  CHECK(validate_stress_results(m.spec, {}));
  CHECK_FALSE(validate_stress_results(m.spec, {{"3", {{"0", {"4", ""}}}}}));
}

TEST_CASE("fault center: while a stress test runs, its provoked codes on the "
          "stressed nodes are not faults") {
  machine m;
  om_up_to_worker(m, stress_on("n1", {0}, m.spec));
  m.deliver();
  REQUIRE(m.rec.flow.state == st::wait_stress_test_finished);
  std::vector<device_fault> provoked = {{"n1", "2", {"80818C05"}, "L3"}};
  auto [name, fresh] = fault_center_input(m.rec, m.spec, m.init, {}, provoked);
  CHECK(name == ev::none);
  std::vector<device_fault> elsewhere = {{"n0", "2", {"80818C05"}, "L3"}};
  auto [name2, fresh2] = fault_center_input(m.rec, m.spec, m.init, {}, elsewhere);
  CHECK(name2 == ev::fault_absorbed);
  std::vector<device_fault> real = {{"n1", "2", {"80818C06", "80C98009"}, "L3"}};
  auto [name3, fresh3] = fault_center_input(m.rec, m.spec, m.init, {}, real);
  CHECK(name3 == ev::fault_absorbed);
  REQUIRE(fresh3.size() == 1);
  CHECK(fresh3[0].rank_id == "10");
}

TEST_CASE("O&M rows: every wait of a switch and a stress test has a deadline, "
          "and its expiry ends the operation with a final operator message") {
  struct expiry {
    flow_state state;
    flow_state then;
    const char* message;
  };
  // Each operator-action state, in flow order, with where its deadline leads.
  const std::vector<expiry> switch_waits = {
    {st::notify_pause_train, st::notify_kill_job, "om failed, send signal failed"},
    {st::wait_pause_complete, st::notify_kill_job, "pause train timeout"},
    {st::notify_switch_nic, st::notify_kill_job,
     "send switch nic signal failed, please check manually"},
    {st::wait_switch_nic_finished, st::notify_stop_train,
     "switch nic failed, report switch nic timeout"},
    {st::notify_continue_train, st::notify_kill_job, "om failed, send signal failed"},
    {st::wait_continue_train, st::notify_kill_job,
     "switch nic failed, continue train timeout"},
  };
  const std::vector<expiry> stress_waits = {
    {st::notify_pause_train, st::notify_kill_job, "om failed, send signal failed"},
    {st::wait_pause_complete, st::notify_kill_job, "pause train timeout"},
    {st::notify_stress_test, st::notify_kill_job,
     "send stress test signal failed, please check manually"},
    {st::wait_stress_test_finished, st::notify_stop_train,
     "stress test failed, report stress test timeout"},
    {st::notify_continue_train, st::notify_kill_job, "om failed, send signal failed"},
    {st::wait_continue_train, st::notify_kill_job,
     "stress test failed, continue train timeout"},
  };
  for (bool stress : {false, true}) {
    const auto& waits = stress ? stress_waits : switch_waits;
    for (size_t at = 0; at < waits.size(); ++at) {
      CAPTURE(stress);
      CAPTURE(waits[at].state);
      machine m;
      flow_input start;
      if (stress) {
        start = stress_on("n1", {0}, m.spec);
      } else {
        start.name = ev::start_switch_nic;
        start.switch_ranks = {"11"};
        start.switch_ops = {true};
      }
      m.feed(start);
      // Walk the happy path up to the state under test.
      for (size_t i = 0; i < at; ++i) {
        if (m.rec.flow.outbox)
          m.deliver();
        else if (m.rec.flow.state == st::wait_pause_complete)
          m.report(report_kind::stop);
        else if (m.rec.flow.state == st::wait_switch_nic_finished)
          m.report(report_kind::switch_nic);
        else if (m.rec.flow.state == st::wait_stress_test_finished)
          stress_result(m, {{"9", {{"0", {"0", ""}}}}});
      }
      REQUIRE(m.rec.flow.state == waits[at].state);
      REQUIRE(m.rec.flow.deadline_ms > m.now - 10);
      flow_input expire;
      expire.name = m.rec.flow.deadline_event;
      auto s = m.raw(expire);
      REQUIRE_MESSAGE(s, (s ? "" : message_of(s.error())));
      REQUIRE(s->path.size() >= 2);
      CHECK(s->path[1] == waits[at].then);
      CHECK(s->om_final);
      REQUIRE_FALSE(s->om_messages.empty());
      CHECK(s->om_messages.back() == waits[at].message);
    }
  }
}

namespace {

// One whole recover flow on rank 8, ending in INIT.
void recover_once(machine& m) {
  m.up_to_strategy_wait();
  m.report(report_kind::strategy, 0, "", {"recover", "dump"});
  m.deliver();
  m.report(report_kind::status, 0, "recover");
  REQUIRE(m.rec.flow.state == st::init);
}

} // namespace

TEST_CASE("restart budget: the N+1st fault within the window is not "
          "recovered in place; the job is rescheduled as a whole, and says "
          "why") {
  machine m;
  m.waits.budget_flows = 2;
  m.waits.budget_window = millis{3'600'000};
  recover_once(m);
  recover_once(m);
  CHECK(m.rec.job.recovery_starts.size() == 2);
  MESSAGE("the third fault within the hour: the job-level fallback");
  m.fault({{"8", "1"}});
  CHECK(m.rec.flow.state == st::fault_retry);
  CHECK(m.rec.flow.over_budget);
  CHECK(m.rec.job.label == "pause");
  REQUIRE(m.last_side.size() == 1);
  CHECK(m.last_side[0].change_strategy == "exit");
  CHECK(m.last_side[0].node_rank_ids == std::vector<std::string>{"1"});
  m.input(ev::fallback_check);
  CHECK(m.rec.flow.state == st::init);
  CHECK(m.rec.job.last_outcome == "restart-budget-fallback");
  CHECK(m.rec.job.label == "on");
  MESSAGE("the refused fault did not spend the budget; once the first start "
          "leaves the window, recovering in place works again");
  CHECK(m.rec.job.recovery_starts.size() == 2);
  m.now = m.rec.job.recovery_starts.front() + 3'600'000;
  recover_once(m);
  CHECK(m.rec.job.last_outcome == "recover-success");
}

TEST_CASE("restart budget: the exit verdict kills the job; the job's "
          "annotation overrides the daemon's budget; no budget, no limit") {
  machine m;
  m.waits.budget_flows = 5;
  m.waits.budget_exit = true;
  m.spec.annotations[restart_budget_annotation] = "1/10m";
  recover_once(m);
  m.fault({{"8", "1"}});
  CHECK(m.rec.flow.state == st::notify_kill_job);
  CHECK(m.rec.flow.over_budget);
  MESSAGE("a malformed annotation keeps the daemon's budget (1)");
  machine typo;
  typo.waits.budget_flows = 1;
  typo.spec.annotations[restart_budget_annotation] = "lots";
  recover_once(typo);
  typo.fault({{"8", "1"}});
  CHECK(typo.rec.flow.state == st::fault_retry);
  MESSAGE("without a budget every fault is recovered in place");
  machine free;
  for (int i = 0; i < 4; ++i)
    recover_once(free);
  CHECK(free.rec.job.recovery_starts.empty());
  CHECK(free.rec.job.flows == 4);
}

TEST_CASE("restart budget text: N/DURATION or off") {
  uint32_t n = 9;
  millis w{0};
  CHECK(parse_restart_budget("3/1h", n, w));
  CHECK(n == 3);
  CHECK(w == millis{3'600'000});
  CHECK(parse_restart_budget("off", n, w));
  CHECK(n == 0);
  CHECK(parse_restart_budget("0", n, w));
  for (const char* bad : {"", "3", "3/", "/1h", "x/1h", "3/0s", "3/-1s",
                          "3/1y", "1001/1h", "99999/1h"})
    CHECK_FALSE_MESSAGE(parse_restart_budget(bad, n, w), bad);
}
