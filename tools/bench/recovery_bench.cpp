// recovery_bench: (1) fault -> stopTrain latency with many subscribed jobs on
// loopback and every configured wait at 0, timed from the moment the client
// sends ReportProcessFault, next to the round-trip latency of a trivial gRPC
// server; (2) full recovery cycles per second across concurrent jobs and (3)
// durable report RPCs per second, each compared with the same number of
// plain unary gRPC round trips to a trivial server in the same run (design
// §7). `--ranks` sets the size of every job (pods of 8 devices).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <mutex>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/scoped_actor.hpp>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "agent.hpp"
#include "platform.grpc.pb.h"
#include "recover.grpc.pb.h"
#include "services/app.hpp"
#include "tools/bench/baseline.hpp"
#include "tools/bench/process_stats.hpp"

using namespace recoverd;
using namespace recoverd::bench;
namespace pb = recoverd::platform::v1;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr size_t devices_per_pod = 8;

void put_job(pb::Platform::Stub& platform, const std::string& id,
             size_t ranks) {
  pb::PutJobRequest req;
  auto* spec = req.mutable_spec();
  spec->set_jobid(id);
  spec->set_processrecoverenable(true);
  spec->add_recoverstrategies("recover");
  for (size_t p = 0; p < ranks / devices_per_pod; ++p) {
    auto* pod = spec->add_pods();
    pod->set_podrank(static_cast<int32_t>(p));
    pod->set_uid(id + "-" + std::to_string(p));
    pod->set_nodename("node-" + std::to_string(p));
    pod->set_running(true);
    for (size_t d = 0; d < devices_per_pod; ++d) {
      auto* dev = pod->add_devices();
      dev->set_deviceid(std::to_string(d));
      dev->set_rankid(std::to_string(p * devices_per_pod + d));
    }
  }
  pb::PutJobResponse resp;
  grpc::ClientContext c;
  if (!platform.PutJob(&c, req, &resp).ok()) {
    std::fprintf(stderr, "recovery_bench: PutJob failed\n");
    std::exit(1);
  }
}

// Runs a shell command in `dir`; false when it fails.
bool run_in(const std::filesystem::path& dir, const std::string& cmd) {
  auto full = "cd '" + dir.string() + "' && " + cmd + " >/dev/null 2>&1";
  return std::system(full.c_str()) == 0;
}

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in{file};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// --secure: a CA, a server certificate for 127.0.0.1 and the platform's
// client certificate, made with openssl in `dir`.
bool make_pki(const std::filesystem::path& dir) {
  const std::string ec
    = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  std::ofstream{dir / "server.ext"}
    << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  return run_in(dir, "openssl req -x509 " + ec
                       + "-keyout ca.key -out ca.pem -days 2 -subj /CN=ca")
         && run_in(dir, "openssl req " + ec
                          + "-keyout server.key -out server.csr "
                            "-subj /CN=localhost")
         && run_in(dir, "openssl x509 -req -in server.csr -CA ca.pem -CAkey "
                        "ca.key -CAcreateserial -out server.pem -days 2 "
                        "-extfile server.ext")
         && run_in(dir, "openssl req " + ec
                          + "-keyout platform.key -out platform.csr "
                            "-subj /CN=bench-platform")
         && run_in(dir, "openssl x509 -req -in platform.csr -CA ca.pem "
                        "-CAkey ca.key -CAcreateserial -out platform.pem "
                        "-days 2");
}

bool expect(agent::client& a, const char* type) {
  auto sig = a.next_signal(10s);
  return sig && sig->signaltype() == type;
}

// One full cycle: fault, stop, global fault, strategy, recover, success.
bool cycle(agent::client& a) {
  if (a.report_process_fault({{"8", "1"}}).code() != 0)
    return false;
  if (!expect(a, "stopTrain") || a.report_stop_complete(0).code() != 0)
    return false;
  if (!expect(a, "globalFault")
      || a.report_recover_strategy({"recover"}).code() != 0)
    return false;
  if (!expect(a, "changeStrategy"))
    return false;
  return a.report_recover_status(0, "recover").code() == 0;
}

// One side of the report comparison, summed over the rounds: calls, wall
// time, and the CPU and context switches of this whole process (daemon,
// agents, baseline server and clients) while it ran.
struct side {
  size_t calls = 0;
  double secs = 0;
  double cpu_ms = 0;
  double switches = 0;

  // Runs `f`, which makes `trips` calls, and returns its calls per second.
  template <class F>
  double run(size_t trips, F f) {
    auto u0 = usage_now();
    auto t0 = clock_type::now();
    f();
    auto dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    auto u1 = usage_now();
    calls += trips;
    secs += dt;
    cpu_ms += u1.cpu_ms - u0.cpu_ms;
    switches += static_cast<double>(u1.switches - u0.switches);
    return static_cast<double>(trips) / dt;
  }

  double rate() const {
    return static_cast<double>(calls) / secs;
  }
  double cpu_us() const {
    return cpu_ms * 1e3 / static_cast<double>(calls);
  }
  double busy() const {
    return cpu_ms / 1e3 / secs / cores() * 100;
  }
  double switches_per() const {
    return switches / static_cast<double>(calls);
  }
  static unsigned cores() {
    return std::max(1u, std::thread::hardware_concurrency());
  }
};

// Agent clients of the trivial server, one per reporting thread, made and
// warmed up once, as recoverd's agents are long-lived: a fresh channel's
// first calls cost more (its HTTP/2 windows still grow).
std::vector<std::unique_ptr<agent::client>>
same_call_clients(const std::string& address, size_t concurrency) {
  std::vector<std::unique_ptr<agent::client>> clients;
  for (size_t t = 0; t < concurrency; ++t)
    clients.push_back(
      std::make_unique<agent::client>(address, "bench-" + std::to_string(t)));
  std::vector<std::thread> threads;
  for (auto& c : clients)
    threads.emplace_back([&c] {
      for (int n = 0; n < 50; ++n)
        c->report_process_fault({{"0", "1"}});
    });
  for (auto& th : threads)
    th.join();
  return clients;
}

// `trips` ReportProcessFault calls of one fault each through `clients`,
// one thread each: the same calls as recoverd's reports, with the agent's
// call options (deadline, wait-for-ready), answered at once. False when a
// call failed: a baseline of failed calls would measure nothing.
bool same_calls(std::vector<std::unique_ptr<agent::client>>& clients,
                size_t trips, size_t ranks) {
  std::atomic<size_t> left{trips};
  std::atomic<bool> ok{true};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < clients.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t n = 0;; ++n) {
        auto k = left.fetch_sub(1);
        if (k == 0 || k > trips) {
          left = 0;
          return;
        }
        auto rank = std::to_string(n % ranks);
        if (clients[t]->report_process_fault({{rank, "1"}}).code() != 0) {
          ok = false;
          left = 0;
          return;
        }
      }
    });
  for (auto& th : threads)
    th.join();
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  size_t jobs = 1000;
  size_t samples = 300;
  size_t concurrency = 32;
  size_t cycles_per_job = 20;
  size_t reports_per_job = 100;
  size_t report_concurrency = 128;
  size_t rounds = 5;
  size_t ranks = 16;
  bool no_sync = false;
  bool secure = false;
  CLI::App cli{"recovery_bench: fault->stop latency and recovery cycles/s"};
  cli.set_version_flag("--version", std::string{"recovery_bench "} + RECOVERD_VERSION);
  cli.add_option("--jobs", jobs, "subscribed jobs")->capture_default_str();
  cli.add_option("--samples", samples, "latency samples")->capture_default_str();
  cli.add_option("--concurrency", concurrency, "jobs cycling at once")
    ->capture_default_str();
  cli.add_option("--reports", reports_per_job, "durable reports per job")
    ->capture_default_str();
  cli.add_flag("--sync-batch", no_sync,
               "journal --sync batch instead of always (shows the CPU bound)");
  cli.add_option("--report-concurrency", report_concurrency,
                 "jobs reporting at once (and baseline client threads)")
    ->capture_default_str();
  cli.add_option("--rounds", rounds,
                 "turns ours and the report baseline take (the ratio sums "
                 "them)")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  cli.add_flag("--secure", secure,
               "access control on (authz file, anonymous agents on the "
               "plaintext agent listener, the default rate limits) and the "
               "platform on a TLS control listener with a client "
               "certificate, as a secured deployment runs");
  cli.add_option("--cycles", cycles_per_job, "cycles per cycling job")
    ->capture_default_str();
  cli.add_option("--ranks", ranks,
                 "ranks of every job (pods of 8 devices; a multiple of 8)")
    ->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  if (ranks < 16 || ranks % devices_per_pod != 0) {
    std::fprintf(stderr, "recovery_bench: --ranks must be a multiple of 8, "
                         "at least 16\n");
    return 2;
  }
  configure_logging("error", "text");
  auto dir = std::filesystem::temp_directory_path()
             / ("recovery-bench-" + std::to_string(::getpid()));
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir.string();
  if (no_sync)
    opts.journal.sync = sync_policy::batch;
  opts.registry.job.waits = timeouts{};
  auto& w = opts.registry.job.waits;
  w.fault_flush = w.resource_release = w.hccl_convergence = w.restart_all
    = 0ms;
  w.keepalive = 60s;
  std::filesystem::create_directories(dir);
  if (secure) {
    auto pki = dir / "pki";
    std::filesystem::create_directories(pki);
    if (!make_pki(pki)) {
      std::fprintf(stderr, "recovery_bench: openssl could not make the "
                           "certificates\n");
      return 1;
    }
    opts.control_listen = "127.0.0.1:0";
    opts.control_tls = {(pki / "server.pem").string(),
                        (pki / "server.key").string(),
                        (pki / "ca.pem").string(), client_cert_mode::required};
    auto policy = parse_authz("[[identity]]\nname = \"bench-platform\"\n"
                              "role = \"platform\"\n",
                              "bench");
    if (!policy)
      return 1;
    opts.authz = std::make_shared<const authz_policy>(std::move(*policy));
    opts.anonymous_agents = true;
    opts.om_on_agent_listener = false;
    opts.limits = rate_limits::defaults();
  }
  auto daemon = app::start(opts);
  if (!daemon) {
    std::fprintf(stderr, "recovery_bench: %s\n",
                 message_of(daemon.error()).c_str());
    return 1;
  }
  auto address = (*daemon)->address();
  auto platform_channel
    = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (secure) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = slurp(dir / "pki" / "ca.pem");
    ssl.pem_cert_chain = slurp(dir / "pki" / "platform.pem");
    ssl.pem_private_key = slurp(dir / "pki" / "platform.key");
    platform_channel = grpc::CreateChannel((*daemon)->control_address(),
                                           grpc::SslCredentials(ssl));
    std::printf("secure: access control on, agents anonymous on the "
                "plaintext agent listener %s, platform over mTLS on %s, "
                "default rate limits\n",
                address.c_str(), (*daemon)->control_address().c_str());
  }
  auto platform = pb::Platform::NewStub(platform_channel);

  std::printf("setting up %zu subscribed jobs of %zu ranks (%zu pods x %zu "
              "devices) ...\n",
              jobs, ranks, ranks / devices_per_pod, devices_per_pod);
  std::fflush(stdout);
  // Latency: the agent's stream thread stamps the arrival of stopTrain.
  std::vector<std::unique_ptr<agent::client>> agents;
  std::vector<std::atomic<int64_t>> arrived(jobs);
  for (size_t i = 0; i < jobs; ++i) {
    auto id = "bench-" + std::to_string(i);
    put_job(*platform, id, ranks);
    auto a = std::make_unique<agent::client>(address, id);
    if (a->init_clusterd().code() != 0)
      return 1;
    arrived[i] = 0;
    a->start_subscribe([&arrived, i](const ::ProcessManageSignal& s) {
      if (s.signaltype() == "stopTrain")
        arrived[i] = clock_type::now().time_since_epoch().count();
    });
    agents.push_back(std::move(a));
  }
  std::this_thread::sleep_for(1s); // let every stream attach
  // Headline: from the client's clock just before ReportProcessFault is
  // sent to the agent's stream thread holding stopTrain. The secondary figure
  // starts when the RPC has returned; the signal may overtake the answer, so
  // it can be negative, and is kept signed.
  std::vector<double> from_sent;
  std::vector<double> from_returned;
  for (size_t n = 0; n < samples; ++n) {
    auto i = (n * 7919) % jobs;
    auto& a = *agents[i];
    arrived[i] = 0;
    auto sent = clock_type::now().time_since_epoch().count();
    if (a.report_process_fault({{"8", "1"}}).code() != 0)
      return 1;
    auto returned = clock_type::now().time_since_epoch().count();
    if (!expect(a, "stopTrain"))
      return 1;
    from_sent.push_back(static_cast<double>(arrived[i] - sent) / 1e6);
    from_returned.push_back(static_cast<double>(arrived[i] - returned) / 1e6);
    // Finish the flow so the job is idle again.
    if (a.report_stop_complete(0).code() != 0 || !expect(a, "globalFault")
        || a.report_recover_strategy({"recover"}).code() != 0
        || !expect(a, "changeStrategy")
        || a.report_recover_status(0, "recover").code() != 0)
      return 1;
  }
  auto echo = echo_latencies(samples);
  auto p99 = percentile(from_sent, 0.99);
  auto echo_p99 = percentile(echo, 0.99);
  std::printf("fault -> stopTrain latency (client about to send "
              "ReportProcessFault -> agent's stream thread has stopTrain; "
              "includes the durable append of the fault), %zu jobs of %zu "
              "ranks subscribed, %zu samples: p50 %.3f ms, p99 %.3f ms, max "
              "%.3f ms (design target p99 <= 5 ms)\n",
              jobs, ranks, samples, percentile(from_sent, 0.5), p99,
              percentile(from_sent, 1.0));
  std::printf("secondary: ReportProcessFault returned -> stopTrain (signed: "
              "negative when the signal overtook the answer): p50 %.3f ms, "
              "p99 %.3f ms, min %.3f ms\n",
              percentile(from_returned, 0.5), percentile(from_returned, 0.99),
              percentile(from_returned, 0.0));
  std::printf("baseline: one unary round trip to a trivial gRPC server, %zu "
              "sequential samples: p50 %.3f ms, p99 %.3f ms\n",
              samples, percentile(echo, 0.5), echo_p99);
  std::printf("ratio fault -> stopTrain p99 / round-trip p99: %.1f\n",
              p99 / echo_p99);
  std::printf("RESULT\t%sFault -> stop signal: ReportProcessFault sent -> "
              "agent has stopTrain, p99 (%zu jobs of %zu ranks subscribed)\t"
              "%.3f ms\t%.3f ms (one unary round trip to a trivial gRPC "
              "server, p99)\t%.1f\tp99 <= 5 ms\n",
              secure ? "[secure] " : "",
              jobs, ranks, p99, echo_p99, p99 / echo_p99);
  std::fflush(stdout);

  // Cycles per second across concurrent jobs.
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (size_t t = 0; t < concurrency && t < jobs; ++t)
    threads.emplace_back([&, t] {
      for (size_t c = 0; c < cycles_per_job; ++c) {
        if (!cycle(*agents[t])) {
          failed = true;
          return;
        }
        ++done;
      }
    });
  for (auto& th : threads)
    th.join();
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (failed) {
    std::fprintf(stderr, "recovery_bench: a cycle failed\n");
    return 1;
  }
  auto cycles = static_cast<double>(done.load());
  // Baseline: the same number of unary round trips (4 per cycle) to a
  // trivial server, with the same concurrency.
  auto trips = done.load() * 4;
  auto echo_rate = echo_round_trips_per_second(trips, concurrency);
  std::printf("full recovery cycles (fault, stop, global fault, strategy, "
              "recover, success; 4 RPCs + 3 signals + 7 durable events each), "
              "%zu jobs cycling at once: %.0f cycles/s\n",
              std::min(concurrency, jobs), cycles / secs);
  std::printf("baseline: the same %zu unary round trips to a trivial gRPC "
              "server, same concurrency: %.0f round trips/s = %.0f "
              "cycle-equivalents/s\n",
              trips, echo_rate, echo_rate / 4);
  std::printf("ratio recoverd cycles / baseline cycle-equivalents: %.2f\n",
              (cycles / secs) / (echo_rate / 4));
  std::printf("RESULT\t%sRecovery cycles/s (fault..success, %zu jobs of %zu "
              "ranks at once)\t%.0f/s\t%.0f/s (4 unary round trips each to a "
              "trivial gRPC server)\t%.2f\t(compared, no target)\n",
              secure ? "[secure] " : "",
              std::min(concurrency, jobs), ranks, cycles / secs, echo_rate / 4,
              (cycles / secs) / (echo_rate / 4));
  std::fflush(stdout);

  // Durable reports per second: every job waits for its strategy report, so
  // each ReportProcessFault joins the running flow as one durable event.
  for (size_t t = 0; t < report_concurrency && t < jobs; ++t) {
    auto& a = *agents[t];
    if (a.report_process_fault({{"8", "1"}}).code() != 0 || !expect(a, "stopTrain")
        || a.report_stop_complete(0).code() != 0 || !expect(a, "globalFault"))
      return 1;
  }
  auto journal_now = [&] {
    journal_stats js;
    caf::scoped_actor scope{(*daemon)->system()};
    scope->request((*daemon)->journal(), 10s, status_atom::value)
      .receive([&](journal_stats& x) { js = x; }, [](caf::error&) {});
    return js;
  };
  auto j0 = journal_now();
  // Ours and the baselines take turns, `rounds` times, so a change in the
  // machine's load (it is shared) falls on every side of the ratios. The
  // baseline of the ratio is the agents' own call (ReportProcessFault with
  // one fault, the agent's deadline and wait-for-ready) answered at once by
  // a trivial server; the bare HealthCheck of earlier runs (a smaller
  // request, no deadline) is kept beside it.
  auto reporters = std::min(report_concurrency, jobs);
  auto report_baseline = std::make_unique<echo_server>();
  auto baseline_clients
    = same_call_clients(report_baseline->address(), reporters);
  side ours;
  side same;
  side health;
  std::vector<double> round_ratios;
  size_t next_rank = 0;
  for (size_t round = 0; round < rounds; ++round) {
    auto per_thread = reports_per_job / rounds
                      + (round < reports_per_job % rounds ? 1 : 0);
    auto trips = per_thread * reporters;
    auto ours_rate = ours.run(trips, [&] {
      threads.clear();
      for (size_t t = 0; t < reporters; ++t)
        threads.emplace_back([&, t] {
          for (size_t n = 0; n < per_thread; ++n) {
            auto rank = std::to_string((next_rank + n) % ranks);
            if (agents[t]->report_process_fault({{rank, "1"}}).code() != 0) {
              failed = true;
              return;
            }
          }
        });
      for (auto& th : threads)
        th.join();
    });
    if (failed) {
      std::fprintf(stderr, "recovery_bench: a report failed\n");
      return 1;
    }
    next_rank += per_thread;
    bool same_ok = true;
    auto same_rate = same.run(trips, [&] {
      same_ok = same_calls(baseline_clients, trips, ranks);
    });
    if (!same_ok) {
      std::fprintf(stderr, "recovery_bench: a call to the baseline failed\n");
      return 1;
    }
    health.run(trips, [&] {
      health_checks_per_second(report_baseline->address(), trips, reporters);
    });
    round_ratios.push_back(ours_rate / same_rate);
  }
  baseline_clients.clear();
  report_baseline.reset();
  auto report_rate = ours.rate();
  auto report_echo = same.rate();
  std::sort(round_ratios.begin(), round_ratios.end());
  std::printf("report ratio per round (ours, then the baselines, %zu times): "
              "min %.2f, median %.2f, max %.2f\n",
              rounds, round_ratios.front(),
              round_ratios[round_ratios.size() / 2], round_ratios.back());
  std::printf("CPU per call (this process, both ends, %u cores): ours %.0f "
              "us (%.0f%% busy, %.1f context switches), same calls to the "
              "trivial server %.0f us (%.0f%%, %.1f), HealthCheck %.0f us "
              "(%.0f%%, %.1f)\n",
              side::cores(), ours.cpu_us(), ours.busy(), ours.switches_per(),
              same.cpu_us(), same.busy(), same.switches_per(), health.cpu_us(),
              health.busy(), health.switches_per());
  auto j1 = journal_now();
  auto records = static_cast<double>(j1.records - j0.records);
  auto writes = static_cast<double>(j1.batches - j0.batches);
  auto write_micros = static_cast<double>(j1.write_micros - j0.write_micros);
  std::printf("journal during the reports: %.0f records in %.0f writes (%.1f "
              "records per fsync)\n",
              records, writes, records / std::max(1.0, writes));
  std::printf("journal writes took %.0f us each on average (sync included), "
              "%.0f%% of the reports' time\n",
              write_micros / std::max(1.0, writes),
              write_micros / 1e4 / ours.secs);
  // Where the difference goes: recoverd's stateless HealthCheck (its gRPC
  // server setup, no actors, no log) under the same load.
  auto own_health = health_checks_per_second(address, ours.calls, reporters);
  std::printf("recoverd's stateless HealthCheck, same load: %.0f calls/s "
              "(the gRPC edge alone)\n", own_health);
  std::printf("durable report RPCs (ReportProcessFault joining a running flow: "
              "one fsync'd event each), %zu jobs at once: %.0f reports/s\n",
              std::min(report_concurrency, jobs), report_rate);
  std::printf("baseline: the same %zu ReportProcessFault calls (agent "
              "clients, same concurrency) to a trivial gRPC server: %.0f "
              "calls/s\n",
              ours.calls, report_echo);
  std::printf("ratio recoverd reports / baseline (design target >= 0.60): "
              "%.2f\n",
              report_rate / report_echo);
  std::printf("bare HealthCheck round trips to the trivial server (the "
              "baseline before 2026-12-06: smaller request, no deadline): "
              "%.0f/s, ratio %.2f\n",
              health.rate(), report_rate / health.rate());
  std::printf("RESULT\t%sReports: durable report RPCs/s (%zu jobs of %zu "
              "ranks at once)\t%.0f/s\t%.0f/s (the same calls to a trivial "
              "gRPC server)\t%.2f\t>= 0.60\n",
              secure ? "[secure] " : "",
              std::min(report_concurrency, jobs), ranks, report_rate,
              report_echo,
              report_rate / report_echo);
  agents.clear();
  (*daemon)->stop();
  std::filesystem::remove_all(dir);
  return 0;
}
