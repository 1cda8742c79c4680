// End-to-end: a recovery on the real daemon, then its story told by
// recoverctl from the running daemon and offline from the data directory
// (while the daemon runs, after it stopped, and on a copy).

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "agent.hpp"
#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"
#include "platform.grpc.pb.h"

using namespace recoverd::test;
using namespace std::chrono_literals;
namespace pb = recoverd::platform::v1;

namespace {

const std::string daemon_bin = RECOVERD_BIN;
const std::string ctl_bin = RECOVERCTL_BIN;

const char* job_file = R"({
  "jobId": "tl-job",
  "name": "timeline",
  "recoverStrategies": ["recover", "dump"],
  "processRecoverEnable": true,
  "pods": [
    {"podRank": 0, "uid": "u0", "nodeName": "n0", "running": true,
     "devices": [{"deviceId": "0", "rankId": "0"}, {"deviceId": "1", "rankId": "1"}]},
    {"podRank": 1, "uid": "u1", "nodeName": "n1", "running": true,
     "devices": [{"deviceId": "0", "rankId": "2"}, {"deviceId": "1", "rankId": "3"}]}
  ]
})";

std::pair<int, std::string> ctl(const std::string& args) {
  return run_command(ctl_bin + " " + args);
}

std::string recovery_state(pb::Platform::Stub& stub) {
  pb::JobRef ref;
  ref.set_jobid("tl-job");
  pb::JobStatus st;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 5s);
  if (!stub.GetJob(&c, ref, &st).ok())
    return {};
  return st.subscribed() ? st.recoverystate() : "unsubscribed";
}

void wait_state(pb::Platform::Stub& stub, const std::string& state) {
  for (int i = 0; i < 500 && recovery_state(stub) != state; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(recovery_state(stub) == state);
}

// Everything after the first line (the header names the source).
std::string body(const std::string& out) {
  auto nl = out.find('\n');
  return nl == std::string::npos ? std::string{} : out.substr(nl + 1);
}

} // namespace

TEST_CASE("e2e: recoverctl timeline, incidents and events, online and "
          "offline from the data directory") {
  temp_dir dir;
  {
    std::ofstream f{dir / "job.json"};
    f << job_file;
  }
  auto data = dir / "data";
  auto d = std::make_unique<child_process>(
    daemon_bin,
    std::vector<std::string>{"--listen", "127.0.0.1:0", "--http-listen",
                             "127.0.0.1:0", "--data-dir", data,
                             "--fault-flush-wait", "0", "--resource-release-wait",
                             "0", "--hccl-convergence-wait", "0",
                             "--report-timeout", "20s"},
    dir / "daemon.log");
  auto address = d->read_line_after("recoverd: listening on ");
  REQUIRE_MESSAGE(!address.empty(), "the daemon did not start");
  CHECK_FALSE(d->read_line_after("recoverd: http on ").empty());
  auto server = "--server " + address + " ";
  auto [prc, pout] = ctl(server + "job put " + (dir / "job.json"));
  REQUIRE_MESSAGE(prc == 0, pout);
  auto platform = pb::Platform::NewStub(
    grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));

  MESSAGE("a recovery: fault, stop, strategy, success");
  {
    recoverd::agent::client agent{address, "tl-job"};
    REQUIRE(agent.init_clusterd().code() == 0);
    agent.start_subscribe();
    wait_state(*platform, "INIT");
    CHECK(agent.report_process_fault({{"2", "1"}}).code() == 0);
    auto sig = agent.next_signal(10s);
    REQUIRE(sig);
    CHECK(sig->signaltype() == "stopTrain");
    wait_state(*platform, "WaitReportStopCompleteState");
    CHECK(agent.report_stop_complete(0).code() == 0);
    sig = agent.next_signal(10s);
    REQUIRE(sig);
    CHECK(sig->signaltype() == "globalFault");
    wait_state(*platform, "WaitReportRecoverStrategyState");
    CHECK(agent.report_recover_strategy({"recover"}).code() == 0);
    sig = agent.next_signal(10s);
    REQUIRE(sig);
    wait_state(*platform, "WaitReportProcessRecoverStatusState");
    CHECK(agent.report_recover_status(0, "recover").code() == 0);
    wait_state(*platform, "INIT");
  }

  MESSAGE("timeline from the daemon and, while it runs, from the data dir");
  auto [rc, online] = ctl(server + "timeline tl-job");
  REQUIRE_MESSAGE(rc == 0, online);
  CHECK(online.find("job tl-job: ") == 0);
  CHECK(online.find("== incident 1: recovery uuid ") != std::string::npos);
  CHECK(online.find("strategy recover, outcome recover-success")
        != std::string::npos);
  // The root cause: the agent's report of rank 2, placed by the topology.
  CHECK(online.find(", cause agent-report at ") != std::string::npos);
  CHECK(online.find(" level normal") != std::string::npos);
  CHECK(online.find("faultOccur: INIT -> NotifyWaitFaultFlushingState")
        != std::string::npos);
  CHECK(online.find("+0.000s") != std::string::npos);
  CHECK(online.find("   phases: fault_seen +0.000s, stop_acknowledged +")
        != std::string::npos);
  CHECK(online.find("result +") != std::string::npos);
  CHECK(online.find("== end of incident 1") != std::string::npos);
  CHECK(online.find("job created: 2 pods, 4 ranks") != std::string::npos);
  auto [orc, offline] = ctl("timeline tl-job --data-dir " + data);
  REQUIRE_MESSAGE(orc == 0, offline);
  CHECK(offline.find("(data directory " + data + ")") != std::string::npos);
  CHECK(body(offline) == body(online));

  MESSAGE("incidents and events agree online and offline");
  auto [irc, inc] = ctl(server + "incidents tl-job");
  REQUIRE_MESSAGE(irc == 0, inc);
  CHECK(inc.find("recover-success") != std::string::npos);
  CHECK(inc.find("stop_acknowledged") != std::string::npos);
  auto [iorc, inc_off] = ctl("incidents tl-job --json --data-dir " + data);
  REQUIRE(iorc == 0);
  CHECK(inc_off.find("\"outcome\": \"recover-success\"") != std::string::npos);
  auto [erc, events] = ctl(server + "events tl-job");
  REQUIRE(erc == 0);
  auto [eorc, events_off] = ctl("events tl-job --data-dir " + data);
  REQUIRE(eorc == 0);
  CHECK(events == events_off);
  auto lines = std::count(events.begin(), events.end(), '\n');
  CHECK(lines > 10);

  MESSAGE("events --follow prints what is appended next");
  {
    child_process follow{ctl_bin,
                         {"--server", address, "events", "tl-job", "--follow",
                          "--from", std::to_string(lines)},
                         dir / "follow.log"};
    CHECK_FALSE(follow.read_line_after("#" + std::to_string(lines)).empty());
    // The watch is opened before the history is read; give it a moment.
    std::this_thread::sleep_for(200ms);
    auto [arc, aout] = ctl(server + "annotate tl-job note=after");
    REQUIRE_MESSAGE(arc == 0, aout);
    auto next = follow.read_line_after("#" + std::to_string(lines + 1));
    CHECK(next.find("annotations by platform: note=after")
          != std::string::npos);
  }

  MESSAGE("after the daemon stopped, and on a copy of the data directory");
  d->kill(SIGTERM);
  CHECK(d->wait() == 0);
  auto copy = dir / "copy";
  std::filesystem::copy(data, copy, std::filesystem::copy_options::recursive);
  auto [crc, copied] = ctl("timeline tl-job --data-dir " + copy);
  REQUIRE_MESSAGE(crc == 0, copied);
  CHECK(copied.find("note=after") != std::string::npos);
  CHECK(copied.find("outcome recover-success") != std::string::npos);

  MESSAGE("exit codes: unknown job 1, no data 3, bad usage 2");
  CHECK(ctl("timeline nope --data-dir " + copy).first == 1);
  CHECK(ctl("timeline tl-job --data-dir " + (dir / "none")).first == 3);
  CHECK(ctl("events tl-job --follow --data-dir " + copy).first == 2);
  CHECK(ctl("--server " + address + " timeline tl-job").first == 3);
}
