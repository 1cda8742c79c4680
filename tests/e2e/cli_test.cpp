// The command lines of the real binaries: --version everywhere, the waits
// that exist and only those, and a strict --config.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;

namespace {

std::string build_dir() {
  return std::filesystem::path{RECOVERD_BIN}.parent_path().string();
}

// The tab-separated columns of the line of `out` that starts with `prefix`
// (a benchmark's RESULT row); none when there is no such line.
std::vector<std::string> row(const std::string& out,
                             const std::string& prefix) {
  std::vector<std::string> cols;
  auto start = out.find(prefix);
  if (start == std::string::npos)
    return cols;
  auto line = out.substr(start, out.find('\n', start) - start);
  for (size_t at = 0;;) {
    auto tab = line.find('\t', at);
    cols.push_back(line.substr(at, tab - at));
    if (tab == std::string::npos)
      break;
    at = tab + 1;
  }
  return cols;
}

} // namespace

TEST_CASE("e2e cli: every binary answers --version") {
  for (const char* name :
       {"recoverd", "recoverctl", "recoverd-sim", "dst", "recoverd-fuzz",
        "recovery_bench", "storm_bench", "startup_bench", "step_bench",
        "memory_bench", "journal_bench", "failover_bench"}) {
    auto bin = build_dir() + "/" + name;
    REQUIRE_MESSAGE(std::filesystem::exists(bin), bin);
    auto [rc, out] = run_command(bin + " --version");
    INFO(name << ": " << out);
    CHECK(rc == 0);
    CHECK(out.find(std::string{name} + " " + RECOVERD_VERSION)
          != std::string::npos);
  }
}

TEST_CASE("e2e cli: storm_bench runs a small storm with each kind of agent") {
  // The full storms belong to scripts/bench.sh; a small one in each mode
  // shows they run to the end (teardown included) and print their figure.
  for (const char* mode : {"", " --hold-stop", " --light-agents",
                           " --light-agents --hold-stop"}) {
    auto [rc, out] = run_command(build_dir() + "/storm_bench --jobs 20"
                                 + " --storms 1" + mode);
    INFO("storm_bench" << mode << ": " << out);
    CHECK(rc == 0);
    CHECK(out.find("RESULT\tFault storm") != std::string::npos);
    CHECK(out.find("fan-out's floor") != std::string::npos);
    CHECK(out.find("retry-success x20") != std::string::npos);
  }
}

TEST_CASE("e2e cli: recovery_bench compares reports with the same calls") {
  // The full runs belong to scripts/bench.sh; a small one shows the report
  // figure runs to the end against its baselines.
  auto [rc, out] = run_command(
    build_dir() + "/recovery_bench --jobs 8 --samples 5 --cycles 1"
    + " --reports 6 --report-concurrency 4 --rounds 2");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("RESULT\tReports: durable report RPCs/s (4 jobs of 16 "
                 "ranks at once)")
        != std::string::npos);
  CHECK(out.find("(the same calls to a trivial gRPC server)")
        != std::string::npos);
  CHECK(out.find("bare HealthCheck round trips to the trivial server")
        != std::string::npos);
  CHECK(out.find("CPU per call") != std::string::npos);
}

TEST_CASE("e2e cli: storm_bench runs the daemon in a process of its own") {
  auto [rc, out] = run_command(
    build_dir() + "/storm_bench --jobs 20 --storms 4 --light-agents"
    + " --daemon-process");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("retry-success x20") != std::string::npos);
  // The daemon's memory apart from the agents', after every storm.
  CHECK(out.find("resident the daemon ") != std::string::npos);
  CHECK(out.find("resident memory of the daemon's process after storm 1: ")
        != std::string::npos);
  CHECK(out.find("RESULT\tFault storm") != std::string::npos);
  // Four storms or more give the soak row: the live heap after the later
  // half against the earlier half's, in a well-formed ratio.
  auto cols = row(out, "RESULT\tSoak: 4 fault storms back to back on 20 "
                       "jobs, the daemon's live heap (jemalloc allocated), "
                       "highest after storms 3-4\t");
  REQUIRE(cols.size() == 6);
  CHECK(cols[3].find("MB (storms 1-2)") != std::string::npos);
  auto ratio = std::stod(cols[4]);
  CHECK(ratio > 0.5);
  CHECK(ratio < 2.0);
}

TEST_CASE("e2e cli: step_bench shows a large job's snapshots cost each "
          "step a bounded share") {
  auto [rc, out] = run_command(build_dir() + "/step_bench --large 4096"
                               + " --min-seconds 0.02 --max-samples 50");
  INFO(out);
  REQUIRE(rc == 0);
  for (const char* what : {"CPU", "bytes"}) {
    CAPTURE(what);
    auto cols = row(out, std::string{"RESULT\tJob size: absorbed "
                                     "ReportProcessFault step with its share "
                                     "of snapshots, "}
                           + what + " (4096 vs 16 ranks)\t");
    REQUIRE(cols.size() == 6);
    // Under the policy the large job's step stays within a small factor of
    // the small job's.
    CHECK(std::stod(cols[4]) < 3);
    auto every_20 = cols[5].find("every 20 events: ");
    REQUIRE(every_20 != std::string::npos);
    // A snapshot every 20 events would write far more bytes; its CPU stays
    // small either way, the spec's bytes being kept (below).
    if (std::string{what} == "bytes")
      CHECK(std::stod(cols[5].substr(every_20 + 17)) > 3);
  }
  // The large job's usual snapshot copies and encodes all but the spec,
  // whose bytes it keeps: it costs a fraction of the first one after a
  // spec change, which encodes the spec again.
  auto large = out.find("4096 ranks (");
  REQUIRE(large != std::string::npos);
  const std::string first_mark = "; ";
  const std::string usual_mark = "the first time after a spec change): ";
  auto usual_at = out.find(usual_mark, large);
  REQUIRE(usual_at != std::string::npos);
  auto first_at = out.rfind(first_mark, usual_at);
  REQUIRE(first_at != std::string::npos);
  auto first_us = std::stod(out.substr(first_at + first_mark.size()));
  auto usual_us = std::stod(out.substr(usual_at + usual_mark.size()));
  CAPTURE(first_us);
  CAPTURE(usual_us);
  CHECK(usual_us > 0);
  CHECK(first_us > 5 * usual_us);
}

TEST_CASE("e2e cli: the log's memory bounds refuse sizes too small or "
          "malformed") {
  for (const char* bad :
       {"--log-cache 100k", "--log-cache lots", "--log-cache -1m",
        "--log-memtables 8m", "--log-memtables 1x"}) {
    auto [rc, out] = run_command(std::string{RECOVERD_BIN} + " " + bad
                                 + " --data-dir /nonexistent/never-made");
    CAPTURE(bad);
    CHECK(rc == 2);
    auto flag = std::string{bad}.substr(0, std::string{bad}.find(' '));
    CHECK(out.find("recoverd: " + flag + ": not a size of at least")
          != std::string::npos);
  }
}

TEST_CASE("e2e cli: the waits recoverd does not implement are gone") {
  auto [rc, help] = run_command(std::string{RECOVERD_BIN} + " --help");
  REQUIRE(rc == 0);
  for (const char* gone :
       {"--signal-enqueue-timeout", "--rack-reschedule-wait",
        "--scale-in-resource-wait", "--restart-fault-delay",
        "--hot-switch-pod-wait", "--pre-exit-wait", "--new-pod-delay"}) {
    CHECK_MESSAGE(help.find(gone) == std::string::npos, gone);
    auto [bad_rc, bad_out] = run_command(std::string{RECOVERD_BIN} + " "
                                         + gone + " 1s");
    CHECK(bad_rc == 2);
    CHECK(bad_out.find(gone) != std::string::npos);
  }
  for (const char* kept :
       {"--keepalive-interval", "--report-timeout", "--notify-timeout",
        "--fault-flush-wait", "--resource-release-wait",
        "--recover-in-place-wait", "--reschedule-wait",
        "--hccl-convergence-wait", "--exit-reschedule-wait",
        "--restart-all-wait", "--job-fallback-wait", "--platform-wait"})
    CHECK_MESSAGE(help.find(kept) != std::string::npos, kept);
}

TEST_CASE("e2e cli: --config refuses unknown keys and sections, naming them") {
  temp_dir dir;
  auto run_with = [&](const std::string& text) {
    std::ofstream{dir / "recoverd.toml"} << text;
    return run_command("exec 2>&1; " + std::string{RECOVERD_BIN}
                       + " --config "
                       + (dir / "recoverd.toml") + " --data-dir "
                       + (dir / "db") + " --listen 127.0.0.1:0 --http-listen "
                       + "off --log-level warn & pid=$!; sleep 1; "
                       + "kill $pid 2>/dev/null; wait $pid");
  };
  MESSAGE("a typo in a key");
  auto [typo_rc, typo_out] = run_with("report-timout = \"5s\"\n");
  CHECK(typo_rc == 2);
  CHECK(typo_out.find("unknown key 'report-timout'") != std::string::npos);
  MESSAGE("a section recoverd does not have");
  auto [sec_rc, sec_out] = run_with("[journal]\nsync = \"batch\"\n");
  CHECK(sec_rc == 2);
  CHECK(sec_out.find("journal") != std::string::npos);
  MESSAGE("known keys are taken: the daemon runs until it is stopped");
  auto [ok_rc, ok_out] = run_with("report-timeout = \"5s\"\nsync = \"batch\"\n");
  INFO(ok_out);
  CHECK(ok_rc == 0);
}

TEST_CASE("e2e cli: --store and the etcd flags refuse what cannot work, "
          "before anything starts") {
  temp_dir dir;
  auto daemon = std::string{RECOVERD_BIN} + " --listen 127.0.0.1:0 "
                + "--http-listen off --data-dir " + (dir / "data") + " ";
  struct refusal {
    const char* args;
    const char* says;
  };
  for (auto [args, says] :
       {refusal{"--store bogus", "--store"},
        refusal{"--store etcd", "endpoint"},
        refusal{"--etcd-endpoints 127.0.0.1:2379", "needs --store etcd"},
        refusal{"--store etcd --etcd-endpoints 127.0.0.1:2379 "
                "--etcd-lease-ttl 1s",
                "TTL"},
        refusal{"--store etcd --etcd-endpoints 127.0.0.1:2379 "
                "--etcd-lease-ttl soon",
                "--etcd-lease-ttl"},
        refusal{"--store etcd --etcd-endpoints 127.0.0.1:2379 "
                "--etcd-cluster a/b",
                "cluster name"},
        refusal{"--store etcd --etcd-endpoints 127.0.0.1:2379 "
                "--etcd-ca /nonexistent/ca.pem",
                "/nonexistent/ca.pem"}}) {
    CAPTURE(args);
    auto [rc, out] = run_command(daemon + args);
    CHECK(rc == 2);
    CHECK_MESSAGE(out.find(says) != std::string::npos, out);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "data"));
}
