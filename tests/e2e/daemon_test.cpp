// End-to-end: the real recoverd binary and recoverctl, over loopback.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <type_traits>

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actors/error.hpp"
#include "agent.hpp"
#include "fixtures/daemon.hpp"
#include "fixtures/process.hpp"
#include "fixtures/recovery_drive.hpp"
#include "fixtures/temp_dir.hpp"
#include "recover.grpc.pb.h"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"

using namespace recoverd::test;
using namespace std::chrono_literals;

namespace {

const std::string daemon_bin = RECOVERD_BIN;
const std::string ctl_bin = RECOVERCTL_BIN;

::Status call_unary(::Recover::Stub& stub, bool reg, const std::string& job) {
  ::ClientInfo who;
  who.set_jobid(job);
  who.set_role("e2e-agent");
  ::Status resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  auto st = reg ? stub.Register(&c, who, &resp) : stub.Init(&c, who, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  return resp;
}

// After a daemon restart on the same port, the agent's channel may be in
// reconnect backoff (its re-subscription ran into the dead port) and fail
// calls at once for about a second: wait until it reaches the new daemon.
// Init of an inited job is idempotent and writes nothing.
void wait_reachable(recoverd::agent::client& agent) {
  for (int i = 0; i < 500 && agent.init().code() != 0; ++i)
    std::this_thread::sleep_for(10ms);
}

// Subscribes for `job` and returns the first signal's type.
std::string first_signal(::Recover::Stub& stub, const std::string& job) {
  ::ClientInfo who;
  who.set_jobid(job);
  grpc::ClientContext sc;
  sc.set_deadline(std::chrono::system_clock::now() + 10s);
  auto stream = stub.SubscribeProcessManageSignal(&sc, who);
  ::ProcessManageSignal sig;
  std::string result;
  if (stream->Read(&sig))
    result = sig.signaltype();
  sc.TryCancel();
  stream->Finish();
  return result;
}

} // namespace

TEST_CASE("e2e: put with recoverctl, register, subscribe, SIGKILL, restart, "
          "everything is still there") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  std::string job_json_before;
  {
    running_daemon d{dir};
    auto [rc, out] = ctl(d.address, "job put " + (dir / "job.json"));
    REQUIRE_MESSAGE(rc == 0, out);
    CHECK(out.find("job e2e-job created") != std::string::npos);
    auto [arc, aout] = ctl(d.address, "annotate e2e-job owner=ops team-");
    REQUIRE_MESSAGE(arc == 0, aout);
    auto stub = ::Recover::NewStub(
      grpc::CreateChannel(d.address, grpc::InsecureChannelCredentials()));
    CHECK(call_unary(*stub, false, "e2e-job").code() == 0);
    CHECK(call_unary(*stub, true, "e2e-job").code() == 0);
    ::ClientInfo who;
    who.set_jobid("e2e-job");
    grpc::ClientContext sc;
    sc.set_deadline(std::chrono::system_clock::now() + 10s);
    auto stream = stub->SubscribeProcessManageSignal(&sc, who);
    ::ProcessManageSignal sig;
    REQUIRE(stream->Read(&sig));
    CHECK(sig.signaltype() == "keep-alive");
    CHECK(sig.jobid() == "e2e-job");
    auto [grc, got] = ctl(d.address, "job get e2e-job --output json");
    REQUIRE(grc == 0);
    CHECK(got.find("\"subscribed\": true") != std::string::npos);
    job_json_before = got;
    MESSAGE("SIGKILL the daemon mid-stream");
    d.proc->kill(SIGKILL);
    CHECK(d.proc->wait() == 128 + SIGKILL);
    while (stream->Read(&sig)) {
    }
    stream->Finish();
  }
  running_daemon d{dir};
  auto [rc, got] = ctl(d.address, "job get e2e-job --output json");
  REQUIRE_MESSAGE(rc == 0, got);
  CHECK(got.find("\"owner\": \"ops\"") != std::string::npos);
  CHECK(got.find("\"team\"") == std::string::npos);
  CHECK(got.find("\"registered\": true") != std::string::npos);
  CHECK(got.find("\"inited\": true") != std::string::npos);
  CHECK(got.find("\"processRecoverLabel\": \"on\"") != std::string::npos);
  CHECK(got.find("\"uid\": \"u1\"") != std::string::npos);
  CHECK(got.find("\"rankId\": \"3\"") != std::string::npos);
  CHECK(got.find("\"subscribed\": false") != std::string::npos);
  // The spec part is identical before and after the crash.
  auto spec_of = [](const std::string& json) {
    auto end = json.find("\"inited\"");
    return json.substr(0, end);
  };
  CHECK(spec_of(got) == spec_of(job_json_before));
  auto stub = ::Recover::NewStub(
    grpc::CreateChannel(d.address, grpc::InsecureChannelCredentials()));
  auto reg = call_unary(*stub, true, "e2e-job");
  CHECK(reg.code() == 0);
  CHECK(reg.info() == "register success");
  CHECK(call_unary(*stub, false, "e2e-job").code() == 0);
  CHECK(first_signal(*stub, "e2e-job") == "keep-alive");
  auto [lrc, list] = ctl(d.address, "jobs");
  CHECK(lrc == 0);
  CHECK(list.find("e2e-job") != std::string::npos);
  MESSAGE("SIGTERM stops it cleanly with exit 0");
  d.proc->kill(SIGTERM);
  CHECK(d.proc->wait() == 0);
  std::ifstream log{dir / "daemon.log"};
  std::string text{std::istreambuf_iterator<char>(log), {}};
  CHECK(text.find("replayed 1 jobs") != std::string::npos);
  CHECK(text.find("event log closed") != std::string::npos);
}

TEST_CASE("e2e: the folds stored while the daemon ran serve the start after "
          "a SIGKILL: the first fold reads none of the job's events") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  // The inspector's counters, as `recoverctl status` lists them.
  auto inspector = [](const std::string& address) {
    std::map<std::string, std::string> result;
    auto [rc, out] = ctl(address, "status --output json");
    if (rc != 0)
      return result;
    auto doc = nlohmann::json::parse(out, nullptr, false);
    if (doc.is_discarded())
      return result;
    for (const auto& c : doc["components"])
      if (c.value("name", "") == "inspector")
        for (const auto& [k, v] : c["counters"].items())
          result[k] = v.get<std::string>();
    return result;
  };
  {
    running_daemon d{dir, "127.0.0.1:0", {"--history-store-interval", "100ms"}};
    auto [rc, out] = ctl(d.address, "job put " + (dir / "job.json"));
    REQUIRE_MESSAGE(rc == 0, out);
    auto [arc, aout] = ctl(d.address, "annotate e2e-job owner=ops");
    REQUIRE_MESSAGE(arc == 0, aout);
    MESSAGE("both events folded and the fold stored, with no stop");
    std::map<std::string, std::string> c;
    for (int i = 0; i < 250; ++i) {
      c = inspector(d.address);
      if (c["position"] == "2" && c["unsaved"] == "0")
        break;
      std::this_thread::sleep_for(20ms);
    }
    CHECK(c["position"] == "2");
    CHECK(c["unsaved"] == "0");
    CHECK(c["stored"] != "0");
    d.proc->kill(SIGKILL);
    CHECK(d.proc->wait() == 128 + SIGKILL);
  }
  running_daemon d{dir};
  std::map<std::string, std::string> c;
  for (int i = 0; i < 250 && c["histories"] != "1"; ++i) {
    c = inspector(d.address);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(c["histories"] == "1");
  CHECK(c["restored"] == "1");
  CHECK(c["first_fold_events"] == "0");
  d.proc->kill(SIGTERM);
  CHECK(d.proc->wait() == 0);
}

TEST_CASE("e2e: a second daemon on the same data directory or port fails at "
          "once") {
  temp_dir dir;
  running_daemon first{dir};
  auto [rc, out] = run_command(daemon_bin + " --listen 127.0.0.1:0 --data-dir "
                               + (dir / "data"));
  CHECK(rc == 1);
  CHECK(out.find("in use by another recoverd") != std::string::npos);
  temp_dir other;
  auto [prc, pout] = run_command(daemon_bin + " --listen " + first.address
                                 + " --data-dir " + (other / "data"));
  CHECK(prc == 1);
  CHECK(pout.find("cannot listen on") != std::string::npos);
  CHECK(first.proc->running());
}

TEST_CASE("e2e: recoverctl exit codes and messages") {
  temp_dir dir;
  running_daemon d{dir};
  auto [rc1, out1] = ctl(d.address, "job get missing --output json");
  CHECK(rc1 == 1);
  CHECK(out1.find("job missing is not known") != std::string::npos);
  {
    std::ofstream f{dir / "bad.json"};
    f << R"({"jobId": "b", "recoverStrategies": ["warp"]})";
  }
  auto [rc2, out2] = ctl(d.address, "job put " + (dir / "bad.json"));
  CHECK(rc2 == 1);
  CHECK(out2.find("recoverStrategies[0]") != std::string::npos);
  {
    std::ofstream f{dir / "garbage.json"};
    f << "{not json";
  }
  auto [rc3, out3] = ctl(d.address, "job put " + (dir / "garbage.json"));
  CHECK(rc3 == 2);
  CHECK(out3.find("not a valid job file") != std::string::npos);
  auto [rc4, out4] = ctl(d.address, "annotate x novalue");
  CHECK(rc4 == 2);
  auto [rc5, out5] = run_command(ctl_bin
                                 + " --server 127.0.0.1:1 --timeout 2 jobs");
  CHECK(rc5 == 3);
  CHECK(out5.find("cannot reach recoverd") != std::string::npos);
  auto [rc6, out6] = ctl(d.address, "job delete missing");
  CHECK(rc6 == 1);
  auto [rc7, out7] = run_command(ctl_bin + " --help");
  CHECK(rc7 == 0);
  CHECK(out7.find("Exit codes") != std::string::npos);
}

TEST_CASE("e2e: SIGKILL in the middle of a recovery; the restarted daemon "
          "resumes it with the same uuid") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  std::vector<std::string> fast{"--fault-flush-wait", "0",
                                "--resource-release-wait", "0"};
  auto d = std::make_unique<running_daemon>(dir, "127.0.0.1:0", fast);
  auto address = d->address;
  REQUIRE(ctl(address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  std::this_thread::sleep_for(300ms);
  REQUIRE(agent.report_process_fault({{"2", "1"}}).code() == 0);
  auto stop = agent.next_signal(5s);
  REQUIRE(stop);
  CHECK(stop->signaltype() == "stopTrain");
  MESSAGE("kill -9 while the daemon waits for the stop report");
  // Wait until the delivery of stopTrain is durable: killed before that, the
  // restarted daemon sends stopTrain again (at-least-once, same uuid).
  for (int i = 0; i < 100; ++i) {
    auto [rc, got] = ctl(address, "job get e2e-job --output json");
    if (got.find("WaitReportStopCompleteState") != std::string::npos)
      break;
    std::this_thread::sleep_for(20ms);
  }
  d->proc->kill(SIGKILL);
  CHECK(d->proc->wait() == 128 + SIGKILL);
  d = std::make_unique<running_daemon>(dir, address, fast);
  // The agent library re-subscribes on its own.
  wait_reachable(agent);
  std::this_thread::sleep_for(200ms);
  auto ack = agent.report_stop_complete(0);
  CHECK_MESSAGE(ack.code() == 0, ack.info());
  CHECK(ack.info().find(stop->uuid()) != std::string::npos);
  auto global = agent.next_signal(5s);
  REQUIRE(global);
  CHECK(global->signaltype() == "globalFault");
  CHECK(global->uuid() == stop->uuid());
  REQUIRE(agent.report_recover_strategy({"recover"}).code() == 0);
  auto change = agent.next_signal(5s);
  REQUIRE(change);
  CHECK(change->changestrategy() == "recover");
  CHECK(change->uuid() == stop->uuid());
  REQUIRE(agent.report_recover_status(0, "recover").code() == 0);
  auto [rc, got] = ctl(address, "job get e2e-job --output json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  agent.stop();
}

namespace {

/// Drives one recovery through the real daemon and SIGKILLs it once when the
/// job reaches `kill_at`; the restarted daemon must finish the flow with the
/// same uuid and a consistent log.
void crash_at(const std::string& kill_at) {
  CAPTURE(kill_at);
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  // Waits long enough to kill inside them, short enough to pass quickly.
  std::vector<std::string> waits{"--fault-flush-wait",
                                 kill_at == "WaitFaultFlushFinishedState"
                                   ? "1s"
                                   : "0",
                                 "--resource-release-wait",
                                 kill_at == "NotifyGlobalFaultState" ? "1s"
                                                                     : "0"};
  auto d = std::make_unique<running_daemon>(dir, "127.0.0.1:0", waits);
  auto address = d->address;
  REQUIRE(ctl(address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  auto crash = [&] {
    // The delivery of the last signal becomes durable a moment after the
    // agent has it.
    wait_state(address, kill_at);
    d->proc->kill(SIGKILL);
    REQUIRE(d->proc->wait() == 128 + SIGKILL);
    d = std::make_unique<running_daemon>(dir, address, waits);
    wait_reachable(agent);
  };
  drive_recovery(agent, kill_at, crash, 5s);
  auto [rc, got] = ctl(address, "job get e2e-job --output json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  CHECK(got.find("\"flows\": \"1\"") != std::string::npos);
  CHECK(got.find("\"ProcessRecoverStatus\": \"recover-success\"")
        != std::string::npos);
  agent.stop();
  MESSAGE("the log replays to the same state after a clean stop");
  d->proc->kill(SIGTERM);
  REQUIRE(d->proc->wait() == 0);
  d = std::make_unique<running_daemon>(dir, address, waits);
  auto [rc2, again] = ctl(address, "job get e2e-job --output json");
  CHECK(again.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  CHECK(again.find("\"recoveryState\": \"INIT\"") != std::string::npos);
}

} // namespace

TEST_CASE("e2e crash test: SIGKILL once at each state of a recovery") {
  for (const char* at : recovery_crash_states)
    crash_at(at);
}

TEST_CASE("e2e: recoverctl switch-nic drives a link switch to its outcome") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  running_daemon d{dir};
  REQUIRE(ctl(d.address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{d.address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  ::ClientInfo who;
  who.set_jobid("e2e-job");
  grpc::ClientContext wctx;
  wctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto worker = agent.stub().SubscribeNotifySwitch(&wctx, who);
  std::this_thread::sleep_for(300ms);
  MESSAGE("bad input: exit 2, refused: exit 1");
  CHECK(ctl(d.address, "switch-nic e2e-job 1=on").first == 2);
  auto [brc, bout] = ctl(d.address, "switch-nic e2e-job n9 1=on");
  CHECK(brc == 1);
  CHECK(bout.find("node:n9 not exist") != std::string::npos);
  std::pair<int, std::string> result;
  std::thread operator_thread{[&] {
    result = ctl(d.address, "switch-nic e2e-job n1 1=on");
  }};
  auto pause = agent.next_signal(10s);
  REQUIRE(pause);
  CHECK(pause->signaltype() == "stopTrain");
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  ::SwitchRankList list;
  REQUIRE(worker->Read(&list));
  CHECK(list.rankid(0) == "3");
  ::SwitchResult res;
  res.set_jobid("e2e-job");
  res.set_result(true);
  ::Status resp;
  grpc::ClientContext rctx;
  REQUIRE(agent.stub().ReplySwitchNicResult(&rctx, res, &resp).ok());
  auto cont = agent.next_signal(10s);
  REQUIRE(cont);
  CHECK(cont->changestrategy() == "continue");
  REQUIRE(agent.report_recover_status(0, "continue").code() == 0);
  operator_thread.join();
  CHECK(result.first == 0);
  CHECK(result.second.find("switch started") != std::string::npos);
  CHECK(result.second.find("switch nic finish") != std::string::npos);
  wctx.TryCancel();
  while (worker->Read(&list)) {
  }
  worker->Finish();
  agent.stop();
}

TEST_CASE("e2e: recoverctl stress-test drives a stress test to its outcome; "
          "the isolated node is listed and cleared with recoverctl nodes") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  running_daemon d{dir};
  REQUIRE(ctl(d.address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{d.address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  ::ClientInfo who;
  who.set_jobid("e2e-job");
  grpc::ClientContext wctx;
  wctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto worker = agent.stub().SubscribeNotifyExecStressTest(&wctx, who);
  std::this_thread::sleep_for(300ms);
  MESSAGE("bad input: exit 2, refused: exit 1");
  CHECK(ctl(d.address, "stress-test e2e-job n1=xyz").first == 2);
  CHECK(ctl(d.address, "stress-test e2e-job").first == 2);
  auto [brc, bout] = ctl(d.address, "stress-test e2e-job --all-nodes 2");
  CHECK(brc == 1);
  CHECK(bout.find("op:2 not exist in support operation:[0 1]") != std::string::npos);
  std::pair<int, std::string> result;
  std::thread operator_thread{[&] {
    result = ctl(d.address, "stress-test e2e-job n1=aic,p2p");
  }};
  auto pause = agent.next_signal(10s);
  REQUIRE(pause);
  CHECK(pause->signaltype() == "stopTrain");
  CHECK(pause->timeout() == 900);
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  ::StressTestRankParams params;
  REQUIRE(worker->Read(&params));
  CHECK(params.stressparam_size() == 2);
  CHECK(params.stressparam().at("3").ops_size() == 2);
  auto paused = agent.next_signal(10s);
  REQUIRE(paused);
  CHECK(paused->signaltype() == "pauseStartAgent");
  ::StressTestResult res;
  res.set_jobid("e2e-job");
  auto& r3 = (*(*res.mutable_stressresult())["3"].mutable_rankresult());
  r3["0"].set_code("2");
  r3["1"].set_code("0");
  (*(*res.mutable_stressresult())["2"].mutable_rankresult())["0"].set_code("0");
  ::Status resp;
  grpc::ClientContext rctx;
  REQUIRE(agent.stub().ReplyStressTestResult(&rctx, res, &resp).ok());
  CHECK(resp.info() == "reply success");
  auto resumed = agent.next_signal(10s);
  REQUIRE(resumed);
  CHECK(resumed->signaltype() == "continueStartAgent");
  auto stop = agent.next_signal(10s);
  REQUIRE(stop);
  CHECK(stop->signaltype() == "stopTrain");
  operator_thread.join();
  CHECK(result.first == 1);
  CHECK(result.second.find("stress test started") != std::string::npos);
  CHECK(result.second.find("stress test find fault, isolate node:[n1]")
        != std::string::npos);
  // The job hands the verdict to the fleet's node registry once its own
  // events are durable: the table shows it a moment later.
  std::pair<int, std::string> listed;
  for (int i = 0; i < 100; ++i) {
    listed = ctl(d.address, "nodes --quarantined");
    if (listed.second.find("stress-test") != std::string::npos)
      break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(listed.first == 0);
  CHECK(listed.second.find("QUARANTINED") != std::string::npos);
  CHECK(listed.second.find("n1") != std::string::npos);
  CHECK(listed.second.find("stress-test") != std::string::npos);
  CHECK(listed.second.find("e2e-job") != std::string::npos);
  auto [crc, cleared] = ctl(d.address, "nodes clear n1");
  CHECK(crc == 0);
  CHECK(cleared.find("node n1 cleared in job e2e-job") != std::string::npos);
  CHECK(cleared.find("node n1 cleared in the node registry")
        != std::string::npos);
  CHECK(ctl(d.address, "nodes clear n1").first == 1);
  CHECK(ctl(d.address, "nodes clear n9").first == 1);
  auto [jrc, json] = ctl(d.address, "nodes --quarantined --json");
  CHECK(jrc == 0);
  CHECK(json.find("n1") == std::string::npos);
  auto [arc, all] = ctl(d.address, "nodes --json");
  CHECK(arc == 0);
  CHECK(all.find("\"n1\"") != std::string::npos);
  wctx.TryCancel();
  while (worker->Read(&params)) {
  }
  worker->Finish();
  agent.stop();
}

// -- the simulator ----------------------------------------------------------------

namespace {

const std::string sim_bin = RECOVERD_SIM_BIN;

} // namespace

TEST_CASE("e2e: every recoverd-sim scenario ends as expected (small sizes, "
          "its own daemon)") {
  for (const char* scenario :
       {"hardware-fault", "uce-retry", "network-fault", "fault-during-recovery",
        "switch-nic", "stress-test", "daemon-restart"}) {
    CAPTURE(scenario);
    auto [rc, out] = run_command(sim_bin + " --spawn-daemon --daemon-bin "
                                 + daemon_bin + " --jobs 2 --ranks 4 --scenario "
                                 + scenario);
    CHECK_MESSAGE(rc == 0, out);
    CHECK(out.find(std::string{scenario} + " ") != std::string::npos);
    CHECK(out.find("pass: 2/2 jobs as expected") != std::string::npos);
    CHECK(out.find("timeline of the first job") != std::string::npos);
  }
}

namespace {

// The metric names the panels of a Grafana dashboard query (a histogram's
// _bucket, _sum and _count series by their family's name).
std::set<std::string> grafana_series(const std::string& path) {
  std::ifstream in{path};
  auto board = nlohmann::json::parse(in);
  std::set<std::string> result;
  static const std::regex name{R"(\b((?:recoverd|process)_[a-z_]+)\b)"};
  for (const auto& panel : board.at("panels"))
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      auto expr = target.at("expr").get<std::string>();
      for (std::sregex_iterator i{expr.begin(), expr.end(), name}, end;
           i != end; ++i) {
        auto x = (*i)[1].str();
        for (const char* suffix : {"_bucket", "_sum", "_count"})
          if (x.size() > strlen(suffix)
              && x.compare(x.size() - strlen(suffix), strlen(suffix), suffix)
                   == 0)
            x.resize(x.size() - strlen(suffix));
        result.insert(x);
      }
    }
  REQUIRE(result.size() >= 20);
  return result;
}

} // namespace

TEST_CASE("e2e: recoverd-sim against a running daemon; usage and "
          "reachability exit codes") {
  temp_dir dir;
  running_daemon d{dir, "127.0.0.1:0",
                   {"--fault-flush-wait", "0", "--resource-release-wait", "0"}};
  auto [rc, out] = run_command(sim_bin + " --server " + d.address
                               + " --jobs 3 --ranks 8 --pods 4 --scenario all --quiet");
  CHECK_MESSAGE(rc == 0, out);
  MESSAGE("the restart scenario needs a daemon of its own: skipped, not failed");
  CHECK(out.find("daemon-restart") != std::string::npos);
  CHECK(out.find("skipped") != std::string::npos);
  CHECK(out.find("hardware-fault               3     3") != std::string::npos);
  MESSAGE("after every kind of flow, /metrics passes promtool's check");
  if (std::filesystem::exists("/usr/bin/promtool")) {
    REQUIRE_FALSE(d.http.empty());
    httplib::Client http{"http://" + d.http};
    auto page = http.Get("/metrics");
    REQUIRE(page);
    REQUIRE(page->status == 200);
    std::ofstream{dir / "metrics.txt"} << page->body;
    auto [prc, lint] = run_command("promtool check metrics < "
                                   + (dir / "metrics.txt"));
    CHECK_MESSAGE(prc == 0, lint);
    CHECK_MESSAGE(lint.empty(), lint);
    MESSAGE("every series the Grafana dashboard queries is served");
    for (const auto& series :
         grafana_series(std::string{RECOVERD_SOURCE_DIR}
                        + "/tools/deploy/grafana-dashboard.json")) {
      CAPTURE(series);
      CHECK(page->body.find("# TYPE " + series + " ") != std::string::npos);
    }
  } else {
    MESSAGE("promtool is not installed (Debian prometheus): not checked");
  }
  CHECK(run_command(sim_bin + " --scenario nope --server " + d.address).first == 2);
  CHECK(run_command(sim_bin + " --jobs 1").first == 2);
  CHECK(run_command(sim_bin + " --server 127.0.0.1:1 --scenario uce-retry").first == 3);
}

namespace {

// Reads the last message of an operator stream (a late subscriber gets the
// outcome of the last operation).
std::string last_operator_message(::Recover::Stub& stub, bool stress) {
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  std::string last;
  if (stress) {
    ::StressTestRequest req;
    req.set_jobid("e2e-job");
    auto r = stub.SubscribeStressTestResponse(&c, req);
    ::StressTestResponse x;
    while (r->Read(&x))
      last = x.msg();
    r->Finish();
  } else {
    ::SwitchNicRequest req;
    req.set_jobid("e2e-job");
    auto r = stub.SubscribeSwitchNicSignal(&c, req);
    ::SwitchNicResponse x;
    while (r->Read(&x))
      last = x.msg();
    r->Finish();
  }
  return last;
}

/// Drives one link switch or stress test through the real daemon and
/// SIGKILLs it once when the job reaches `kill_at`; the restarted daemon
/// must finish the operation.
void om_crash_at(bool stress, const std::string& kill_at) {
  CAPTURE(stress);
  CAPTURE(kill_at);
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  auto d = std::make_unique<running_daemon>(dir);
  auto address = d->address;
  REQUIRE(ctl(address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  auto crash_if = [&](const std::string& here) {
    if (here != kill_at)
      return;
    wait_state(address, kill_at);
    d->proc->kill(SIGKILL);
    REQUIRE(d->proc->wait() == 128 + SIGKILL);
    d = std::make_unique<running_daemon>(dir, address);
  };
  agent.start_subscribe();
  std::this_thread::sleep_for(300ms);
  // The worker stream: (re)opened on demand.
  ::ClientInfo who;
  who.set_jobid("e2e-job");
  std::unique_ptr<grpc::ClientContext> wctx;
  auto open_worker = [&] { wctx = std::make_unique<grpc::ClientContext>(); };
  std::unique_ptr<grpc::ClientReader<::SwitchRankList>> switch_worker;
  std::unique_ptr<grpc::ClientReader<::StressTestRankParams>> stress_worker;
  auto subscribe_worker = [&] {
    open_worker();
    wctx->set_deadline(std::chrono::system_clock::now() + 20s);
    wctx->set_wait_for_ready(true); // the daemon may just have restarted
    if (stress)
      stress_worker = agent.stub().SubscribeNotifyExecStressTest(wctx.get(), who);
    else
      switch_worker = agent.stub().SubscribeNotifySwitch(wctx.get(), who);
  };
  bool worker_first = kill_at != "NotifySwitchNicState"
                      && kill_at != "NotifyStressTestState";
  if (worker_first) {
    subscribe_worker();
    std::this_thread::sleep_for(200ms);
  }
  {
    ::Status started;
    grpc::ClientContext sctx;
    sctx.set_deadline(std::chrono::system_clock::now() + 10s);
    if (stress) {
      ::StressTestParam req;
      req.set_jobid("e2e-job");
      req.add_allnodesops(0);
      REQUIRE(agent.stub().StressTest(&sctx, req, &started).ok());
    } else {
      ::SwitchNics req;
      req.set_jobid("e2e-job");
      auto& ops = (*req.mutable_nicops())["n1"];
      ops.add_dev("1");
      ops.add_op(true);
      REQUIRE(agent.stub().SwitchNicTrack(&sctx, req, &started).ok());
    }
    REQUIRE_MESSAGE(started.code() == 0, started.info());
  }
  auto pause = agent.next_signal(10s);
  REQUIRE(pause);
  REQUIRE(pause->signaltype() == "stopTrain");
  crash_if("WaitReportPauseCompleteState");
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  crash_if(stress ? "NotifyStressTestState" : "NotifySwitchNicState");
  if (!worker_first || kill_at == "WaitReportPauseCompleteState")
    subscribe_worker();
  if (stress) {
    ::StressTestRankParams params;
    REQUIRE(stress_worker->Read(&params));
    CHECK(params.stressparam_size() == 4);
  } else {
    ::SwitchRankList list;
    REQUIRE(switch_worker->Read(&list));
    CHECK(list.rankid(0) == "3");
  }
  crash_if(stress ? "WaitStressTestFinishedState" : "WaitSwitchNicFinishedState");
  if (kill_at == "NotifyContinueTrainState")
    agent.stop(); // the continue signal waits in the outbox
  ::Status resp;
  grpc::ClientContext rctx;
  rctx.set_wait_for_ready(true);
  rctx.set_deadline(std::chrono::system_clock::now() + 10s);
  if (stress) {
    ::StressTestResult res;
    res.set_jobid("e2e-job");
    (*(*res.mutable_stressresult())["3"].mutable_rankresult())["0"].set_code("0");
    REQUIRE(agent.stub().ReplyStressTestResult(&rctx, res, &resp).ok());
  } else {
    ::SwitchResult res;
    res.set_jobid("e2e-job");
    res.set_result(true);
    REQUIRE(agent.stub().ReplySwitchNicResult(&rctx, res, &resp).ok());
  }
  CHECK(resp.code() == 0);
  crash_if("NotifyContinueTrainState");
  if (kill_at == "NotifyContinueTrainState")
    agent.start_subscribe();
  std::string type;
  std::optional<::ProcessManageSignal> cont;
  while ((cont = agent.next_signal(10s)) && cont->changestrategy() != "continue") {
  }
  REQUIRE(cont);
  if (!stress)
    CHECK(cont->uuid() == pause->uuid());
  crash_if("WaitContinueTrainState");
  REQUIRE(agent.report_recover_status(0, "continue").code() == 0);
  auto [rc, got] = ctl(address, "job get e2e-job --output json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recovered\"") != std::string::npos);
  CHECK(got.find("\"flows\": \"1\"") != std::string::npos);
  auto last = last_operator_message(agent.stub(), stress);
  CHECK(last.rfind(stress ? "stress test finish" : "switch nic finish", 0) == 0);
  if (wctx)
    wctx->TryCancel();
  agent.stop();
}

} // namespace

TEST_CASE("e2e crash test: SIGKILL once at each state of a link switch and "
          "of a stress test") {
  for (bool stress : {false, true})
    for (const char* at :
         {"WaitReportPauseCompleteState",
          stress ? "NotifyStressTestState" : "NotifySwitchNicState",
          stress ? "WaitStressTestFinishedState" : "WaitSwitchNicFinishedState",
          "NotifyContinueTrainState", "WaitContinueTrainState"})
      om_crash_at(stress, at);
}

namespace {

// Appends a record for `job` at its next seq straight into a stopped
// daemon's log, as a write torn by a crash leaves it (`torn`) or as damage.
void append_raw(const std::string& data_dir, const std::string& job,
                uint64_t seq, std::string bytes) {
  recoverd::storage::event_log_options opts;
  opts.path = data_dir;
  auto log = recoverd::storage::event_log::open(opts);
  REQUIRE_MESSAGE(log, (log ? "" : recoverd::message_of(log.error())));
  REQUIRE_FALSE((*log)->append({{job, seq, std::move(bytes)}}));
}

std::string read_file(const std::string& path) {
  std::ifstream f{path};
  return {std::istreambuf_iterator<char>(f), {}};
}

} // namespace

TEST_CASE("e2e: a torn last record is discarded at start-up and reported; "
          "damage before the last record stops the daemon") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  {
    running_daemon d{dir};
    REQUIRE(ctl(d.address, "job put " + (dir / "job.json")).first == 0);
    REQUIRE(ctl(d.address, "annotate e2e-job owner=ops").first == 0);
    d.proc->kill(SIGTERM);
    REQUIRE(d.proc->wait() == 0);
  }
  MESSAGE("a crash tore the job's third write");
  recoverd::event torn_event{3, 1'700'000'000'000,
                             recoverd::annotations_changed{
                               {{"owner", "torn"}}, {}, "platform"}};
  auto bytes = recoverd::storage::encode_event(torn_event);
  bytes.resize(bytes.size() / 2);
  REQUIRE_FALSE(recoverd::storage::decode_event(bytes));
  append_raw(dir / "data", "e2e-job", 3, bytes);
  {
    running_daemon d{dir};
    auto [rc, got] = ctl(d.address, "job get e2e-job --output json");
    REQUIRE_MESSAGE(rc == 0, got);
    CHECK(got.find("\"owner\": \"ops\"") != std::string::npos);
    CHECK(got.find("\"lastSeq\": \"2\"") != std::string::npos);
    MESSAGE("the job's next change takes seq 3");
    REQUIRE(ctl(d.address, "annotate e2e-job after=1").first == 0);
    d.proc->kill(SIGTERM);
    REQUIRE(d.proc->wait() == 0);
  }
  auto text = read_file(dir / "daemon.log");
  CHECK(text.find("warning recoverd discarded event 3 of job e2e-job")
        != std::string::npos);
  CHECK(text.find("replayed 1 jobs (0 from snapshots, 0 deleted) and 2 "
                  "events")
        != std::string::npos);
  CHECK(text.find("discarded 1 torn records") != std::string::npos);
  MESSAGE("the next start finds a clean log with the new seq 3");
  {
    running_daemon d{dir};
    auto [rc, got] = ctl(d.address, "job get e2e-job --output json");
    REQUIRE_MESSAGE(rc == 0, got);
    CHECK(got.find("\"after\": \"1\"") != std::string::npos);
    CHECK(got.find("\"owner\": \"ops\"") != std::string::npos);
    CHECK(got.find("\"lastSeq\": \"3\"") != std::string::npos);
    d.proc->kill(SIGTERM);
    REQUIRE(d.proc->wait() == 0);
  }
  text = read_file(dir / "daemon.log");
  // The stop before stored the job's digest at seq 3: the job started
  // dormant, and the get above read its 3 events.
  CHECK(text.find("1 of the jobs dormant") != std::string::npos);
  CHECK(text.find("discarded 0 torn records") != std::string::npos);
  MESSAGE("an undecodable record that is not the job's last is corruption: "
          "the dormant job's requests are refused, its status names it");
  append_raw(dir / "data", "e2e-job", 2, "\xff\xff garbage");
  {
    running_daemon d{dir};
    auto [rc, got] = ctl(d.address, "job get e2e-job");
    CHECK(rc != 0);
    auto [prc, put] = ctl(d.address, "job put " + (dir / "job.json"));
    CHECK(prc != 0);
    CHECK(put.find("cannot be replayed from the log") != std::string::npos);
    auto [src, status] = ctl(d.address, "status --output json");
    CHECK(status.find("job e2e-job event 2 cannot be decoded")
          != std::string::npos);
    d.proc->kill(SIGTERM);
    REQUIRE(d.proc->wait() == 0);
  }
  CHECK(read_file(dir / "daemon.log")
          .find("cannot replay the dormant job e2e-job")
        != std::string::npos);
  MESSAGE("once the job changed after the clean stop (as after a crash), the "
          "start-up replays it and refuses to start");
  append_raw(dir / "data", "e2e-job", 4,
             recoverd::storage::encode_event(
               {4, 1'700'000'000'000,
                recoverd::annotations_changed{{{"late", "1"}}, {}, "platform"}}));
  auto [rc, out] = run_command(daemon_bin + " --listen 127.0.0.1:0 --data-dir "
                               + (dir / "data"));
  CHECK(rc == 1);
  CHECK(out.find("job e2e-job event 2 cannot be decoded") != std::string::npos);
}

TEST_CASE("e2e: recoverctl is consistent: every command has --help, "
          "--server and --output table|json (also after the command)") {
  for (const char* cmd :
       {"", "job", "job put", "job get", "job delete", "jobs", "annotate",
        "switch-nic", "stress-test", "nodes", "nodes clear", "timeline",
        "events", "incidents", "status", "stats"}) {
    CAPTURE(cmd);
    auto [rc, out] = run_command(ctl_bin + " " + cmd + " --help");
    CHECK(rc == 0);
    CHECK(out.find("--server") != std::string::npos);
    CHECK(out.find("--output") != std::string::npos);
  }
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  running_daemon d{dir};
  auto [prc, put] = run_command(ctl_bin + " job put " + (dir / "job.json")
                                + " --server " + d.address + " -o json");
  CHECK(prc == 0);
  CHECK(put.find("\"created\": true") != std::string::npos);
  auto [trc, table] = ctl(d.address, "job get e2e-job");
  CHECK(trc == 0);
  CHECK(table.find("STATE        INIT") != std::string::npos);
  CHECK(table.find("TOPOLOGY     2 pods, 4 ranks") != std::string::npos);
  CHECK(table.find("ANNOTATIONS  team=a") != std::string::npos);
  auto [jrc, json] = ctl(d.address, "--output json job get e2e-job");
  CHECK(jrc == 0);
  CHECK(json.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  auto [arc, ann] = ctl(d.address, "annotate e2e-job owner=ops");
  CHECK(arc == 0);
  CHECK(ann.find("owner=ops") != std::string::npos);
  auto [nrc, nodes] = ctl(d.address, "nodes -o json");
  CHECK(nrc == 0);
  CHECK(nodes.find("{") != std::string::npos);
  CHECK(ctl(d.address, "jobs --output xml").first == 2);
}

TEST_CASE("e2e: recoverctl as kubectl users expect: -o yaml|wide, a "
          "suggestion for a typo, durations, RECOVERCTL_SERVER, columns "
          "that fit, jobs -w, completion, version") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  running_daemon d{dir};
  auto env = "RECOVERCTL_SERVER=" + d.address + " " + ctl_bin;
  MESSAGE("the server from the environment; version of both sides");
  auto [vrc, version] = run_command(env + " version");
  CHECK(vrc == 0);
  CHECK(version.find(std::string{"recoverctl "} + RECOVERD_VERSION)
        != std::string::npos);
  CHECK(version.find(std::string{"recoverd "} + RECOVERD_VERSION + " at "
                     + d.address)
        != std::string::npos);
  MESSAGE("an unknown command is named, with the closest one");
  auto [urc, unknown] = run_command(env + " jbos");
  CHECK(urc == 2);
  CHECK(unknown.find("unknown command \"jbos\"; did you mean \"jobs\"?")
        != std::string::npos);
  auto [frc, far] = run_command(env + " --timeout 2s frobnicate");
  CHECK(frc == 2);
  CHECK(far.find("unknown command \"frobnicate\"") != std::string::npos);
  CHECK(far.find("did you mean") == std::string::npos);
  MESSAGE("durations for --timeout; a bad one is refused before sending");
  CHECK(run_command(env + " jobs --timeout 1500ms").first == 0);
  auto [trc, bad_timeout] = run_command(env + " jobs --timeout soon");
  CHECK(trc == 2);
  CHECK(bad_timeout.find("not a positive duration") != std::string::npos);
  MESSAGE("jobs -w prints the table, then a row per change");
  child_process watcher{ctl_bin, {"--server", d.address, "jobs", "-w"},
                        dir / "watch.err"};
  CHECK_FALSE(watcher.read_line_after("JOB ").empty());
  CHECK(run_command(env + " job put " + (dir / "job.json")).first == 0);
  auto created = watcher.read_line_after("e2e-job ");
  CHECK(created.find(" INIT ") != std::string::npos);
  CHECK(run_command(env + " annotate e2e-job owner=ops").first == 0);
  auto annotated = watcher.read_line_after("e2e-job ");
  CHECK_FALSE(annotated.empty());
  CHECK(annotated != created);
  MESSAGE("columns as wide as their content, two spaces apart");
  auto [lrc, table] = run_command(env + " jobs");
  CHECK(lrc == 0);
  CHECK(table.rfind("JOB      NAME  NAMESPACE  STATE  AGENT  PODS  RANKS  SEQ\n"
                    "e2e-job  e2e   ml         INIT   -      2     4",
                    0)
        == 0);
  auto [wrc, wide] = run_command(env + " jobs -o wide");
  CHECK(wrc == 0);
  CHECK(wide.find("HEALTH") != std::string::npos);
  CHECK(wide.find("LAST-OUTCOME") != std::string::npos);
  MESSAGE("YAML is the JSON answer as YAML");
  auto [yrc, yaml] = run_command(env + " job get e2e-job -o yaml");
  CHECK(yrc == 0);
  CHECK(yaml.find("recoveryState: INIT") != std::string::npos);
  CHECK(yaml.find("jobId: e2e-job") != std::string::npos);
  MESSAGE("bash completion: a valid script that completes commands, their "
          "options and job ids");
  auto script = dir / "completion.bash";
  CHECK(run_command(env + " completion bash > " + script).first == 0);
  auto complete = [&](const std::string& words, int cword) {
    return run_command("PATH="
                       + std::filesystem::path{ctl_bin}.parent_path().string()
                       + ":$PATH "
                       + "RECOVERCTL_SERVER=" + d.address + " bash -c 'source "
                       + script + "; COMP_WORDS=(" + words + "); COMP_CWORD="
                       + std::to_string(cword)
                       + "; _recoverctl; echo \"${COMPREPLY[*]}\"'");
  };
  auto [c1rc, c1] = complete("recoverctl jo", 1);
  CHECK(c1rc == 0);
  CHECK(c1 == "job jobs\n");
  auto [c2rc, c2] = complete("recoverctl job get ''", 3);
  CHECK(c2rc == 0);
  CHECK(c2.find("e2e-job") != std::string::npos);
  auto [c3rc, c3] = complete("recoverctl jobs --wat", 2);
  CHECK(c3rc == 0);
  CHECK(c3 == "--watch\n");
}

TEST_CASE("e2e: recoverctl stats gives goodput per job and for the fleet, "
          "with incidents by cause, after simulated faults") {
  temp_dir dir;
  running_daemon d{dir, "127.0.0.1:0",
                   {"--fault-flush-wait", "0", "--resource-release-wait", "0"}};
  MESSAGE("two fault-center faults (uce-retry), one agent report "
          "(hardware-fault)");
  for (const char* scenario : {"--jobs 2 --scenario uce-retry",
                               "--jobs 1 --scenario hardware-fault"}) {
    auto [rc, out] = run_command(sim_bin + " --server " + d.address + " "
                                 + scenario + " --ranks 8 --pods 4 --quiet");
    CHECK_MESSAGE(rc == 0, out);
  }
  auto [rc, table] = ctl(d.address, "stats");
  CHECK(rc == 0);
  for (const char* part : {"INCIDENTS", "MTTR", "ETTR", "(fleet)",
                           "agent-report=1,fault-center=2"}) {
    CAPTURE(part);
    CHECK(table.find(part) != std::string::npos);
  }
  auto [jrc, json] = ctl(d.address, "stats -o json");
  CHECK(jrc == 0);
  CHECK(json.find("\"fault-center\": \"2\"") != std::string::npos);
  auto [mrc, missing] = ctl(d.address, "stats missing");
  CHECK(mrc == 1);
  CHECK(missing.find("job missing is not known") != std::string::npos);
}

TEST_CASE("e2e: recoverctl status lists every component of the daemon, one "
          "job or every job on request") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  // A log cache other than the default, to see it in the journal's status.
  running_daemon d{dir, "127.0.0.1:0", {"--log-cache", "8m"}};
  CHECK(ctl(d.address, "job put " + (dir / "job.json")).first == 0);
  auto [rc, table] = ctl(d.address, "status");
  CHECK(rc == 0);
  for (const char* part : {"COMPONENT", "job_registry", "journal",
                           "event_hub", "inspector", "historian"}) {
    CAPTURE(part);
    CHECK(table.find(part) != std::string::npos);
  }
  CHECK(table.find("jobs=1") != std::string::npos);
  CHECK(table.find("state.INIT=1") != std::string::npos);
  CHECK(table.find("is healthy") != std::string::npos);
  CHECK(table.find("job/e2e-job") == std::string::npos);
  auto [jrc, one] = ctl(d.address, "status --job e2e-job -o json");
  CHECK(jrc == 0);
  CHECK(one.find("\"name\": \"job/e2e-job\"") != std::string::npos);
  CHECK(one.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(one.find("\"healthy\": true") != std::string::npos);
  auto [drc, all] = ctl(d.address, "status --detailed");
  CHECK(drc == 0);
  CHECK(all.find("job/e2e-job") != std::string::npos);
  CHECK(all.find("maxBatch=") != std::string::npos);
  CHECK(all.find("blockCacheCapacity=8388608") != std::string::npos);
  CHECK(all.find("memtableBytes=") != std::string::npos);
  auto [mrc, missing] = ctl(d.address, "status --job missing");
  CHECK(mrc == 1);
  CHECK(missing.find("job missing is not known") != std::string::npos);
  auto [urc, unreachable] = run_command(
    ctl_bin + " --server 127.0.0.1:1 --timeout 2 status");
  CHECK(urc == 3);
}

// -- re-delivery of the awaited signal (design §4.1) ------------------------------

namespace {

/// Every agent signal as the stream delivered it, re-deliveries included
/// (the client's queue has each once).
struct signal_record {
  std::mutex mtx;
  std::vector<::ProcessManageSignal> xs;

  void add(const ::ProcessManageSignal& sig) {
    if (sig.signaltype() == "keep-alive")
      return;
    std::lock_guard<std::mutex> guard{mtx};
    xs.push_back(sig);
  }

  size_t count(const ::ProcessManageSignal& like) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::count_if(xs.begin(), xs.end(), [&](const auto& x) {
      return recoverd::agent::signal_key(x)
             == recoverd::agent::signal_key(like);
    });
  }

  // Waits until `like` arrived `n` times.
  bool wait_count(const ::ProcessManageSignal& like, size_t n) {
    for (int i = 0; i < 250 && count(like) < n; ++i)
      std::this_thread::sleep_for(20ms);
    return count(like) >= n;
  }
};

// A report sent while the daemon is down fails, as TaskD's does: no
// wait-for-ready, no retry.
template <class Request, class Call>
void report_fails(Call call, const Request& req) {
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 2s);
  ::Status resp;
  auto st = call(&c, req, &resp);
  CHECK_MESSAGE(!st.ok(), "the report reached a killed daemon");
}

const std::vector<std::string> no_waits{"--fault-flush-wait", "0",
                                        "--resource-release-wait", "0"};

// A recovery whose awaited signal (stopTrain, or globalFault with
// `at_global`) is delivered, then the daemon is SIGKILLed; the answer sent
// while it is down is lost. The restarted daemon gives the new stream the
// signal again with its uuid, and the flow completes.
void lost_answer(bool at_global) {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  auto d = std::make_unique<running_daemon>(dir, "127.0.0.1:0", no_waits);
  auto address = d->address;
  REQUIRE(ctl(address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{address, "e2e-job"};
  signal_record all;
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe([&](const ::ProcessManageSignal& s) { all.add(s); });
  std::this_thread::sleep_for(300ms);
  REQUIRE(agent.report_process_fault({{"2", "1"}}).code() == 0);
  auto stop = agent.next_signal(5s);
  REQUIRE(stop);
  REQUIRE(stop->signaltype() == "stopTrain");
  auto awaited = *stop;
  auto wait = std::string{"WaitReportStopCompleteState"};
  if (at_global) {
    REQUIRE(agent.report_stop_complete(0).code() == 0);
    auto global = agent.next_signal(5s);
    REQUIRE(global);
    REQUIRE(global->signaltype() == "globalFault");
    awaited = *global;
    wait = "WaitReportRecoverStrategyState";
  }
  wait_state(address, wait);
  MESSAGE("kill -9 in " << wait << "; the answer to " << awaited.signaltype()
                        << " is lost");
  d->proc->kill(SIGKILL);
  REQUIRE(d->proc->wait() == 128 + SIGKILL);
  auto& stub = agent.stub();
  if (at_global) {
    ::RecoverStrategyRequest req;
    req.set_jobid("e2e-job");
    req.add_strategies("recover");
    report_fails(
      [&](auto* c, const auto& r, auto* s) {
        return stub.ReportRecoverStrategy(c, r, s);
      },
      req);
  } else {
    ::StopCompleteRequest req;
    req.set_jobid("e2e-job");
    req.mutable_status()->set_code(0);
    report_fails(
      [&](auto* c, const auto& r, auto* s) {
        return stub.ReportStopComplete(c, r, s);
      },
      req);
  }
  d = std::make_unique<running_daemon>(dir, address, no_waits);
  wait_reachable(agent);
  MESSAGE("the re-opened stream gets " << awaited.signaltype()
                                       << " again, same uuid");
  REQUIRE(all.wait_count(awaited, 2));
  CHECK(agent.redelivered() >= 1);
  CHECK(recovery_state_of(address) == wait);
  if (!at_global) {
    REQUIRE(agent.report_stop_complete(0).code() == 0);
    auto global = agent.next_signal(5s);
    REQUIRE(global);
    CHECK(global->signaltype() == "globalFault");
    CHECK(global->uuid() == stop->uuid());
  }
  auto ack = agent.report_recover_strategy({"recover"});
  REQUIRE_MESSAGE(ack.code() == 0, ack.info());
  auto change = agent.next_signal(5s);
  REQUIRE(change);
  CHECK(change->changestrategy() == "recover");
  CHECK(change->uuid() == stop->uuid());
  REQUIRE(agent.report_recover_status(0, "recover").code() == 0);
  auto [rc, got] = ctl(address, "job get e2e-job --output json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  agent.stop();
}

// A link switch (or stress test) whose worker message is delivered, then
// the daemon is SIGKILLed; the worker's result sent while it is down is
// lost. A new worker stream gets the message again, a new operator stream
// follows the action to its outcome, and the action completes.
void lost_worker_result(bool stress) {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  auto d = std::make_unique<running_daemon>(dir, "127.0.0.1:0", no_waits);
  auto address = d->address;
  REQUIRE(ctl(address, "job put " + (dir / "job.json")).first == 0);
  recoverd::agent::client agent{address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  auto& stub = agent.stub();
  ::ClientInfo who;
  who.set_jobid("e2e-job");
  // Reads the first message of a new worker stream, then closes it.
  auto read_worker = [&](auto& out) {
    grpc::ClientContext wctx;
    wctx.set_deadline(std::chrono::system_clock::now() + 10s);
    wctx.set_wait_for_ready(true);
    bool got = false;
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>,
                                 ::StressTestRankParams>) {
      auto w = stub.SubscribeNotifyExecStressTest(&wctx, who);
      got = w->Read(&out);
      wctx.TryCancel();
      w->Finish();
    } else {
      auto w = stub.SubscribeNotifySwitch(&wctx, who);
      got = w->Read(&out);
      wctx.TryCancel();
      w->Finish();
    }
    return got;
  };
  std::this_thread::sleep_for(300ms);
  {
    ::Status started;
    grpc::ClientContext sctx;
    sctx.set_deadline(std::chrono::system_clock::now() + 10s);
    if (stress) {
      ::StressTestParam req;
      req.set_jobid("e2e-job");
      req.add_allnodesops(0);
      REQUIRE(stub.StressTest(&sctx, req, &started).ok());
    } else {
      ::SwitchNics req;
      req.set_jobid("e2e-job");
      auto& ops = (*req.mutable_nicops())["n1"];
      ops.add_dev("1");
      ops.add_op(true);
      REQUIRE(stub.SwitchNicTrack(&sctx, req, &started).ok());
    }
    REQUIRE_MESSAGE(started.code() == 0, started.info());
  }
  auto pause = agent.next_signal(10s);
  REQUIRE(pause);
  REQUIRE(pause->signaltype() == "stopTrain");
  // The list goes to the first worker stream that opens.
  std::thread first_worker_reply;
  ::SwitchRankList list;
  ::StressTestRankParams params;
  std::atomic<bool> first_read{false};
  first_worker_reply = std::thread{[&] {
    first_read = stress ? read_worker(params) : read_worker(list);
  }};
  std::this_thread::sleep_for(200ms);
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  first_worker_reply.join();
  REQUIRE(first_read);
  auto wait = std::string{stress ? "WaitStressTestFinishedState"
                                 : "WaitSwitchNicFinishedState"};
  wait_state(address, wait);
  MESSAGE("kill -9 in " << wait << "; the worker's result is lost");
  d->proc->kill(SIGKILL);
  REQUIRE(d->proc->wait() == 128 + SIGKILL);
  ::StressTestResult stress_result;
  stress_result.set_jobid("e2e-job");
  for (const auto& entry : params.stressparam())
    (*(*stress_result.mutable_stressresult())[entry.first]
        .mutable_rankresult())["0"]
      .set_code("0");
  ::SwitchResult switch_result;
  switch_result.set_jobid("e2e-job");
  switch_result.set_result(true);
  if (stress)
    report_fails(
      [&](auto* c, const auto& r, auto* s) {
        return stub.ReplyStressTestResult(c, r, s);
      },
      stress_result);
  else
    report_fails(
      [&](auto* c, const auto& r, auto* s) {
        return stub.ReplySwitchNicResult(c, r, s);
      },
      switch_result);
  d = std::make_unique<running_daemon>(dir, address, no_waits);
  wait_reachable(agent);
  MESSAGE("a new worker stream gets the list again");
  if (stress) {
    ::StressTestRankParams again;
    REQUIRE(read_worker(again));
    // Map order on the wire is not fixed: compare entry by entry.
    REQUIRE(again.stressparam_size() == params.stressparam_size());
    for (const auto& [rank, ops] : params.stressparam()) {
      REQUIRE(again.stressparam().count(rank) == 1);
      CHECK(again.stressparam().at(rank).SerializeAsString()
            == ops.SerializeAsString());
    }
  } else {
    ::SwitchRankList again;
    REQUIRE(read_worker(again));
    CHECK(again.SerializeAsString() == list.SerializeAsString());
    CHECK(again.rankid(0) == "3");
  }
  CHECK(recovery_state_of(address) == wait);
  MESSAGE("a new operator stream follows the running action to its outcome");
  std::vector<std::string> told;
  std::atomic<bool> om_open{false};
  std::thread om_thread{[&] {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 20s);
    c.set_wait_for_ready(true);
    auto take = [&](auto& r, auto& x) {
      om_open = true;
      while (r->Read(&x))
        told.push_back(x.msg());
      r->Finish();
    };
    if (stress) {
      ::StressTestRequest req;
      req.set_jobid("e2e-job");
      auto r = stub.SubscribeStressTestResponse(&c, req);
      ::StressTestResponse x;
      take(r, x);
    } else {
      ::SwitchNicRequest req;
      req.set_jobid("e2e-job");
      auto r = stub.SubscribeSwitchNicSignal(&c, req);
      ::SwitchNicResponse x;
      take(r, x);
    }
  }};
  while (!om_open)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms); // the stream reaches the job
  ::Status resp;
  grpc::ClientContext rctx;
  rctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto st = stress ? stub.ReplyStressTestResult(&rctx, stress_result, &resp)
                   : stub.ReplySwitchNicResult(&rctx, switch_result, &resp);
  REQUIRE(st.ok());
  CHECK_MESSAGE(resp.code() == 0, resp.info());
  std::optional<::ProcessManageSignal> cont;
  while ((cont = agent.next_signal(10s))
         && cont->changestrategy() != "continue") {
  }
  REQUIRE(cont);
  REQUIRE(agent.report_recover_status(0, "continue").code() == 0);
  om_thread.join();
  REQUIRE_FALSE(told.empty());
  CHECK(told.back().rfind(stress ? "stress test finish" : "switch nic finish",
                          0)
        == 0);
  auto [rc, got] = ctl(address, "job get e2e-job --output json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recovered\"") != std::string::npos);
  agent.stop();
}

} // namespace

TEST_CASE("e2e redeliver: stopTrain delivered, SIGKILL, the stop report is "
          "lost; the new stream gets stopTrain again and the flow completes") {
  lost_answer(false);
}

TEST_CASE("e2e redeliver: globalFault delivered, SIGKILL, the strategy "
          "report is lost; the new stream gets globalFault again and the "
          "flow completes") {
  lost_answer(true);
}

TEST_CASE("e2e redeliver: SwitchRankList delivered, SIGKILL, the switch "
          "result is lost; a new worker stream gets the list again") {
  lost_worker_result(false);
}

TEST_CASE("e2e redeliver: StressTestRankParams delivered, SIGKILL, the "
          "stress result is lost; a new worker stream gets them again") {
  lost_worker_result(true);
}

TEST_CASE("e2e: after SIGTERM the idle job starts dormant; it is listed "
          "unread, and its agent's fault wakes it into a recovery") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  std::vector<std::string> fast{"--fault-flush-wait", "0",
                                "--resource-release-wait", "0"};
  std::string listed_before;
  {
    running_daemon d{dir, "127.0.0.1:0", fast};
    REQUIRE(ctl(d.address, "job put " + (dir / "job.json")).first == 0);
    recoverd::agent::client agent{d.address, "e2e-job"};
    REQUIRE(agent.init_clusterd().code() == 0);
    auto [rc, out] = ctl(d.address, "jobs");
    REQUIRE_MESSAGE(rc == 0, out);
    listed_before = out;
    d.proc->kill(SIGTERM);
    REQUIRE(d.proc->wait() == 0);
  }
  CHECK(read_file(dir / "daemon.log")
          .find("stored the digests of 1 jobs for the next start-up")
        != std::string::npos);
  running_daemon d{dir, "127.0.0.1:0", fast};
  auto text = read_file(dir / "daemon.log");
  CHECK(text.find("replayed 1 jobs (0 from snapshots, 0 deleted) and 0 "
                  "events")
        != std::string::npos);
  CHECK(text.find("1 of the jobs dormant") != std::string::npos);
  MESSAGE("the listing is the one before the stop");
  auto [rc, listed] = ctl(d.address, "jobs");
  REQUIRE_MESSAGE(rc == 0, listed);
  CHECK(listed == listed_before);
  MESSAGE("the agent registers again and reports a fault: stopTrain");
  recoverd::agent::client agent{d.address, "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  std::this_thread::sleep_for(300ms);
  REQUIRE(agent.report_process_fault({{"2", "1"}}).code() == 0);
  auto stop = agent.next_signal(5s);
  REQUIRE(stop);
  CHECK(stop->signaltype() == "stopTrain");
}
