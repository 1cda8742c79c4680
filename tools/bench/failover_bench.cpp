// failover_bench: how long agents wait when the leading recoverd of the HA
// form (--store etcd) dies (issue #14). Starts a 3-member etcd on loopback
// and two recoverd replicas; each run puts a job on the leader, attaches an
// agent that knows both replicas, SIGKILLs the leader and times, from the
// kill, the first report (ReportProcessFault) the new leader accepts: the
// lease running out, the standby's archive catching up, its replay and its
// listener, and the agent finding it. The killed replica comes back as the
// standby of the next run. Prints each run, then p50 and max.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "agent.hpp"
#include "child_process.hpp"
#include "fixtures/etcd_cluster.hpp"
#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using clock_type = std::chrono::steady_clock;
using recoverd::test::etcd_cluster;
using recoverd::test::temp_dir;

namespace {

struct options {
  int runs = 10;
  std::string ttl = "2s";
  std::string recoverd;
  std::string recoverctl;
  bool trace = false;
};

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t)
    .count();
}

std::string job_spec(const std::string& id) {
  return R"({"jobId": ")" + id + R"(", "name": "bench", "namespace": "ml",
  "framework": "pytorch", "recoverStrategies": ["retry", "recover", "dump"],
  "processRecoverEnable": true,
  "pods": [{"podRank": 0, "uid": ")" + id + R"(-0", "nodeName": "n0",
    "running": true, "devices": [{"deviceId": "0", "rankId": "0"}]}]})";
}

/// One recoverd replica of the HA form.
struct replica {
  std::string dir;
  std::unique_ptr<recoverd::child_process> proc;
  std::string address;

  bool start(const options& opts, const etcd_cluster& etcd,
             const std::string& listen) {
    std::string endpoints;
    for (const auto& e : etcd.endpoints())
      endpoints += (endpoints.empty() ? "" : ",") + e;
    proc = std::make_unique<recoverd::child_process>(
      opts.recoverd,
      std::vector<std::string>{"--listen", listen, "--http-listen", "off",
                               "--data-dir", dir + "/data", "--store", "etcd",
                               "--etcd-endpoints", endpoints,
                               "--etcd-cluster", "bench", "--etcd-lease-ttl",
                               opts.ttl, "--log-level", opts.trace ? "info" : "warn"},
      dir + "/daemon.log");
    address = proc->read_line_after("recoverd: listening on ");
    return !address.empty();
  }
};

double percentile(std::vector<double> xs, double p) {
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  auto here = std::filesystem::canonical("/proc/self/exe").parent_path();
  opts.recoverd = (here / "recoverd").string();
  opts.recoverctl = (here / "recoverctl").string();
  CLI::App cli{"failover_bench: leader SIGKILL -> first accepted report on "
               "the new leader, recoverd --store etcd on a loopback etcd"};
  cli.add_option("--runs", opts.runs, "failovers to time")->capture_default_str();
  cli.add_option("--lease-ttl", opts.ttl, "--etcd-lease-ttl of the replicas")
    ->capture_default_str();
  cli.add_option("--recoverd", opts.recoverd, "the daemon binary")
    ->capture_default_str();
  cli.add_option("--recoverctl", opts.recoverctl, "the CLI binary")
    ->capture_default_str();
  cli.set_version_flag("--version",
                       std::string{"failover_bench "} + RECOVERD_VERSION);
  cli.add_flag("--trace", opts.trace,
               "print the replicas' log lines about the lead and each kill's "
               "wall-clock time");
  CLI11_PARSE(cli, argc, argv);
  if (!etcd_cluster::available()) {
    std::fprintf(stderr, "failover_bench: %s is not installed (Debian "
                         "etcd-server)\n",
                 etcd_cluster::binary);
    return 2;
  }
  etcd_cluster etcd{3};
  if (!etcd.start()) {
    std::fprintf(stderr, "failover_bench: etcd: %s\n", etcd.why().c_str());
    return 1;
  }
  temp_dir dir;
  replica replicas[2];
  replicas[0].dir = dir / "r0";
  replicas[1].dir = dir / "r1";
  std::filesystem::create_directories(replicas[0].dir);
  std::filesystem::create_directories(replicas[1].dir);
  if (!replicas[0].start(opts, etcd, "127.0.0.1:0")
      || replicas[0].proc->read_line_after("recoverd: leading on ").empty()
      || !replicas[1].start(opts, etcd, "127.0.0.1:0")) {
    std::fprintf(stderr, "failover_bench: the replicas did not start (see "
                         "their daemon.log)\n");
    return 1;
  }
  int leader = 0;
  std::vector<double> report_ms;
  std::printf("failover_bench: %d runs, 3-member etcd on loopback, lease TTL "
              "%s\n",
              opts.runs, opts.ttl.c_str());
  std::printf("%4s %18s\n", "run", "first report (ms)");
  for (int run = 1; run <= opts.runs; ++run) {
    auto& old = replicas[leader];
    auto& next = replicas[1 - leader];
    auto job = "bench-" + std::to_string(run);
    auto file = dir / (job + ".json");
    std::ofstream{file} << job_spec(job);
    auto [rc, out] = recoverd::test::run_command(
      opts.recoverctl + " --server " + old.address + " job put " + file);
    if (rc != 0) {
      std::fprintf(stderr, "failover_bench: job put: %s\n", out.c_str());
      return 1;
    }
    recoverd::agent::client agent{old.address + "," + next.address, job};
    if (agent.init_clusterd().code() != 0) {
      std::fprintf(stderr, "failover_bench: the agent could not register\n");
      return 1;
    }
    if (opts.trace) {
      auto now = std::chrono::system_clock::now().time_since_epoch();
      std::printf("kill at %.3f\n",
                  std::chrono::duration<double>(now).count());
    }
    auto killed = clock_type::now();
    old.proc->kill(SIGKILL);
    old.proc->wait();
    // The report the agent sends as soon as its stream breaks.
    double report = -1;
    while (report < 0 && ms_since(killed) < 60'000) {
      auto st = agent.report_process_fault({{"0", "1"}});
      if (st.code() == 0)
        report = ms_since(killed);
      else if (opts.trace)
        std::printf("  %6.0f ms: %d %s\n", ms_since(killed), st.code(),
                    st.info().c_str());
    }
    if (report < 0) {
      std::fprintf(stderr, "failover_bench: no report accepted in 60 s\n");
      return 1;
    }
    if (next.proc->read_line_after("recoverd: leading on ").empty()) {
      std::fprintf(stderr, "failover_bench: the standby did not lead\n");
      return 1;
    }
    std::printf("%4d %18.0f\n", run, report);
    std::fflush(stdout);
    report_ms.push_back(report);
    // The killed replica re-joins as the standby.
    if (!old.start(opts, etcd, old.address)) {
      std::fprintf(stderr, "failover_bench: the killed replica did not "
                           "restart\n");
      return 1;
    }
    leader = 1 - leader;
  }
  if (opts.trace)
    for (const auto& r : replicas)
      std::system(("grep -h 'lead\\|standby' " + r.dir + "/daemon.log").c_str());
  std::printf("first accepted report after the leader's SIGKILL: p50 %.0f ms, "
              "max %.0f ms (lease TTL %s)\n",
              percentile(report_ms, 0.5),
              *std::max_element(report_ms.begin(), report_ms.end()),
              opts.ttl.c_str());
  return 0;
}
