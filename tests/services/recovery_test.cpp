// Conformance of the recovery flow over real gRPC, with the agent library
// (reference §14 behaviours, adapted to the Platform API).

#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "actors/error.hpp"
#include "actors/model/reset_document.hpp"
#include "actors/model/recovery.hpp"
#include "agent.hpp"
#include "fixtures/flow_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "platform.grpc.pb.h"
#include "services/app.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;
namespace pb = recoverd::platform::v1;
using namespace std::chrono_literals;

using test::flow_fixture;
using test::has_rank;


TEST_CASE("B11/B13/B15/B17: fault -> stop -> global fault -> recover -> "
          "success, every step in the log") {
  flow_fixture fx;
  auto global = fx.up_to_global_fault();
  MESSAGE("B13: the reset document lists the whole pod, readable by GetJob");
  auto during = fx.status();
  CHECK(during.uuid() == global.uuid());
  CHECK(during.resetjson().find("\"RankId\":8,") != std::string::npos);
  CHECK(during.resetjson().find("\"RankId\":15,") != std::string::npos);
  CHECK(global.faultranks_size() == 8);
  CHECK(global.noderankids_size() == 1);
  CHECK(global.noderankids(0) == "1");
  REQUIRE(global.actions_size() == 2);
  CHECK(global.actions(1) == "fault_nodes_exit");
  CHECK(fx.agent->report_recover_strategy({"recover", "dump"}).code() == 0);
  auto change = fx.expect("changeStrategy", "recover");
  CHECK(change.uuid() == global.uuid());
  CHECK(fx.agent->report_recover_status(0, "recover").code() == 0);
  fx.wait_state("INIT");
  auto status = fx.status();
  CHECK(status.spec().annotations().at("ProcessRecoverStatus")
        == "recover-success");
  CHECK(status.subscribed()); // design §4.1: the stream stays open
  CHECK(status.lastoutcome() == "recover-success");
  CHECK(status.flows() == 1);
  CHECK(status.uuid().empty());
  CHECK(status.resetjson().rfind("{\"RankList\":[]", 0) == 0);
  CHECK(status.resetcheckcode() == sha256_hex(status.resetjson()));
  CHECK(fx.agent->subscriptions() == 1);
  MESSAGE("the log holds every signal sent and every report received");
  auto events = fx.daemon->log().read("job", 1, 1000);
  REQUIRE(events);
  std::vector<std::string> delivered;
  std::vector<std::string> reports;
  for (const auto& e : *events) {
    auto ev = storage::decode_event(e.bytes);
    REQUIRE(ev);
    if (const auto* f = std::get_if<flow_stepped>(&ev->body)) {
      if (f->input.delivered)
        delivered.push_back(f->input.delivered->signal_type + ":"
                            + f->input.delivered->change_strategy);
      if (f->input.name == ev::receive_report)
        reports.push_back(to_string(f->input.kind));
    }
  }
  CHECK(delivered
        == std::vector<std::string>{"stopTrain:", "globalFault:",
                                    "changeStrategy:recover"});
  CHECK(reports == std::vector<std::string>{"stop", "strategy", "status"});
}

TEST_CASE("B14: stop-complete 404 sends killMaster and ends the flow") {
  flow_fixture fx;
  fx.agent->report_process_fault({{"8", "1"}});
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(404);
  fx.expect("killMaster");
  fx.wait_state("INIT");
}

TEST_CASE("B16/B18/B19: dump path, then exit with dump_exit") {
  flow_fixture fx;
  fx.up_to_global_fault();
  fx.agent->report_recover_strategy({"dump"});
  fx.expect("changeStrategy", "dump");
  fx.agent->report_recover_status(0, "dump");
  auto exit = fx.expect("changeStrategy", "exit");
  CHECK(exit.extraparams() == "dump_exit");
  auto status = fx.status();
  CHECK(status.spec().annotations().at("ProcessRecoverStatus")
        == "dump-success");
}

TEST_CASE("B20 (job-level fallback): after exit the label goes to pause and "
          "back to on once the job runs") {
  flow_fixture fx;
  fx.up_to_global_fault();
  fx.agent->report_recover_strategy({});
  fx.expect("changeStrategy", "exit");
  fx.wait_state("INIT");
  auto status = fx.status();
  CHECK(status.spec().annotations().at("ProcessRecoverStatus")
        == "exit-completed");
  CHECK(status.processrecoverlabel() == "on");
}

TEST_CASE("B26: a fault during a flow is absorbed, no second stopTrain") {
  flow_fixture fx;
  fx.up_to_global_fault();
  auto st = fx.agent->report_process_fault({{"2", "1"}});
  CHECK(st.code() == 0);
  fx.agent->report_recover_strategy({"recover"});
  auto change = fx.expect("changeStrategy", "recover");
  CHECK(has_rank(change, "2"));
}

TEST_CASE("design 4.2: an unexpected report is answered 401 at once") {
  flow_fixture fx;
  auto st = fx.agent->report_recover_status(0, "recover");
  CHECK(st.code() == 401);
  CHECK(st.info().find("not expected in state INIT") != std::string::npos);
  st = fx.agent->report_stop_complete(0);
  CHECK(st.code() == 401);
  CHECK(fx.status().recoverystate() == "INIT");
}

TEST_CASE("B7 and bad input: unregistered 400; missing status, unknown rank "
          "or type refused") {
  flow_fixture fx;
  agent::client ghost{fx.daemon->address(), "ghost"};
  CHECK(ghost.report_stop_complete(0).code() == 400);
  CHECK(ghost.report_process_fault({{"1", "1"}}).code() == 400);
  CHECK(ghost.report_recover_strategy({}).info() == "jobId=ghost not registed");
  ::StopCompleteRequest no_status;
  no_status.set_jobid("job");
  ::Status resp;
  grpc::ClientContext c1;
  auto gst = fx.agent->stub().ReportStopComplete(&c1, no_status, &resp);
  CHECK(gst.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(fx.agent->report_process_fault({{"99", "1"}}).code() == -1);
  CHECK(fx.agent->report_process_fault({{"8", "x"}}).code() == -1);
  CHECK(fx.status().recoverystate() == "INIT");
}

TEST_CASE("bad input accepted no more (issue 11.7): empty fault report, "
          "unknown strategy, foreign stop-complete ranks") {
  flow_fixture fx{{"recover", "dump"}, 5s, 5s};
  auto seq = fx.status().lastseq();
  MESSAGE("an empty ReportProcessFault starts nothing");
  auto empty = fx.agent->report_process_fault({});
  CHECK(empty.code() == -1);
  CHECK(empty.info().find("faultRanks: must not be empty") != std::string::npos);
  CHECK(fx.status().recoverystate() == "INIT");
  CHECK(fx.status().lastseq() == seq);
  CHECK_FALSE(fx.agent->next_signal(200ms).has_value());
  MESSAGE("a flow waiting for ReportStopComplete");
  REQUIRE(fx.agent->report_process_fault({{"8", "1"}}).code() == 0);
  fx.expect("stopTrain");
  fx.wait_state("WaitReportStopCompleteState");
  seq = fx.status().lastseq();
  for (const auto& bad : std::vector<std::vector<agent::fault>>{
         {{"99", "1"}}, {{"08", "1"}}, {{"8", "1"}, {" 9", "1"}},
         {{"8", "7"}}}) {
    auto st = fx.agent->report_stop_complete(0, bad);
    CHECK(st.code() == -1);
    CHECK(st.info().find("faultRanks[") != std::string::npos);
    CHECK(fx.status().recoverystate() == "WaitReportStopCompleteState");
    CHECK(fx.status().lastseq() == seq);
  }
  REQUIRE(fx.agent->report_stop_complete(0, {{"8", "1"}}).code() == 0);
  fx.expect("globalFault");
  fx.wait_state("WaitReportRecoverStrategyState");
  seq = fx.status().lastseq();
  MESSAGE("ReportRecoverStrategy([teleport]) is refused, naming the known");
  auto teleport = fx.agent->report_recover_strategy({"teleport"});
  CHECK(teleport.code() == -1);
  CHECK(teleport.info().find("strategies[0]: unknown strategy \"teleport\"")
        != std::string::npos);
  CHECK(teleport.info().find("retry, recover, recover-in-place")
        != std::string::npos);
  CHECK(fx.status().recoverystate() == "WaitReportRecoverStrategyState");
  CHECK(fx.status().lastseq() == seq);
  MESSAGE("the flow goes on with a valid report");
  REQUIRE(fx.agent->report_recover_strategy({"recover", "dump"}).code() == 0);
  fx.expect("changeStrategy", "recover");
}

TEST_CASE("design 4.3: a signal nobody picks up times out instead of "
          "hanging") {
  flow_fixture fx{{"recover", "dump"}, 5s, 300ms};
  fx.agent->stop();
  for (int i = 0; i < 200 && fx.status().subscribed(); ++i)
    std::this_thread::sleep_for(5ms);
  REQUIRE_FALSE(fx.status().subscribed());
  CHECK(fx.agent->report_process_fault({{"8", "1"}}).code() == 0);
  // stopTrain cannot be delivered -> notify timeout -> fault clear ->
  // job-level fallback -> the job runs -> INIT.
  fx.wait_state("INIT");
  auto status = fx.status();
  CHECK(status.processrecoverlabel() == "on");
}

TEST_CASE("B25: a report that never comes times out into the fallback") {
  flow_fixture fx{{"recover", "dump"}, 300ms, 5s};
  fx.agent->report_process_fault({{"8", "1"}});
  fx.expect("stopTrain");
  // no ReportStopComplete
  fx.wait_state("INIT");
}

TEST_CASE("design 4.1: a new subscriber gets the pending signal with its "
          "original uuid") {
  flow_fixture fx{{"recover", "dump"}, 5s, 5s};
  fx.agent->stop();
  for (int i = 0; i < 200 && fx.status().subscribed(); ++i)
    std::this_thread::sleep_for(5ms);
  fx.agent->report_process_fault({{"8", "1"}});
  CHECK(fx.status().recoverystate() == "NotifyStopTrainState");
  agent::client second{fx.daemon->address(), "job"};
  second.start_subscribe();
  auto sig = second.next_signal(5s);
  REQUIRE(sig);
  CHECK(sig->signaltype() == "stopTrain");
  CHECK_FALSE(sig->uuid().empty());
  fx.wait_state("WaitReportStopCompleteState");
}

namespace {

grpc::Status report_device_fault(flow_fixture& fx, const std::string& node,
                                 const std::string& dev,
                                 const std::string& code) {
  pb::ReportDeviceFaultsRequest req;
  auto* job = req.add_jobs();
  job->set_jobid("job");
  job->set_healthstate(code.empty() ? "Healthy" : "UnHealthy");
  if (!code.empty()) {
    auto* f = job->add_faults();
    f->set_nodename(node);
    f->set_deviceid(dev);
    f->add_faultcodes(code);
  }
  pb::ReportDeviceFaultsResponse resp;
  grpc::ClientContext c;
  auto st = fx.platform->ReportDeviceFaults(&c, req, &resp);
  if (st.ok() && resp.results_size() == 1 && !resp.results(0).accepted())
    return {grpc::StatusCode::INVALID_ARGUMENT, resp.results(0).error()};
  return st;
}

} // namespace

TEST_CASE("B27: a new hardware fault from the fault center of a job without "
          "retry sends preExitProcess and starts no flow") {
  flow_fixture fx;
  REQUIRE(report_device_fault(fx, "node-1", "2", "81078603").ok());
  auto sig = fx.expect("preExitProcess");
  REQUIRE(sig.actions_size() == 1);
  CHECK(sig.actions(0) == "pre exit process");
  REQUIRE(sig.noderankids_size() == 1);
  CHECK(sig.noderankids(0) == "1");
  REQUIRE(sig.faultranks_size() == 1);
  CHECK(sig.faultranks(0).rankid() == "10");
  CHECK(sig.faultranks(0).faulttype() == "1");
  CHECK(fx.status().recoverystate() == "INIT");
  MESSAGE("the same snapshot again raises nothing");
  REQUIRE(report_device_fault(fx, "node-1", "2", "81078603").ok());
  CHECK_FALSE(fx.agent->next_signal(200ms).has_value());
  MESSAGE("cleared, then back: raised again");
  REQUIRE(report_device_fault(fx, "", "", "").ok());
  REQUIRE(report_device_fault(fx, "node-1", "2", "81078603").ok());
  CHECK(fx.expect("preExitProcess").faultranks(0).rankid() == "10");
}

TEST_CASE("B21 via the fault center: a UCE fault of a retry job starts a "
          "step-retry flow") {
  flow_fixture fx{{"retry", "recover", "dump"}};
  REQUIRE(report_device_fault(fx, "node-0", "3", "80E01801").ok());
  auto stop = fx.expect("stopTrain");
  REQUIRE(stop.faultranks_size() == 1);
  CHECK(stop.faultranks(0).rankid() == "3");
  CHECK(stop.faultranks(0).faulttype() == "0");
  fx.agent->report_stop_complete(0);
  auto global = fx.expect("globalFault");
  REQUIRE(global.actions_size() == 1);
  CHECK(global.timeout() == 0);
  fx.agent->report_recover_strategy({"retry", "recover"});
  auto change = fx.expect("changeStrategy", "retry");
  REQUIRE(change.faultranks_size() == 1);
  fx.agent->report_recover_status(0, "retry");
  fx.wait_state("INIT");
  CHECK(fx.status().spec().annotations().at("ProcessRecoverStatus")
        == "retry-success");
}

TEST_CASE("ReportDeviceFaults checks entry by entry: skipped entries are "
          "named, the real fault starts a flow, the health is computed") {
  flow_fixture fx{{"retry", "recover", "dump"}};
  pb::ReportDeviceFaultsRequest req;
  auto* job = req.add_jobs();
  job->set_jobid("job");
  // healthState left empty: recoverd computes it.
  auto add = [&](const std::string& node, const std::string& dev,
                 const std::string& code, const std::string& level,
                 const std::string& uid) {
    auto* f = job->add_faults();
    f->set_nodename(node);
    f->set_deviceid(dev);
    f->add_faultcodes(code);
    f->set_faultlevel(level);
    f->set_poduid(uid);
  };
  add("node-1", "9", "80E01801", "RestartBusiness", "");  // not in topology
  add("node-0", "1", "80E01801", "RestartBusiness", "uid-old"); // stale
  add("node-0", "2", "80E01801", "Bogus", "");            // unknown level
  add("node-0", "3", "80E01801", "RestartBusiness", "uid-0"); // the real one
  add("node-1", "4", "81078603", "NotHandleFault", "");   // kept, no flow
  pb::ReportDeviceFaultsResponse resp;
  grpc::ClientContext c;
  REQUIRE(fx.platform->ReportDeviceFaults(&c, req, &resp).ok());
  REQUIRE(resp.results_size() == 1);
  const auto& result = resp.results(0);
  CHECK_MESSAGE(result.accepted(), result.error());
  REQUIRE(result.ignored_size() == 3);
  CHECK(result.ignored(0)
        == R"(faults[0]: device "9" on node "node-1" is not in the job's topology)");
  CHECK(result.ignored(1)
        == R"(faults[1]: pod of node "node-0" device "1" was replaced (uid "uid-old" != "uid-0"))");
  CHECK(result.ignored(2) == R"(faults[2]: unknown fault level "Bogus")");
  MESSAGE("the UCE on rank 3 alone starts a step-retry flow");
  auto stop = fx.expect("stopTrain");
  REQUIRE(stop.faultranks_size() == 1);
  CHECK(stop.faultranks(0).rankid() == "3");
  CHECK(stop.faultranks(0).faulttype() == "0");
  auto status = fx.status();
  CHECK(status.healthstate() == "UnHealthy");
  REQUIRE(status.devicefaults_size() == 2);
  CHECK(status.devicefaults(0).deviceid() == "3");
  CHECK(status.devicefaults(0).poduid() == "uid-0");
  CHECK(status.devicefaults(1).faultlevel() == "NotHandleFault");
}

namespace {

pb::Annotations set_annotations(flow_fixture& fx, const string_map& set,
                                const std::vector<std::string>& remove = {}) {
  pb::SetAnnotationsRequest req;
  req.set_jobid("job");
  for (const auto& [k, v] : set)
    (*req.mutable_set())[k] = v;
  for (const auto& k : remove)
    req.add_remove(k);
  pb::Annotations resp;
  grpc::ClientContext c;
  auto st = fx.platform->SetAnnotations(&c, req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  return resp;
}

std::string annotation(flow_fixture& fx, const std::string& key) {
  auto a = fx.status().spec().annotations();
  auto i = a.find(key);
  return i == a.end() ? std::string{"<absent>"} : i->second;
}

void wait_annotation(flow_fixture& fx, const std::string& key) {
  for (int i = 0; i < 400 && annotation(fx, key) == "<absent>"; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(annotation(fx, key) != "<absent>");
}

/// A fixture whose job is in platform mode from the start.
struct platform_fixture : flow_fixture {
  platform_fixture() : flow_fixture({"recover", "dump"}, 5s, 5s, true) {
  }
};

} // namespace

TEST_CASE_FIXTURE(platform_fixture, "B28/B29: platform mode waits for the "
                                    "strategy, writes ProcessConfirmFault, "
                                    "waits for ProcessResultFault") {
  set_annotations(*this, {{"ProcessResultFault", "stale:1"}});
  CHECK(agent->report_process_fault({{"8", "1"}}).code() == 0);
  MESSAGE("no usable strategy yet: only keep-alives, no stopTrain");
  CHECK_FALSE(agent->next_signal(200ms).has_value());
  CHECK(status().recoverystate() == "NotifyWaitFaultFlushingState");
  set_annotations(*this, {{"ProcessRecoverStrategy", "recover"}});
  expect("stopTrain");
  agent->report_stop_complete(0);
  wait_annotation(*this, "ProcessConfirmFault");
  CHECK(annotation(*this, "ProcessConfirmFault").find("8:1")
        != std::string::npos);
  MESSAGE("§15.9 fix: the stale result was removed, so the daemon waits");
  CHECK(annotation(*this, "ProcessResultFault") == "<absent>");
  CHECK_FALSE(agent->next_signal(200ms).has_value());
  set_annotations(*this, {{"ProcessResultFault", "2:1"}});
  auto global = expect("globalFault");
  MESSAGE("the merged list covers both pods");
  CHECK(global.faultranks_size() == 16);
  agent->report_recover_strategy({"recover", "dump"});
  expect("changeStrategy", "recover");
  agent->report_recover_status(0, "recover");
  wait_state("INIT");
  CHECK(annotation(*this, "ProcessRecoverStatus") == "recover-success");
  MESSAGE("§15.9 fix: the confirm list is removed when the flow ends");
  CHECK(annotation(*this, "ProcessConfirmFault") == "<absent>");
}

TEST_CASE_FIXTURE(platform_fixture, "B29: a confirm list left by the "
                                    "platform sends the job to the "
                                    "job-level fallback") {
  set_annotations(*this, {{"ProcessRecoverStrategy", "recover"},
                          {"ProcessConfirmFault", "1:1"}});
  agent->report_process_fault({{"8", "1"}});
  expect("stopTrain");
  agent->report_stop_complete(0);
  auto exit = expect("changeStrategy", "exit");
  CHECK(exit.extraparams() == "dump_exit");
  wait_state("INIT");
  CHECK(status().lastoutcome() == "job-level-fallback");
}

TEST_CASE_FIXTURE(platform_fixture, "B30: RankTableReady=false turns recover "
                                    "into dump or exit") {
  set_annotations(*this, {{"ProcessRecoverStrategy", "recover"},
                          {"RankTableReady", "false"}});
  agent->report_process_fault({{"8", "1"}});
  expect("stopTrain");
  agent->report_stop_complete(0);
  wait_annotation(*this, "ProcessConfirmFault");
  set_annotations(*this, {{"ProcessResultFault", ""}});
  expect("globalFault");
  agent->report_recover_strategy({"recover", "dump"});
  // plat is recover, so dump is not allowed by the platform: exit.
  expect("changeStrategy", "exit");
}

TEST_CASE_FIXTURE(platform_fixture, "§15.9 fix: exit is accepted in the first "
                                    "strategy wait") {
  set_annotations(*this, {{"ProcessRecoverStrategy", "exit"}});
  agent->report_process_fault({{"8", "1"}});
  expect("stopTrain");
}

TEST_CASE("B12: a UCE report of a job without retry starts no flow; the agent "
          "is told to pre-exit") {
  flow_fixture fx;
  CHECK(fx.agent->report_process_fault({{"8", "0"}}).code() == 0);
  auto sig = fx.expect("preExitProcess");
  CHECK(sig.noderankids(0) == "1");
  CHECK(fx.status().recoverystate() == "INIT");
}

TEST_CASE("B18: recover fails; dump follows when supported, exit otherwise") {
  {
    flow_fixture fx;
    fx.up_to_global_fault();
    fx.agent->report_recover_strategy({"recover", "dump"});
    fx.expect("changeStrategy", "recover");
    fx.agent->report_recover_status(1, "recover");
    fx.expect("changeStrategy", "dump");
    CHECK(fx.status().spec().annotations().at("ProcessRecoverStatus")
          == "recover-failed");
  }
  flow_fixture fx{{"recover"}};
  fx.up_to_global_fault();
  fx.agent->report_recover_strategy({"recover", "dump"});
  fx.expect("changeStrategy", "recover");
  fx.agent->report_recover_status(1, "recover");
  fx.expect("changeStrategy", "exit");
}

namespace {

// A UCE fault on rank 3 up to the step retry.
void up_to_retry(flow_fixture& fx) {
  fx.agent->report_process_fault({{"3", "0"}});
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(0);
  fx.expect("globalFault");
  fx.agent->report_recover_strategy({"retry", "recover", "dump"});
  fx.expect("changeStrategy", "retry");
}

} // namespace

TEST_CASE("B22/B23/B24: step retry without agent support, 405 and 406") {
  {
    flow_fixture fx{{"retry", "recover", "dump"}};
    fx.agent->report_process_fault({{"3", "0"}});
    fx.expect("stopTrain");
    fx.agent->report_stop_complete(0);
    fx.expect("globalFault");
    fx.agent->report_recover_strategy({"recover", "dump"});
    fx.expect("changeStrategy", "dump"); // B22: never recover
  }
  {
    flow_fixture fx{{"retry", "recover", "dump"}};
    up_to_retry(fx);
    fx.agent->report_recover_status(405, "retry");
    auto again = fx.expect("globalFault"); // B23
    CHECK(again.faultranks_size() == 8);
    CHECK(again.faultranks(0).faulttype() == "1");
    fx.agent->report_recover_strategy({"retry", "recover", "dump"});
    fx.expect("changeStrategy", "recover");
  }
  flow_fixture fx{{"retry", "recover", "dump"}};
  up_to_retry(fx);
  fx.agent->report_recover_status(406, "retry");
  fx.expect("changeStrategy", "dump"); // B24: never recover
}

TEST_CASE("B42: deleting a registered job ends its stream; reports then 400") {
  flow_fixture fx;
  pb::JobRef ref;
  ref.set_jobid("job");
  pb::DeleteJobResponse del;
  grpc::ClientContext c;
  REQUIRE(fx.platform->DeleteJob(&c, ref, &del).ok());
  CHECK(fx.agent->report_stop_complete(0).code() == 400);
  CHECK(fx.agent->report_process_fault({{"1", "1"}}).code() == 400);
}

TEST_CASE("B43 (design 4.1): a cancelled agent stream does not reset the "
          "flow; the agent carries on after re-subscribing") {
  flow_fixture fx;
  fx.up_to_global_fault();
  fx.agent->stop();
  for (int i = 0; i < 200 && fx.status().subscribed(); ++i)
    std::this_thread::sleep_for(5ms);
  CHECK(fx.status().recoverystate() == "WaitReportRecoverStrategyState");
  agent::client again{fx.daemon->address(), "job"};
  again.start_subscribe();
  // The new stream gets the signal the wait waits on again, same uuid.
  auto global = again.next_signal(5s);
  REQUIRE(global);
  CHECK(global->signaltype() == "globalFault");
  CHECK(global->uuid() == fx.status().uuid());
  CHECK(again.report_recover_strategy({"recover"}).code() == 0);
  auto sig = again.next_signal(5s);
  REQUIRE(sig);
  CHECK(sig->changestrategy() == "recover");
}

TEST_CASE("B45: DP scale-in over gRPC") {
  flow_fixture fx{{"elastic-training", "dump"}};
  fx.up_to_global_fault();
  fx.agent->report_recover_strategy({"downgrade"});
  auto down = fx.expect("changeStrategy", "downgrade");
  CHECK(down.extraparams() == R"({"scale-in-strategy": "DP"})");
  CHECK(fx.agent->report_recover_status(201, "downgrade", {"0"}).code() == 0);
  auto exit_nodes = fx.expect("faultNodesExit");
  CHECK(exit_nodes.noderankids(0) == "0");
  CHECK(fx.agent->report_recover_status(0, "downgrade").code() == 0);
  fx.wait_state("ScaleRunningState");
  fx.put({"elastic-training", "dump"}, "uid-1-replacement");
  auto up = fx.expect("changeStrategy", "upgrade");
  CHECK(up.extraparams() == R"({"scale-out-strategy": "DP"})");
  fx.agent->report_recover_status(0, "upgrade");
  fx.wait_state("INIT");
}

TEST_CASE("recover-in-place over gRPC") {
  flow_fixture fx{{"recover-in-place", "recover", "dump"}};
  fx.agent->report_process_fault({{"8", "1"}});
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(0);
  auto global = fx.expect("globalFault");
  CHECK(global.noderankids_size() == 0);
  fx.agent->report_recover_strategy({"recover"});
  auto change = fx.expect("changeStrategy", "recover");
  CHECK(change.extraparams() == "recover-in-place");
  REQUIRE(change.actions_size() == 2);
  CHECK(change.actions(1) == "fault_nodes_restart");
  fx.agent->report_recover_status(0, "recover");
  fx.wait_state("INIT");
  CHECK(fx.status().lastoutcome() == "recover-success");
}

// -- link switch (issue: O&M) -------------------------------------------------

namespace {

::Status switch_nic(flow_fixture& fx,
                    const std::map<std::string, std::vector<std::pair<std::string, bool>>>& ops,
                    const std::string& job = "job") {
  ::SwitchNics req;
  req.set_jobid(job);
  for (const auto& [node, devs] : ops) {
    auto& list = (*req.mutable_nicops())[node];
    for (const auto& [dev, op] : devs) {
      list.add_dev(dev);
      list.add_op(op);
    }
  }
  ::Status resp;
  grpc::ClientContext c;
  auto st = fx.agent->stub().SwitchNicTrack(&c, req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  return resp;
}

/// A worker's SubscribeNotifySwitch stream.
struct worker {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<::SwitchRankList>> reader;

  explicit worker(flow_fixture& fx) {
    ::ClientInfo who;
    who.set_jobid("job");
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    reader = fx.agent->stub().SubscribeNotifySwitch(&ctx, who);
  }

  ~worker() {
    ctx.TryCancel();
    ::SwitchRankList x;
    while (reader->Read(&x)) {
    }
    reader->Finish();
  }
};

/// Reads an operator stream to its end.
std::vector<std::string> operator_messages(flow_fixture& fx) {
  ::SwitchNicRequest req;
  req.set_jobid("job");
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  auto r = fx.agent->stub().SubscribeSwitchNicSignal(&c, req);
  std::vector<std::string> result;
  ::SwitchNicResponse x;
  while (r->Read(&x))
    result.push_back(x.msg());
  r->Finish();
  return result;
}

::Status reply_switch(flow_fixture& fx, bool ok) {
  ::SwitchResult req;
  req.set_jobid("job");
  req.set_result(ok);
  ::Status resp;
  grpc::ClientContext c;
  REQUIRE(fx.agent->stub().ReplySwitchNicResult(&c, req, &resp).ok());
  return resp;
}

} // namespace

TEST_CASE("B31: SwitchNicTrack validation, code 413 with the reference's "
          "texts; empty nicOps refused") {
  flow_fixture fx;
  CHECK(switch_nic(fx, {{"node-1", {{"3", true}}}}, "ghost").info()
        == "job:ghost not exist");
  CHECK(switch_nic(fx, {{"node-9", {{"3", true}}}}).info()
        == "node:node-9 not exist in job:job");
  CHECK(switch_nic(fx, {{"node-1", {{"9", true}}}}).info()
        == "device:9 not exist in node:node-1");
  CHECK(switch_nic(fx, {{"node-1", {}}}).info() == "dev or op is empty");
  auto empty = switch_nic(fx, {});
  CHECK(empty.code() == 413);
  CHECK(empty.info().find("empty") != std::string::npos);
  ::SwitchNics bad;
  bad.set_jobid("job");
  (*bad.mutable_nicops())["node-1"].add_dev("1");
  ::Status resp;
  grpc::ClientContext c;
  REQUIRE(fx.agent->stub().SwitchNicTrack(&c, bad, &resp).ok());
  CHECK(resp.code() == 413);
  CHECK(resp.info() == "dev and op length is not equal");
  MESSAGE("the same device twice (issue 11.7.5)");
  auto seq = fx.status().lastseq();
  auto twice = switch_nic(fx, {{"node-1", {{"3", true}, {"3", false}}}});
  CHECK(twice.code() == 413);
  CHECK(twice.info() == "device:3 of node:node-1 is listed twice");
  CHECK(fx.status().recoverystate() == "INIT");
  CHECK(fx.status().lastseq() == seq);
  MESSAGE("a huge node or device name is echoed cut (issue 11.7.8)");
  std::string huge(1 << 20, 'n');
  auto long_node = switch_nic(fx, {{huge, {{"3", true}}}});
  CHECK(long_node.code() == 413);
  CHECK(long_node.info().size() < 1024);
  auto long_dev = switch_nic(fx, {{"node-1", {{huge, true}}}});
  CHECK(long_dev.code() == 413);
  CHECK(long_dev.info().size() < 1024);
  CHECK(fx.status().lastseq() == seq);
}

TEST_CASE("B33/B34: pause, SwitchRankList to the worker, result, continue, "
          "switch nic finish") {
  flow_fixture fx;
  worker w{fx};
  auto started = switch_nic(fx, {{"node-1", {{"3", true}}}});
  REQUIRE(started.code() == 0);
  CHECK(started.info() == "switching operation was successfully distributed");
  auto pause = fx.expect("stopTrain");
  REQUIRE(pause.actions_size() == 1);
  CHECK(pause.actions(0) == "pause_train");
  CHECK(pause.timeout() == 0);
  MESSAGE("B32: a second operation while one runs answers 411");
  CHECK(switch_nic(fx, {{"node-1", {{"3", true}}}}).code() == 411);
  fx.agent->report_stop_complete(0);
  ::SwitchRankList list;
  REQUIRE(w.reader->Read(&list));
  REQUIRE(list.rankid_size() == 1);
  CHECK(list.rankid(0) == "11");
  CHECK(list.op(0));
  CHECK(list.jobid() == "job");
  CHECK(reply_switch(fx, true).info() == "reply success");
  fx.expect("changeStrategy", "continue");
  fx.agent->report_recover_status(0, "continue");
  fx.wait_state("INIT");
  MESSAGE("a late operator still gets the outcome");
  CHECK(operator_messages(fx) == std::vector<std::string>{"switch nic finish"});
}

TEST_CASE("B35: a failed switch diverts into recovery") {
  flow_fixture fx;
  worker w{fx};
  REQUIRE(switch_nic(fx, {{"node-1", {{"3", false}}}}).code() == 0);
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(0);
  ::SwitchRankList list;
  REQUIRE(w.reader->Read(&list));
  CHECK_FALSE(list.op(0));
  reply_switch(fx, false);
  auto stop = fx.expect("stopTrain");
  REQUIRE(stop.actions_size() == 1);
  CHECK(stop.actions(0) == "stop_train");
  CHECK(operator_messages(fx)
        == std::vector<std::string>{"switch nic failed, switch nic failed"});
}

TEST_CASE("O&M: a result reply with no switch running is answered 401; no "
          "worker stream means a timeout, not a hang") {
  flow_fixture fx{{"recover", "dump"}, 5s, 300ms};
  CHECK(reply_switch(fx, true).code() == 401);
  REQUIRE(switch_nic(fx, {{"node-1", {{"3", true}}}}).code() == 0);
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(0);
  // No SubscribeNotifySwitch: the list is never taken -> kill job.
  fx.expect("killMaster");
  fx.wait_state("INIT");
  CHECK(operator_messages(fx)
        == std::vector<std::string>{
          "send switch nic signal failed, please check manually"});
}

TEST_CASE("O&M: a fault reported during a switch is handled right after it") {
  flow_fixture fx;
  worker w{fx};
  REQUIRE(switch_nic(fx, {{"node-1", {{"3", true}}}}).code() == 0);
  fx.expect("stopTrain");
  CHECK(fx.agent->report_process_fault({{"2", "1"}}).code() == 0);
  fx.agent->report_stop_complete(0);
  ::SwitchRankList list;
  REQUIRE(w.reader->Read(&list));
  reply_switch(fx, true);
  fx.expect("changeStrategy", "continue");
  fx.agent->report_recover_status(0, "continue");
  auto stop = fx.expect("stopTrain");
  CHECK(has_rank(stop, "2"));
  fx.agent->report_stop_complete(0);
  fx.expect("globalFault");
}

TEST_CASE("O&M: concurrent SwitchNicTrack calls start exactly one operation") {
  flow_fixture fx;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::atomic<int> busy{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto st = switch_nic(fx, {{"node-1", {{"3", true}}}});
      if (st.code() == 0)
        ++ok;
      else if (st.code() == 411)
        ++busy;
    });
  for (auto& t : threads)
    t.join();
  CHECK(ok == 1);
  CHECK(busy == 7);
  fx.expect("stopTrain");
  CHECK_FALSE(fx.agent->next_signal(200ms).has_value());
}
