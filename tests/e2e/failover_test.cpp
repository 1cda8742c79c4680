// Active/standby on a real 3-member etcd (issue #14): two recoverd with
// --store etcd; the leader is SIGKILLed at each state of a recovery,
// SIGSTOPped past its lease, and etcd's own leader is killed mid-flow.

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent.hpp"
#include "fixtures/daemon.hpp"
#include "fixtures/etcd_cluster.hpp"
#include "fixtures/process.hpp"
#include "fixtures/recovery_drive.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;
using namespace std::chrono_literals;

namespace {

const std::string ctl_bin = RECOVERCTL_BIN;

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs)
    out += (out.empty() ? "" : ",") + x;
  return out;
}

/// One recoverd of the HA form: --store etcd, its own data directory.
struct replica {
  std::unique_ptr<child_process> proc;
  std::string address;
  std::string http;

  replica(const std::string& dir, const etcd_cluster& etcd,
          const std::string& cluster, std::vector<std::string> extra = {},
          const std::string& ttl = "2s") {
    std::vector<std::string> args{
      "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
      "--data-dir", dir + "/data", "--keepalive-interval", "200ms",
      "--store", "etcd", "--etcd-endpoints", join(etcd.endpoints()),
      "--etcd-cluster", cluster, "--etcd-lease-ttl", ttl};
    args.insert(args.end(), extra.begin(), extra.end());
    std::filesystem::create_directories(dir);
    proc = std::make_unique<child_process>(RECOVERD_BIN, args,
                                           dir + "/daemon.log");
    listening();
  }

  /// Reads the addresses a (re)started replica prints as a standby.
  void listening() {
    address = proc->read_line_after("recoverd: listening on ");
    REQUIRE_MESSAGE(!address.empty(), "the replica did not start");
    http = proc->read_line_after("recoverd: http on ");
    REQUIRE(!http.empty());
  }

  /// Waits until it says it leads.
  bool leads(std::chrono::milliseconds timeout = 20s) {
    return proc->read_line_after("recoverd: leading on ", timeout) == address;
  }

  /// The status of GET `path` on its HTTP port (0: no answer).
  int get(const std::string& path) const {
    httplib::Client c{"http://" + http};
    c.set_connection_timeout(1);
    c.set_read_timeout(5);
    auto res = c.Get(path);
    return res ? res->status : 0;
  }
};

/// The seqs of the job's events as `recoverctl events` lists them (from a
/// daemon or, with `--data-dir`, from a data directory).
std::vector<uint64_t> event_seqs(const std::string& args) {
  auto [rc, out] = run_command(ctl_bin + " --timeout 5s events e2e-job -o json "
                               + args);
  REQUIRE_MESSAGE(rc == 0, out);
  std::vector<uint64_t> seqs;
  std::istringstream lines{out};
  for (std::string line; std::getline(lines, line);) {
    if (line.empty())
      continue;
    auto x = nlohmann::json::parse(line);
    seqs.push_back(std::stoull(x.value("seq", std::string{"0"})));
  }
  return seqs;
}

/// What etcdctl says about the keys under `prefix`: key, value,
/// create and mod revisions.
struct etcd_key {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

std::vector<etcd_key> etcd_get(const etcd_cluster& etcd,
                               const std::string& prefix) {
  // etcdctl prints keys and values in base64; python3 decodes them.
  auto [rc, out] = run_command(
    "ETCDCTL_API=3 etcdctl --endpoints " + join(etcd.endpoints())
    + " get --prefix '" + prefix
    + "' -w json | /usr/bin/python3 -c 'import sys,json,base64\n"
      "d=json.load(sys.stdin)\n"
      "for k in d.get(\"kvs\",[]):\n"
      " print(json.dumps([base64.b64decode(k[\"key\"]).decode(),"
      "base64.b64decode(k.get(\"value\",\"\")).decode(\"latin-1\"),"
      "k[\"create_revision\"],k[\"mod_revision\"]]))'");
  REQUIRE_MESSAGE(rc == 0, out);
  std::vector<etcd_key> result;
  std::istringstream lines{out};
  for (std::string line; std::getline(lines, line);) {
    auto x = nlohmann::json::parse(line);
    result.push_back({x[0], x[1], x[2], x[3]});
  }
  return result;
}

/// A 3-member etcd for every case of this file (each case uses a cluster
/// name of its own, so each run starts from empty keys).
etcd_cluster& shared_etcd() {
  static etcd_cluster etcd{3};
  static bool started = etcd.start();
  REQUIRE_MESSAGE(started, etcd.why());
  return etcd;
}

#define SKIP_WITHOUT_ETCD()                                                    \
  if (!etcd_cluster::available()) {                                            \
    MESSAGE("etcd is not installed (Debian etcd-server): skipped");            \
    return;                                                                    \
  }

/// Two replicas: `a` leads, `b` stands by.
struct pair_of_replicas {
  temp_dir dir;
  std::unique_ptr<replica> a;
  std::unique_ptr<replica> b;

  pair_of_replicas(const std::string& cluster,
                   std::vector<std::string> extra = {},
                   const std::string& ttl = "2s") {
    auto& etcd = shared_etcd();
    a = std::make_unique<replica>(dir / "a", etcd, cluster, extra, ttl);
    REQUIRE(a->leads());
    b = std::make_unique<replica>(dir / "b", etcd, cluster, extra, ttl);
    {
      std::ofstream f{dir / "job.json"};
      f << job_file;
    }
  }

  /// The agent's view: both replicas, as a Service would route to them.
  std::string agents_target() const {
    return a->address + "," + b->address;
  }
};

/// Drives one recovery with the leader SIGKILLed when the job reaches
/// `kill_at`: the standby takes over, the agent follows it, the flow ends
/// with its first uuid, and the new leader's archive holds the history.
void failover_at(const std::string& kill_at, int run) {
  CAPTURE(kill_at);
  std::vector<std::string> waits{"--fault-flush-wait",
                                 kill_at == "WaitFaultFlushFinishedState"
                                   ? "3s"
                                   : "0",
                                 "--resource-release-wait",
                                 kill_at == "NotifyGlobalFaultState" ? "3s"
                                                                     : "0"};
  pair_of_replicas r{"failover-" + std::to_string(run), waits};
  MESSAGE("a standby answers UNAVAILABLE and is not ready");
  CHECK(r.a->get("/readyz") == 200);
  CHECK(r.b->get("/readyz") == 503);
  CHECK(r.b->get("/healthz") == 200);
  auto [src, sout] = ctl(r.b->address, "jobs");
  CHECK(src == 3); // UNAVAILABLE: recoverctl's "cannot reach"
  CHECK(sout.find("does not lead") != std::string::npos);
  REQUIRE(ctl(r.a->address, "job put " + (r.dir / "job.json")).first == 0);
  recoverd::agent::client agent{r.agents_target(), "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  auto leader = r.a->address;
  auto crash = [&] {
    wait_state(leader, kill_at);
    r.a->proc->kill(SIGKILL);
    REQUIRE(r.a->proc->wait() == 128 + SIGKILL);
    REQUIRE(r.b->leads());
    leader = r.b->address;
    CHECK(r.b->get("/readyz") == 200);
  };
  drive_recovery(agent, kill_at, crash, 15s);
  agent.stop();
  REQUIRE(leader == r.b->address);
  auto [rc, got] = ctl(leader, "job get e2e-job -o json");
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  CHECK(got.find("\"flows\": \"1\"") != std::string::npos);
  MESSAGE("the standby kept the job live: the new leader replayed nothing");
  {
    std::ifstream in{r.dir / "b/daemon.log"};
    std::string log{std::istreambuf_iterator<char>{in}, {}};
    CHECK(log.find("1 jobs live (") != std::string::npos);
    CHECK(log.find(", 0 to replay") != std::string::npos);
    CHECK(log.find("took 1 jobs (0 deleted) live from the standby, "
                   "replaying 0 events")
          != std::string::npos);
  }
  MESSAGE("the new leader's archive holds the whole history: what the dead "
          "leader wrote, then its own");
  auto before = event_seqs("--data-dir " + (r.dir / "a/data"));
  auto after = event_seqs("--server " + leader);
  REQUIRE(!before.empty());
  CHECK(before.front() == 1);
  REQUIRE(after.size() > before.size());
  for (size_t i = 0; i < after.size(); ++i)
    CHECK(after[i] == i + 1);
}

} // namespace

TEST_CASE("e2e failover: SIGKILL the leader at each state of a recovery; the "
          "standby finishes it with the same uuid") {
  SKIP_WITHOUT_ETCD();
  int run = 0;
  for (const char* at : recovery_crash_states)
    failover_at(at, ++run);
}

TEST_CASE("e2e failover: a leader paused past its lease is fenced: its next "
          "append is refused, it steps down, etcd holds nothing it wrote "
          "after") {
  SKIP_WITHOUT_ETCD();
  auto& etcd = shared_etcd();
  const std::string cluster = "paused";
  pair_of_replicas r{cluster};
  REQUIRE(ctl(r.a->address, "job put " + (r.dir / "job.json")).first == 0);
  r.a->proc->kill(SIGSTOP);
  REQUIRE(r.b->leads());
  auto leader_key = etcd_get(etcd, "/recoverd/" + cluster + "/leader");
  REQUIRE(leader_key.size() == 1);
  auto new_epoch = leader_key[0].create_revision;
  CHECK(leader_key[0].value == r.b->address);
  MESSAGE("the new leader writes");
  auto spec = std::string{job_file};
  spec.replace(spec.find("e2e-job"), 7, "job-two");
  {
    std::ofstream f{r.dir / "two.json"};
    f << spec;
  }
  REQUIRE(ctl(r.b->address, "job put " + (r.dir / "two.json")).first == 0);
  r.a->proc->kill(SIGCONT);
  MESSAGE("the old leader's next write is refused");
  auto [rc, out] = ctl(r.a->address, "job delete e2e-job");
  CHECK_MESSAGE(rc == 3, out); // UNAVAILABLE, never PERMISSION_DENIED
  MESSAGE("it re-joins as a standby");
  r.a->listening();
  for (int i = 0; i < 100 && r.a->get("/readyz") != 503; ++i)
    std::this_thread::sleep_for(50ms);
  CHECK(r.a->get("/readyz") == 503);
  CHECK(r.b->get("/readyz") == 200);
  MESSAGE("every record written in the new term carries its epoch");
  size_t newer = 0;
  for (const auto& k : etcd_get(etcd, "/recoverd/" + cluster + "/meta/")) {
    CAPTURE(k.key);
    if (k.mod_revision <= new_epoch)
      continue;
    ++newer;
    auto space = k.value.find(' ');
    REQUIRE(space != std::string::npos);
    CHECK(std::stoll(k.value.substr(space + 1)) == new_epoch);
  }
  CHECK(newer >= 1);
  MESSAGE("the job the old leader was told to delete is still there");
  auto [grc, got] = ctl(r.b->address, "job get e2e-job -o json");
  CHECK(grc == 0);
  auto [jrc, jobs] = ctl(r.b->address, "jobs");
  CHECK(jobs.find("job-two") != std::string::npos);
}

TEST_CASE("e2e failover: killing etcd's leader mid-flow moves no recoverd "
          "lead; the flow completes") {
  SKIP_WITHOUT_ETCD();
  auto& etcd = shared_etcd();
  // etcd elects a new leader in about 2 s: the lease (TTL 5 s, the
  // default, renewed every TTL/3) outlives that.
  pair_of_replicas r{"etcd-leader-loss", {}, "5s"};
  REQUIRE(ctl(r.a->address, "job put " + (r.dir / "job.json")).first == 0);
  recoverd::agent::client agent{r.agents_target(), "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  std::this_thread::sleep_for(300ms);
  REQUIRE(agent.report_process_fault({{"2", "1"}}).code() == 0);
  auto stop = agent.next_signal(15s);
  REQUIRE(stop);
  auto etcd_leader = etcd.wait_for_leader();
  REQUIRE(etcd_leader);
  etcd.kill(*etcd_leader, SIGKILL);
  MESSAGE("the delivery of stopTrain becomes durable once etcd has a new "
          "leader");
  wait_state(r.a->address, "WaitReportStopCompleteState");
  auto ack = agent.report_stop_complete(0);
  REQUIRE_MESSAGE(ack.code() == 0, ack.info());
  auto global = agent.next_signal(15s);
  REQUIRE(global);
  CHECK(global->uuid() == stop->uuid());
  REQUIRE(agent.report_recover_strategy({"recover"}).code() == 0);
  auto change = agent.next_signal(15s);
  REQUIRE(change);
  REQUIRE(agent.report_recover_status(0, "recover").code() == 0);
  agent.stop();
  auto [rc, got] = ctl(r.a->address, "job get e2e-job -o json");
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  MESSAGE("the same replica leads, the other still stands by");
  CHECK(r.a->get("/readyz") == 200);
  CHECK(r.b->get("/readyz") == 503);
  CHECK(r.b->proc->read_line_after("recoverd: leading on ", 500ms).empty());
  CHECK(agent.failovers() == 0);
}

TEST_CASE("e2e failover: etcd keeps each job's latest snapshot and what "
          "follows; a replica that joins later takes over from them") {
  SKIP_WITHOUT_ETCD();
  auto& etcd = shared_etcd();
  // A snapshot every 4 events, so that a recovery leaves several.
  std::vector<std::string> extra{"--snapshot-every", "4", "--fault-flush-wait",
                                 "0", "--resource-release-wait", "0"};
  pair_of_replicas r{"late-joiner", extra};
  REQUIRE(ctl(r.a->address, "job put " + (r.dir / "job.json")).first == 0);
  recoverd::agent::client agent{r.agents_target(), "e2e-job"};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  std::this_thread::sleep_for(300ms);
  REQUIRE(agent.report_process_fault({{"2", "1"}}).code() == 0);
  REQUIRE(agent.next_signal(15s));
  wait_state(r.a->address, "WaitReportStopCompleteState");
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  REQUIRE(agent.next_signal(15s));
  REQUIRE(agent.report_recover_strategy({"recover"}).code() == 0);
  REQUIRE(agent.next_signal(15s));
  REQUIRE(agent.report_recover_status(0, "recover").code() == 0);
  agent.stop();
  auto history = event_seqs("--server " + r.a->address);
  REQUIRE(history.size() >= 12);
  MESSAGE("etcd no longer holds the first events");
  std::this_thread::sleep_for(1500ms); // the standby's mark moves on
  REQUIRE(ctl(r.a->address, "annotate e2e-job team=b").first == 0);
  auto log = etcd_get(etcd, "/recoverd/late-joiner/log/e2e-job/");
  REQUIRE(!log.empty());
  CHECK(log.size() < history.size());
  MESSAGE("a third replica joins with an empty data directory; the first "
          "two go");
  replica c{r.dir / "c", etcd, "late-joiner", extra};
  CHECK(c.get("/readyz") == 503);
  r.b->proc->kill(SIGKILL);
  r.b->proc->wait();
  r.a->proc->kill(SIGKILL);
  r.a->proc->wait();
  REQUIRE(c.leads());
  {
    // Its archive started at a snapshot: that job is replayed, not live.
    std::ifstream in{r.dir / "c/daemon.log"};
    std::string log{std::istreambuf_iterator<char>{in}, {}};
    CHECK(log.find(", 1 to replay") != std::string::npos);
  }
  auto [rc, got] = ctl(c.address, "job get e2e-job -o json");
  REQUIRE(rc == 0);
  CHECK(got.find("\"recoveryState\": \"INIT\"") != std::string::npos);
  CHECK(got.find("\"lastOutcome\": \"recover-success\"") != std::string::npos);
  CHECK(got.find("\"team\": \"b\"") != std::string::npos);
  MESSAGE("its archive starts at a snapshot; b's holds the whole history");
  auto joined = event_seqs("--server " + c.address);
  REQUIRE(!joined.empty());
  CHECK(joined.front() > 1);
  CHECK(joined.back() == history.back() + 1);
  auto kept = event_seqs("--data-dir " + (r.dir / "b/data"));
  REQUIRE(kept.size() == history.size() + 1);
  CHECK(kept.front() == 1);
}
