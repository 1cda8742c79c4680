// The online stress test over real gRPC (reference §9, behaviours 36-40,
// and the points where recoverd does better than the reference).

#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <thread>

#include "actors/model/job_model.hpp"
#include "fixtures/flow_fixture.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;
using recoverd::test::flow_fixture;
using recoverd::test::has_rank;
namespace pb = recoverd::platform::v1;
using namespace std::chrono_literals;

namespace {

using node_ops = std::map<std::string, std::vector<int64_t>>;

::Status stress(flow_fixture& fx, const std::vector<int64_t>& all,
                const node_ops& per_node = {}, const std::string& job = "job") {
  ::StressTestParam req;
  req.set_jobid(job);
  for (auto op : all)
    req.add_allnodesops(op);
  for (const auto& [node, ops] : per_node) {
    auto& list = (*req.mutable_stressparam())[node];
    for (auto op : ops)
      list.add_ops(op);
  }
  ::Status resp;
  grpc::ClientContext c;
  auto st = fx.agent->stub().StressTest(&c, req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  return resp;
}

/// A worker's SubscribeNotifyExecStressTest stream.
struct stress_worker {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<::StressTestRankParams>> reader;

  explicit stress_worker(flow_fixture& fx) {
    ::ClientInfo who;
    who.set_jobid("job");
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    reader = fx.agent->stub().SubscribeNotifyExecStressTest(&ctx, who);
    // The stream is attached once the job knows it; a flow started right
    // after must find it.
    std::this_thread::sleep_for(100ms);
  }

  ~stress_worker() {
    ctx.TryCancel();
    ::StressTestRankParams x;
    while (reader->Read(&x)) {
    }
    reader->Finish();
  }

  ::StressTestRankParams next() {
    ::StressTestRankParams x;
    REQUIRE(reader->Read(&x));
    return x;
  }
};

/// An operator's SubscribeStressTestResponse stream, read in the background.
struct stress_operator {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<::StressTestResponse>> reader;
  std::vector<std::string> messages;
  grpc::Status end;
  std::thread reading;

  explicit stress_operator(flow_fixture& fx) {
    ::StressTestRequest req;
    req.set_jobid("job");
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    reader = fx.agent->stub().SubscribeStressTestResponse(&ctx, req);
    reading = std::thread{[this] {
      ::StressTestResponse x;
      while (reader->Read(&x))
        messages.push_back(x.msg());
      end = reader->Finish();
    }};
  }

  /// Waits for the stream's end; returns its messages.
  std::vector<std::string> finish() {
    reading.join();
    return messages;
  }
};

/// Reads a late operator's stream to its end.
std::pair<grpc::Status, std::vector<std::string>>
late_operator(flow_fixture& fx) {
  ::StressTestRequest req;
  req.set_jobid("job");
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  auto r = fx.agent->stub().SubscribeStressTestResponse(&c, req);
  std::vector<std::string> result;
  ::StressTestResponse x;
  while (r->Read(&x))
    result.push_back(x.msg());
  return {r->Finish(), result};
}

using codes = std::map<std::string, std::map<std::string, std::string>>;

::Status reply(flow_fixture& fx, const codes& results) {
  ::StressTestResult req;
  req.set_jobid("job");
  for (const auto& [rank, ops] : results)
    for (const auto& [op, code] : ops) {
      auto& r = (*(*req.mutable_stressresult())[rank].mutable_rankresult())[op];
      r.set_code(code);
      r.set_result("detail of " + rank + "/" + op);
    }
  ::Status resp;
  grpc::ClientContext c;
  auto st = fx.agent->stub().ReplyStressTestResult(&c, req, &resp);
  if (!st.ok()) {
    resp.set_code(-static_cast<int>(st.error_code()));
    resp.set_info(st.error_message());
  }
  return resp;
}

// Starts a stress test of node-1's ranks with op 0 and takes it to the
// point where the workers run it.
::StressTestRankParams start_on_node1(flow_fixture& fx, stress_worker& w) {
  REQUIRE(stress(fx, {}, {{"node-1", {0}}}).code() == 0);
  fx.expect("stopTrain");
  fx.agent->report_stop_complete(0);
  auto params = w.next();
  fx.expect("pauseStartAgent");
  fx.wait_state("WaitStressTestFinishedState");
  return params;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<pb::NodeHealth> unhealthy_nodes(flow_fixture& fx) {
  pb::ListNodeHealthRequest req;
  pb::ListNodeHealthResponse resp;
  grpc::ClientContext c;
  REQUIRE(fx.platform->ListNodeHealth(&c, req, &resp).ok());
  return {resp.nodes().begin(), resp.nodes().end()};
}

grpc::Status clear_node(flow_fixture& fx, const std::string& node,
                        pb::ClearNodeHealthResponse* resp) {
  pb::ClearNodeHealthRequest req;
  req.set_node(node);
  grpc::ClientContext c;
  return fx.platform->ClearNodeHealth(&c, req, resp);
}

} // namespace

TEST_CASE("B36: StressTest validation answers 413 with the reference's texts "
          "and changes nothing") {
  flow_fixture fx;
  CHECK(stress(fx, {2}).info() == "op:2 not exist in support operation:[0 1]");
  CHECK(stress(fx, {0, 0}).info()
        == "node:AllNodes stress test ops should not repeat");
  CHECK(stress(fx, {}).info() == "stress test node is nil");
  CHECK(stress(fx, {}, {{"node-1", {1, 1}}}).info()
        == "node:node-1 stress test ops should not repeat");
  CHECK(stress(fx, {}, {{"node-1", {5}}}).info()
        == "op:5 not exist in support operation:[0 1]");
  CHECK(stress(fx, {}, {{"node-1", {}}}).info() == "node:node-1 stress test ops is 0");
  CHECK(stress(fx, {}, {{"bogus", {0}}}).info() == "node:bogus not exist in job:job");
  auto ghost = stress(fx, {0}, {}, "ghost");
  CHECK(ghost.code() == 413);
  CHECK(ghost.info() == "job:ghost not exist");
  CHECK(stress(fx, {2}).code() == 413);
  CHECK(fx.status().recoverystate() == "INIT");
  CHECK_FALSE(fx.agent->next_signal(100ms).has_value());
  MESSAGE("an operator stream with no stress test run is refused");
  auto [end, msgs] = late_operator(fx);
  CHECK_FALSE(end.ok());
  CHECK(end.error_message() == "jobId=job is not stress test");
}

TEST_CASE("better than the reference: StressTest needs a running job with an "
          "agent") {
  flow_fixture fx;
  fx.agent->stop();
  for (int i = 0; i < 200 && fx.status().subscribed(); ++i)
    std::this_thread::sleep_for(5ms);
  auto none = stress(fx, {0});
  CHECK(none.code() == 413);
  CHECK(none.info() == "job:job has no agent subscribed");
  auto spec = fx.status().spec();
  spec.mutable_pods(1)->set_running(false);
  pb::PutJobRequest put;
  *put.mutable_spec() = spec;
  pb::PutJobResponse resp;
  grpc::ClientContext c;
  REQUIRE(fx.platform->PutJob(&c, put, &resp).ok());
  CHECK(stress(fx, {0}).info() == "job:job is not running");
}

TEST_CASE("B37/B40/B39: allNodesOps wins; pause 900; the worker gets every "
          "rank; pauseStartAgent before the result, continueStartAgent after; "
          "stress test finish, continue, INIT") {
  flow_fixture fx;
  stress_worker w{fx};
  auto started = stress(fx, {0}, {{"bogusNode", {9}}});
  REQUIRE(started.code() == 0);
  CHECK(started.info() == "stress test operation was successfully distributed");
  auto pause = fx.expect("stopTrain");
  REQUIRE(pause.actions_size() == 1);
  CHECK(pause.actions(0) == "pause_train");
  CHECK(pause.timeout() == 900);
  MESSAGE("B32: another operation while one runs answers 411");
  auto busy = stress(fx, {1});
  CHECK(busy.code() == 411);
  CHECK(busy.info() == "jobId=job om is running, or job recovering");
  stress_operator op{fx};
  fx.agent->report_stop_complete(0);
  auto params = w.next();
  CHECK(params.jobid() == "job");
  REQUIRE(params.stressparam_size() == 16);
  for (const auto& [rank, list] : params.stressparam()) {
    REQUIRE(list.ops_size() == 1);
    CHECK(list.ops(0) == 0);
  }
  auto paused = fx.expect("pauseStartAgent");
  REQUIRE(paused.actions_size() == 1);
  CHECK(paused.actions(0) == "pause_start_agent");
  CHECK(fx.status().resetjson().find("\"FaultFlushing\":true") != std::string::npos);
  codes all_ok;
  for (int r = 0; r < 16; ++r)
    all_ok[std::to_string(r)]["0"] = r == 3 ? "1" : "0";
  CHECK(reply(fx, all_ok).info() == "reply success");
  auto resumed = fx.expect("continueStartAgent");
  REQUIRE(resumed.actions_size() == 1);
  CHECK(resumed.actions(0) == "continue_start_agent");
  CHECK(resumed.uuid() != paused.uuid());
  fx.expect("changeStrategy", "continue");
  CHECK(fx.status().resetjson().find("\"FaultFlushing\":false") != std::string::npos);
  fx.agent->report_recover_status(0, "continue");
  fx.wait_state("INIT");
  auto msgs = op.finish();
  CHECK(op.end.ok());
  REQUIRE(msgs.size() == 1);
  CHECK(starts_with(msgs[0], "stress test finish, result:{"));
  // node -> device -> op -> {code, result}
  CHECK_MESSAGE(msgs[0].find("\"node-0\":{\"0\":{\"0\":{\"code\":\"0\"")
                  != std::string::npos,
                msgs[0]);
  CHECK(msgs[0].find("\"3\":{\"0\":{\"code\":\"1\",\"result\":\"detail of 3/0\"}}")
        != std::string::npos);
  MESSAGE("a late operator gets the outcome of the last stress test");
  auto [end, late] = late_operator(fx);
  CHECK(end.ok());
  CHECK(late == msgs);
  CHECK(fx.status().lastoutcome() == "recovered");
  CHECK(unhealthy_nodes(fx).empty());
}

TEST_CASE("B38: result code 2 isolates the node: node health recorded, the "
          "node's ranks become faults, recovery follows; an operator clears "
          "the record") {
  flow_fixture fx;
  stress_worker w{fx};
  auto params = start_on_node1(fx, w);
  CHECK(params.stressparam_size() == 8);
  CHECK(params.stressparam().count("8") == 1);
  CHECK(params.stressparam().count("0") == 0);
  stress_operator op{fx};
  codes result;
  for (int r = 8; r < 16; ++r)
    result[std::to_string(r)]["0"] = r == 9 ? "2" : "0";
  REQUIRE(reply(fx, result).code() == 0);
  fx.expect("continueStartAgent");
  auto stop = fx.expect("stopTrain");
  REQUIRE(stop.actions_size() == 1);
  CHECK(stop.actions(0) == "stop_train");
  for (int r = 8; r < 16; ++r)
    CHECK(has_rank(stop, std::to_string(r)));
  CHECK_FALSE(has_rank(stop, "0"));
  auto msgs = op.finish();
  REQUIRE(msgs.size() == 1);
  CHECK(starts_with(msgs[0], "stress test find fault, isolate node:[node-1],result:"));
  auto nodes = unhealthy_nodes(fx);
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].node() == "node-1");
  CHECK(nodes[0].jobid() == "job");
  CHECK(nodes[0].status() == "UnHealthy");
  CHECK(nodes[0].sincems() > 0);
  MESSAGE("the recovery goes on as usual");
  fx.agent->report_stop_complete(0);
  fx.expect("globalFault");
  MESSAGE("bad input is refused, then the operator clears the record");
  pb::ClearNodeHealthResponse cleared;
  CHECK(clear_node(fx, "", &cleared).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(clear_node(fx, "node-0", &cleared).error_code() == grpc::StatusCode::NOT_FOUND);
  REQUIRE(unhealthy_nodes(fx).size() == 1);
  auto st = clear_node(fx, "node-1", &cleared);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  REQUIRE(cleared.jobids_size() == 1);
  CHECK(cleared.jobids(0) == "job");
  CHECK(unhealthy_nodes(fx).empty());
  pb::ClearNodeHealthResponse again;
  CHECK(clear_node(fx, "node-1", &again).error_code() == grpc::StatusCode::NOT_FOUND);
  MESSAGE("the audit trail: who asked what, when, and the outcome");
  auto events = fx.daemon->log().read("job", 1, 1000);
  REQUIRE(events);
  bool started = false;
  bool result_kept = false;
  bool clearing = false;
  for (const auto& e : *events) {
    auto ev = storage::decode_event(e.bytes);
    REQUIRE(ev);
    const auto* f = std::get_if<flow_stepped>(&ev->body);
    if (f == nullptr)
      continue;
    if (f->input.name == ev::start_stress_test) {
      started = true;
      CHECK(f->input.who.rfind("ipv", 0) == 0);
      CHECK(f->input.stress_params.size() == 8);
      CHECK(ev->time_ms > 0);
    }
    if (f->input.kind == report_kind::stress) {
      result_kept = true;
      CHECK(f->input.stress_result.at("9").at("0").code == "2");
      REQUIRE(f->om_messages.size() == 1);
      CHECK(f->om_final);
      CHECK(f->change.replaces(recovery_field::unhealthy_nodes));
      CHECK(f->change.values.job.unhealthy_nodes.count("node-1") == 1);
    }
    if (f->input.name == ev::node_health_cleared) {
      clearing = true;
      CHECK(f->input.node == "node-1");
      CHECK(f->input.who.rfind("ipv", 0) == 0);
    }
  }
  CHECK(started);
  CHECK(result_kept);
  CHECK(clearing);
}

TEST_CASE("result codes 3 and 4 make the rank a fault; a fault reported by "
          "status 406 fails the test whatever its result") {
  SUBCASE("code 3") {
    flow_fixture fx;
    stress_worker w{fx};
    start_on_node1(fx, w);
    stress_operator op{fx};
    REQUIRE(reply(fx, {{"9", {{"0", "3"}}}, {"10", {{"0", "4"}}}}).code() == 0);
    fx.expect("continueStartAgent");
    auto stop = fx.expect("stopTrain");
    CHECK(has_rank(stop, "9"));
    CHECK(has_rank(stop, "10"));
    CHECK_FALSE(has_rank(stop, "8"));
    auto msgs = op.finish();
    REQUIRE(msgs.size() == 1);
    CHECK(starts_with(msgs[0], "stress test timeout fault, faultRank:[9 10],result:"));
    CHECK(unhealthy_nodes(fx).empty());
  }
  SUBCASE("406") {
    flow_fixture fx;
    stress_worker w{fx};
    start_on_node1(fx, w);
    stress_operator op{fx};
    CHECK(fx.agent->report_process_fault({{"2", "1"}}).code() == 0);
    CHECK(fx.agent->report_recover_status(406, "").code() == 0);
    REQUIRE(reply(fx, {{"9", {{"0", "0"}}}}).code() == 0);
    fx.expect("continueStartAgent");
    auto stop = fx.expect("stopTrain");
    CHECK(has_rank(stop, "2"));
    auto msgs = op.finish();
    REQUIRE(msgs.size() == 2);
    CHECK(msgs[0] == "recv fault, when stressing test");
    CHECK(starts_with(msgs[1], "stress test finish, result:"));
  }
}

TEST_CASE("stress O&M: no stuck states — a missing result times out into "
          "recovery, an unexpected report is 401, a missing worker kills the "
          "job") {
  SUBCASE("result timeout") {
    flow_fixture fx{{"recover", "dump"}, 600ms, 5s};
    stress_worker w{fx};
    start_on_node1(fx, w);
    stress_operator op{fx};
    MESSAGE("an unexpected status code is refused, the wait goes on");
    CHECK(fx.agent->report_recover_status(0, "").code() == 401);
    auto stop = fx.expect("stopTrain");
    CHECK(stop.actions(0) == "stop_train");
    CHECK(op.finish()
          == std::vector<std::string>{"stress test failed, report stress test timeout"});
  }
  SUBCASE("no worker stream") {
    flow_fixture fx{{"recover", "dump"}, 5s, 300ms};
    REQUIRE(stress(fx, {1}).code() == 0);
    fx.expect("stopTrain");
    fx.agent->report_stop_complete(0);
    fx.expect("killMaster");
    fx.wait_state("INIT");
    auto [end, msgs] = late_operator(fx);
    CHECK(end.ok());
    CHECK(msgs
          == std::vector<std::string>{
            "send stress test signal failed, please check manually"});
  }
}

TEST_CASE("stress O&M: bad or unsolicited results are refused") {
  flow_fixture fx;
  MESSAGE("no stress test running: 401");
  CHECK(reply(fx, {{"9", {{"0", "0"}}}}).code() == 401);
  stress_worker w{fx};
  start_on_node1(fx, w);
  auto bad_code = reply(fx, {{"9", {{"0", "7"}}}});
  CHECK(bad_code.code() == -static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  CHECK(bad_code.info().find("unknown code \"7\"") != std::string::npos);
  auto bad_rank = reply(fx, {{"99", {{"0", "0"}}}});
  CHECK(bad_rank.code() == -static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  CHECK(bad_rank.info().find("rank 99") != std::string::npos);
  CHECK(reply(fx, {}).code() == -static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  CHECK(fx.status().recoverystate() == "WaitStressTestFinishedState");
  MESSAGE("a good result after the bad ones is taken");
  CHECK(reply(fx, {{"9", {{"0", "0"}}}}).code() == 0);
  fx.expect("continueStartAgent");
  fx.expect("changeStrategy", "continue");
}

TEST_CASE("stress O&M: a fault reported during the test is handled right "
          "after it") {
  flow_fixture fx;
  stress_worker w{fx};
  start_on_node1(fx, w);
  CHECK(fx.agent->report_process_fault({{"2", "1"}}).code() == 0);
  REQUIRE(reply(fx, {{"9", {{"0", "0"}}}}).code() == 0);
  fx.expect("continueStartAgent");
  fx.expect("changeStrategy", "continue");
  fx.agent->report_recover_status(0, "continue");
  auto stop = fx.expect("stopTrain");
  CHECK(has_rank(stop, "2"));
}

TEST_CASE("stress O&M: concurrent StressTest calls start exactly one "
          "operation") {
  flow_fixture fx;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::atomic<int> busy{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto st = stress(fx, {0, 1});
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

TEST_CASE("B7/B8 for the O&M RPCs: an unknown job's replies answer 400 and "
          "its four O&M streams end with not registed") {
  flow_fixture fx;
  auto& stub = fx.agent->stub();
  ::Status resp;
  {
    ::StressTestResult req;
    req.set_jobid("ghost");
    grpc::ClientContext c;
    REQUIRE(stub.ReplyStressTestResult(&c, req, &resp).ok());
    CHECK(resp.code() == 400);
    CHECK(resp.info() == "jobId=ghost not registed");
  }
  {
    ::SwitchResult req;
    req.set_jobid("ghost");
    grpc::ClientContext c;
    REQUIRE(stub.ReplySwitchNicResult(&c, req, &resp).ok());
    CHECK(resp.code() == 400);
  }
  ::ClientInfo ghost;
  ghost.set_jobid("ghost");
  {
    grpc::ClientContext c;
    auto r = stub.SubscribeNotifyExecStressTest(&c, ghost);
    ::StressTestRankParams x;
    CHECK_FALSE(r->Read(&x));
    auto st = r->Finish();
    CHECK(st.error_message().find("not registed") != std::string::npos);
  }
  {
    grpc::ClientContext c;
    auto r = stub.SubscribeNotifySwitch(&c, ghost);
    ::SwitchRankList x;
    CHECK_FALSE(r->Read(&x));
    CHECK(r->Finish().error_message().find("not registed") != std::string::npos);
  }
  {
    ::StressTestRequest req;
    req.set_jobid("ghost");
    grpc::ClientContext c;
    auto r = stub.SubscribeStressTestResponse(&c, req);
    ::StressTestResponse x;
    CHECK_FALSE(r->Read(&x));
    CHECK(r->Finish().error_message() == "jobId=ghost not registed");
  }
  {
    ::SwitchNicRequest req;
    req.set_jobid("ghost");
    grpc::ClientContext c;
    auto r = stub.SubscribeSwitchNicSignal(&c, req);
    ::SwitchNicResponse x;
    CHECK_FALSE(r->Read(&x));
    CHECK(r->Finish().error_message() == "jobId=ghost not registed");
  }
}
