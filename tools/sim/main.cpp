// recoverd-sim: simulates training jobs against recoverd and checks that
// every injected fault or operator action ends as it should.
//
// Exit codes: 0 every outcome as expected; 1 some outcome was not; 2 bad
// usage; 3 recoverd could not be reached or started.

#include <cstdio>
#include <iostream>
#include <sstream>
#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "world.hpp"

namespace {

using namespace recoverd::sim;

constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_unreachable = 3;

// The recoverd binary next to this one, else the one on PATH.
std::string default_daemon_bin() {
  char self[PATH_MAX];
  auto n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string path{self, static_cast<size_t>(n)};
    auto sibling = path.substr(0, path.rfind('/') + 1) + "recoverd";
    if (::access(sibling.c_str(), X_OK) == 0)
      return sibling;
  }
  return "/usr/local/bin/recoverd";
}

void print_timeline(const scenario_result& r) {
  for (const auto& e : r.timeline)
    std::printf("    %+8.3fs  %s\n", e.seconds, e.text.c_str());
}

void print_summary(const std::vector<scenario_result>& results) {
  std::printf("\n%-24s %5s %5s %9s  %s\n", "SCENARIO", "JOBS", "OK", "SECONDS",
              "RESULT");
  for (const auto& r : results)
    std::printf("%-24s %5d %5d %9.2f  %s%s%s\n", r.name.c_str(), r.jobs, r.ok,
                r.seconds,
                r.skipped ? "skipped" : r.passed() ? "pass" : "FAIL",
                r.note.empty() ? "" : ": ", r.note.c_str());
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  CLI::App cli{"recoverd-sim: simulates N jobs x M ranks on P pods against "
               "recoverd (declared through the Platform API, one agent per "
               "job with realistic callback delays), injects scenarios and "
               "checks each outcome.\nExit codes: 0 every outcome as expected, "
               "1 some outcome was not, 2 bad usage, 3 recoverd unreachable."};
  cli.set_version_flag("--version", std::string{"recoverd-sim "} + RECOVERD_VERSION);
  auto* server = cli.add_option("--server", opts.server,
                                "an existing recoverd, host:port");
  auto* spawn = cli.add_flag("--spawn-daemon", opts.spawn_daemon,
                             "start a recoverd on a free loopback port with a "
                             "temp data dir (needed for daemon-restart)");
  server->excludes(spawn);
  cli.add_option("--daemon-bin", opts.daemon_bin,
                 "the recoverd binary for --spawn-daemon (default: next to "
                 "recoverd-sim)");
  std::string names;
  for (const auto& [name, fn] : scenarios())
    names += (names.empty() ? "" : ", ") + name;
  cli.add_option("--scenario", opts.scenario,
                 "one of: " + names + ", a comma list of them, or all")
    ->capture_default_str();
  cli.add_option("--jobs", opts.jobs, "simulated jobs (N)")
    ->capture_default_str()
    ->check(CLI::Range(1, 10000));
  cli.add_option("--ranks", opts.ranks, "ranks per job (M)")
    ->capture_default_str()
    ->check(CLI::Range(1, 100000));
  cli.add_option("--pods", opts.pods, "pods per job (P), ranks spread evenly")
    ->capture_default_str()
    ->check(CLI::Range(2, 10000));
  cli.add_option("--seed", opts.seed, "seed of the callback delay jitter")
    ->capture_default_str();
  cli.add_option("--delay-ms", opts.delay_ms,
                 "mean time a simulated process takes per operation")
    ->capture_default_str()
    ->check(CLI::Range(0, 60000));
  cli.add_option("--timeout", opts.timeout_s,
                 "seconds a job may take to reach its outcome")
    ->capture_default_str()
    ->check(CLI::Range(1, 3600));
  cli.add_flag("--quiet", opts.quiet, "no timelines, only progress and summary");
  cli.add_flag("--keep-jobs", opts.keep_jobs,
               "leave the simulated jobs in recoverd afterwards (to inspect "
               "them); by default they are deleted (their history stays)");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto rc = cli.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }
  if (!opts.spawn_daemon && opts.server.empty()) {
    std::cerr << "recoverd-sim: give --server ADDR or --spawn-daemon\n";
    return exit_usage;
  }
  if (opts.ranks < opts.pods) {
    std::cerr << "recoverd-sim: --ranks must be at least --pods\n";
    return exit_usage;
  }
  std::vector<std::pair<std::string, scenario_fn>> chosen;
  std::stringstream wanted{opts.scenario};
  std::string name;
  while (std::getline(wanted, name, ',')) {
    bool known = false;
    for (const auto& s : scenarios())
      if (name == "all" || name == s.first) {
        chosen.push_back(s);
        known = true;
      }
    if (!known) {
      std::cerr << "recoverd-sim: unknown scenario \"" << name
                << "\" (one of: " << names << ", all)\n";
      return exit_usage;
    }
  }
  if (chosen.empty()) {
    std::cerr << "recoverd-sim: no scenario given\n";
    return exit_usage;
  }

  std::unique_ptr<spawned_daemon> daemon;
  auto address = opts.server;
  if (opts.spawn_daemon) {
    if (opts.daemon_bin.empty())
      opts.daemon_bin = default_daemon_bin();
    daemon = std::make_unique<spawned_daemon>(opts.daemon_bin, true);
    if (daemon->address().empty()) {
      std::cerr << "recoverd-sim: could not start " << opts.daemon_bin
                << " (log: " << daemon->log_file() << ")\n";
      return exit_unreachable;
    }
    address = daemon->address();
    std::printf("recoverd-sim: started recoverd at %s (log %s)\n",
                address.c_str(), daemon->log_file().c_str());
  }
  {
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now()
                                   + std::chrono::seconds(5))) {
      std::cerr << "recoverd-sim: cannot reach recoverd at " << address << "\n";
      return exit_unreachable;
    }
  }
  std::printf("recoverd-sim: %zu scenario(s), %d job(s) x %d ranks on %d pods, "
              "seed %u, callbacks ~%d ms\n",
              chosen.size(), opts.jobs, opts.ranks, opts.pods, opts.seed,
              opts.delay_ms);

  world w{opts, address, daemon.get()};
  std::vector<scenario_result> results;
  for (const auto& [name, fn] : chosen) {
    std::printf("\n== %s\n", name.c_str());
    std::fflush(stdout);
    scenario_result r;
    r.name = name;
    auto t0 = clock_type::now();
    fn(w, r);
    r.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (!opts.quiet && !r.skipped) {
      std::printf("  timeline of the first job:\n");
      print_timeline(r);
    }
    std::printf("  %s: %d/%d jobs as expected in %.2f s%s%s\n",
                r.skipped ? "skipped" : r.passed() ? "pass" : "FAIL", r.ok,
                r.jobs, r.seconds, r.note.empty() ? "" : " — ", r.note.c_str());
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  print_summary(results);
  for (const auto& r : results)
    if (!r.passed())
      return exit_failed;
  return 0;
}
