// recoverd: the daemon. Parses flags (and an optional config file), starts
// the app, waits for SIGINT/SIGTERM, stops cleanly.

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <pthread.h>
#include <sstream>
#include <unistd.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "services/app.hpp"
#include "services/grpc_log.hpp"
#include "services/replica.hpp"

using namespace recoverd;

namespace {

/// One configurable wait: flag name, where it goes, what it is.
struct wait_option {
  const char* flag;
  millis timeouts::*member;
  const char* help;
};

const wait_option wait_options[] = {
  {"--keepalive-interval", &timeouts::keepalive,
   "period of keep-alive signals on agent streams"},
  {"--report-timeout", &timeouts::report,
   "any wait for an agent report (stop, strategy, status, results)"},
  {"--notify-timeout", &timeouts::notify,
   "a signal that no subscriber picks up (design 4.3)"},
  {"--fault-flush-wait", &timeouts::fault_flush,
   "fault flush before the global fault notice"},
  {"--resource-release-wait", &timeouts::resource_release,
   "resource force-release before the normal-fault global notice"},
  {"--recover-in-place-wait", &timeouts::recover_in_place,
   "recover-in-place 'fault disappeared?' wait"},
  {"--reschedule-wait", &timeouts::reschedule,
   "pod reschedule wait for recover"},
  {"--hccl-convergence-wait", &timeouts::hccl_convergence,
   "HCCL routing convergence before retry"},
  {"--exit-reschedule-wait", &timeouts::exit_reschedule,
   "listen for rescheduling after dump/exit"},
  {"--restart-all-wait", &timeouts::restart_all,
   "wait after restarting all processes"},
  {"--job-fallback-wait", &timeouts::job_fallback,
   "job-level fallback: wait for the job to run again"},
  {"--platform-wait", &timeouts::platform,
   "platform annotation waits (strategy, result fault, rank table)"},
};

std::string format_millis(millis x) {
  auto ms = x.count();
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// A size flag: its option in `app_options`, the least it takes (0: none,
// and 0 turns it off) and its help (the default comes from `app_options`).
struct size_option {
  const char* flag;
  uint64_t app_options::*member;
  uint64_t minimum;
  const char* help;
};

const size_option size_options[] = {
  {"--min-free-space", &app_options::min_free_space, 0,
   "changes are refused (UNAVAILABLE) while the data directory's file "
   "system has less free space"},
  // RocksDB takes any size; below these the log would read and flush for
  // every few records.
  {"--log-cache", &app_options::log_cache, uint64_t{1} << 20,
   "the event log's block cache, shared by its column families and holding "
   "their index and filter blocks"},
  {"--log-memtables", &app_options::log_memtables, uint64_t{16} << 20,
   "the event log's memtables together; past it the largest is flushed"},
};

// A size as `parse_size` reads it: with the largest unit that divides it.
std::string format_size(uint64_t x) {
  static const std::pair<int, const char*> units[] = {
    {30, "g"}, {20, "m"}, {10, "k"}};
  for (const auto& [shift, unit] : units)
    if (x != 0 && x % (uint64_t{1} << shift) == 0)
      return std::to_string(x >> shift) + unit;
  return std::to_string(x);
}

} // namespace

namespace {

// Parses a size: digits with an optional k, m or g (powers of 1024).
bool parse_size(const std::string& text, uint64_t& out) {
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  if (text.empty() || text[0] == '-' || text[0] == '+')
    return false;
  auto unit = text.substr(used);
  int shift = unit.empty()                   ? 0
              : unit == "k" || unit == "K" ? 10
              : unit == "m" || unit == "M" ? 20
              : unit == "g" || unit == "G" ? 30
                                           : -1;
  if (shift < 0 || (shift > 0 && n > (~0ull >> shift)))
    return false;
  out = static_cast<uint64_t>(n) << shift;
  return true;
}

// Raises the soft limit on open files to the hard one: every agent stream
// and HTTP client holds a descriptor, and RocksDB needs some for its next
// WAL and SST files. With the common soft limit of 1024, an idle-connection
// flood would starve the log.
void raise_open_file_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max)
    return;
  auto was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    ES_WARN("cannot raise the open-file limit from {}: {}", was,
            std::strerror(errno));
    return;
  }
  ES_INFO("open-file limit raised from {} to {}", was, lim.rlim_cur);
}

// The TLS flags of one listener: --PREFIXtls-cert, --PREFIXtls-key and
// --PREFIXclient-ca.
void add_tls_flags(CLI::App& cli, const std::string& prefix, tls_options& tls,
                   const std::string& what, const std::string& client_note) {
  cli.add_option("--" + prefix + "tls-cert", tls.cert_file,
                 "PEM certificate chain of " + what + "; without it " + what
                   + " is plaintext");
  cli.add_option("--" + prefix + "tls-key", tls.key_file,
                 "PEM private key of --" + prefix + "tls-cert");
  cli.add_option("--" + prefix + "client-ca", tls.client_ca_file,
                 "PEM CA of client certificates of " + what
                   + "; a certificate sent is verified against it and names "
                     "the caller ("
                   + client_note + ")");
}

} // namespace

int main(int argc, char** argv) {
  app_options opts;
  opts.http_listen = "127.0.0.1:8900";
  std::string log_level = "info";
  std::string log_format = "text";
  std::string sync = "always";
  std::string sync_interval = "100ms";
  std::string retention = "30d";
  std::string history_store_interval = "60s";
  std::string node_half_life = "1h";
  std::string restart_budget = "off";
  std::string budget_verdict = "reschedule";
  std::string http_request_timeout = "5s";
  std::map<std::string, std::string> waits;
  for (const auto& w : wait_options)
    waits[w.flag] = format_millis(opts.registry.job.waits.*w.member);

  CLI::App cli{"recoverd: keeps distributed training jobs alive through "
               "faults. Serves the Recover protocol of MindCluster ClusterD, "
               "the Platform and Inspect APIs on one gRPC port, and the "
               "Inspect API as JSON plus /metrics on an HTTP port; every job "
               "change is an event in a RocksDB log in the data directory."};
  cli.set_config("--config", "",
                 "read options from this TOML or INI file (keys are the long "
                 "flag names without dashes, e.g. listen = \"...\"); an "
                 "unknown key or section is an error");
  cli.allow_config_extras(CLI::config_extras_mode::error);
  cli.set_version_flag("--version", std::string{"recoverd "} + RECOVERD_VERSION);
  cli.add_option("--listen", opts.listen,
                 "gRPC listen address host:port; port 0 picks a free one")
    ->capture_default_str();
  cli.add_option("--http-listen", opts.http_listen,
                 "HTTP listen address host:port of the JSON API (/api/v1) "
                 "and /metrics; port 0 picks a free one; \"off\" disables it")
    ->capture_default_str();
  cli.add_option("--http-request-timeout", http_request_timeout,
                 "time an HTTP client has to send a complete request head, "
                 "from its connect or the previous answer; slower "
                 "connections are closed")
    ->capture_default_str();
  cli.add_option("--max-connections", opts.connections.total,
                 "gRPC connections open at once; a connection over the cap "
                 "is closed at accept (0: no cap)")
    ->capture_default_str();
  cli.add_option("--max-connections-per-peer", opts.connections.per_peer,
                 "gRPC connections open at once from one peer address "
                 "(0: no cap)")
    ->capture_default_str();
  cli.add_option("--data-dir", opts.data_dir,
                 "directory of the event log (created when missing)")
    ->capture_default_str();
  std::map<std::string, std::string> sizes;
  for (const auto& o : size_options) {
    sizes[o.flag] = format_size(opts.*o.member);
    auto help = std::string{o.help} + " (bytes, or with k, m, g";
    help += o.minimum > 0 ? "; at least " + format_size(o.minimum)
                          : std::string{"; 0: no check"};
    cli.add_option(o.flag, sizes[o.flag], help + ")")->capture_default_str();
  }
  cli.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error or off")
    ->capture_default_str()
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  cli.add_option("--log-format", log_format, "text or json (one object a line)")
    ->capture_default_str()
    ->check(CLI::IsMember({"text", "json"}));
  cli.add_option("--sync", sync,
                 "always: fsync every journal batch before answering; batch: "
                 "answer after the write and fsync every --sync-interval")
    ->capture_default_str()
    ->check(CLI::IsMember({"always", "batch"}));
  cli.add_option("--sync-interval", sync_interval,
                 "WAL sync period with --sync=batch")
    ->capture_default_str();
  cli.add_option("--max-jobs", opts.registry.max_jobs,
                 "most jobs known at once, and most registered for recovery "
                 "(Register answers 500 beyond it)")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  cli.add_option("--snapshot-every", opts.registry.job.snapshot_every,
                 "write a job snapshot every N events (0: never) so start-up "
                 "replays only the tail; one over 4 KiB also waits until the "
                 "events since weigh half of it")
    ->capture_default_str();
  cli.add_option("--restart-budget", restart_budget,
                 "crash-loop guard: at most N fault recoveries of a job "
                 "within a window, e.g. 3/1h; past it the job is not "
                 "recovered in place (see --restart-budget-verdict); a job's "
                 "annotation recoverd.io/restart-budget overrides it; off = "
                 "no budget")
    ->capture_default_str();
  cli.add_option("--restart-budget-verdict", budget_verdict,
                 "past the restart budget: reschedule (the job-level "
                 "fallback: label pause, the job restarted as a whole) or "
                 "exit (the job is killed)")
    ->check(CLI::IsMember({"reschedule", "exit"}))
    ->capture_default_str();
  cli.add_option("--retention", retention,
                 "how long history is kept: a deleted job's whole history "
                 "(Register answers 402 for it meanwhile), and a live job's "
                 "events before its latest snapshot; incidents are kept; "
                 "checked at start-up and hourly (duration: 36h, 30d, ...)")
    ->capture_default_str();
  cli.add_option("--history-store-interval", history_store_interval,
                 "how often the folds of the jobs' histories that changed "
                 "are stored, so that the first dashboard answer after a "
                 "crash reads only the events since (a clean stop stores "
                 "them all); 0: only at a clean stop")
    ->capture_default_str();
  cli.add_option("--node-score-half-life", node_half_life,
                 "the fleet's node registry: a node's fault score halves "
                 "every this long (duration: 30m, 1h, ...)")
    ->capture_default_str();
  cli.add_option("--node-quarantine-score",
                 opts.nodes.scoring.quarantine_score,
                 "the fleet's node registry: a node whose fault score "
                 "reaches this is quarantined until an operator clears it "
                 "(a device separation adds 3, a chip restart or an agent's "
                 "fault report 1)")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  cli.add_option("--stream-buffer", opts.registry.job.stream_buffer,
                 "messages a stream may queue before it is closed with "
                 "RESOURCE_EXHAUSTED")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  add_tls_flags(cli, "", opts.tls, "the agent listener",
                "agents may also use tokens");
  cli.add_option("--control-listen", opts.control_listen,
                 "gRPC address of the control listener (Platform, Inspect, "
                 "reflection, O&M RPCs); unset: everything on --listen");
  add_tls_flags(cli, "control-", opts.control_tls, "the control listener",
                "see --control-client-cert");
  std::string control_client_cert = "required";
  cli.add_option("--control-client-cert", control_client_cert,
                 "with --control-client-ca: required (the TLS handshake "
                 "fails without a certificate) or optional (bearer tokens "
                 "work too)")
    ->capture_default_str()
    ->check(CLI::IsMember({"required", "optional"}));
  add_tls_flags(cli, "http-", opts.http_tls, "the HTTP port (HTTPS)",
                "tokens work too");
  std::string authz_file;
  cli.add_option("--authz", authz_file,
                 "TOML file of identities and tokens with their roles; "
                 "unset: access control is off");
  bool no_om_on_agent = false;
  cli.add_flag("--no-om-on-agent-listener", no_om_on_agent,
               "with --control-listen: SwitchNicTrack, StressTest and their "
               "operator streams only on the control listener");
  cli.add_flag("--allow-anonymous-agents", opts.anonymous_agents,
               "with --authz: callers of the agent listener without "
               "certificate or token act as agents of every job (the "
               "unmodified TaskD client)");
  std::vector<std::string> rate_limit_args;
  cli.add_option("--rate-limit", rate_limit_args,
                 "CLASS=RATE[/BURST], repeatable: calls per second (and "
                 "burst) one client (identity, else IP address) may make in "
                 "a class: report, agent, read, write, om, health; job=... "
                 "limits each job's reports; RATE 0 = unlimited. Defaults: "
                 "report=20000/40000 agent=5000/10000 read=5000/10000 "
                 "write=5000/10000 om=100/200 health=1000/2000 job=1000/2000");
  bool no_rate_limits = false;
  cli.add_flag("--no-rate-limits", no_rate_limits,
               "no per-client or per-job rate limit at all");
  for (const auto& w : wait_options)
    cli.add_option(w.flag, waits[w.flag],
                   std::string{w.help}
                     + " (duration: 250ms, 5s, 1.5m, 2h, 1d; a bare number "
                       "is seconds)")
      ->capture_default_str();
  // --store etcd: active/standby replicas on an etcd cluster (issue #14).
  std::string store = "rocksdb";
  replica_options replica;
  std::string etcd_endpoints;
  std::string etcd_lease_ttl = "5s";
  cli.add_option("--store", store,
                 "where the authoritative log lives: rocksdb (the data "
                 "directory alone) or etcd (an etcd cluster, with the data "
                 "directory as this replica's archive; one replica leads, "
                 "the others stand by)")
    ->check(CLI::IsMember({"rocksdb", "etcd"}))
    ->capture_default_str();
  cli.add_option("--etcd-endpoints", etcd_endpoints,
                 "etcd members' client URLs, comma-separated "
                 "(http://host:2379 or https://host:2379)");
  cli.add_option("--etcd-cluster", replica.cluster,
                 "this recoverd cluster's key prefix in etcd: "
                 "/recoverd/NAME/")
    ->capture_default_str();
  cli.add_option("--etcd-lease-ttl", etcd_lease_ttl,
                 "the leader lease's TTL (whole seconds, at least 2s): how "
                 "long a dead leader holds the lead")
    ->capture_default_str();
  cli.add_option("--etcd-ca", replica.etcd.ca_file,
                 "PEM CA file of the etcd members' certificates (TLS)");
  cli.add_option("--etcd-cert", replica.etcd.cert_file,
                 "PEM client certificate for etcd");
  cli.add_option("--etcd-key", replica.etcd.key_file,
                 "PEM key of --etcd-cert");
  cli.add_option("--advertise", replica.advertise,
                 "the agent address (host:port) the leader publishes in "
                 "etcd; default: the bound agent listener");
  // Usage errors, typos in --config (an unknown key or section) included,
  // exit 2 with CLI11's message naming what it could not take.
  try {
    cli.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return cli.exit(e); // --help, --version
  } catch (const CLI::ConfigError& e) {
    // CLI11 says "INI was not able to parse KEY" for TOML files too.
    std::string what = e.what();
    const std::string prefix = "INI was not able to parse ";
    if (what.rfind(prefix, 0) == 0) {
      auto key = what.substr(prefix.size());
      // A section opens with the item "NAME.++".
      if (key.size() > 3 && key.compare(key.size() - 3, 3, ".++") == 0)
        what = "unknown section [" + key.substr(0, key.size() - 3)
               + "] (recoverd's keys have no sections)";
      else
        what = "unknown key '" + key + "' (keys are the long flag names)";
    }
    std::cerr << "recoverd: --config: " << what << "\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    cli.exit(e);
    return 2;
  }

  if (!configure_logging(log_level, log_format)) {
    std::cerr << "recoverd: bad --log-level or --log-format\n";
    return 2;
  }
  route_grpc_logs();
  if (!parse_sync_policy(sync, opts.journal.sync)
      || !parse_duration(sync_interval, opts.journal.sync_interval)) {
    std::cerr << "recoverd: bad --sync or --sync-interval\n";
    return 2;
  }
  if (!parse_duration(retention, opts.registry.retention)) {
    std::cerr << "recoverd: --retention: not a duration: " << retention
              << "\n";
    return 2;
  }
  if (!parse_duration(history_store_interval, opts.history_store_interval)) {
    std::cerr << "recoverd: --history-store-interval: not a duration: "
              << history_store_interval << "\n";
    return 2;
  }
  millis half_life{};
  if (!parse_duration(node_half_life, half_life) || half_life.count() <= 0) {
    std::cerr << "recoverd: --node-score-half-life: not a positive duration: "
              << node_half_life << "\n";
    return 2;
  }
  opts.nodes.scoring.half_life_ms = half_life.count();
  millis request_timeout{};
  if (!parse_duration(http_request_timeout, request_timeout)
      || request_timeout.count() <= 0) {
    std::cerr << "recoverd: --http-request-timeout: not a positive "
                 "duration: "
              << http_request_timeout << "\n";
    return 2;
  }
  opts.http_request_timeout = request_timeout;
  for (const auto& o : size_options)
    if (!parse_size(sizes[o.flag], opts.*o.member)
        || opts.*o.member < o.minimum) {
      std::cerr << "recoverd: " << o.flag << ": not a size";
      if (o.minimum > 0)
        std::cerr << " of at least " << format_size(o.minimum);
      std::cerr << ": " << sizes[o.flag] << "\n";
      return 2;
    }
  for (const auto& w : wait_options)
    if (!parse_duration(waits[w.flag], opts.registry.job.waits.*w.member)) {
      std::cerr << "recoverd: " << w.flag << ": not a duration: "
                << waits[w.flag] << "\n";
      return 2;
    }
  auto& job_waits = opts.registry.job.waits;
  if (!parse_restart_budget(restart_budget, job_waits.budget_flows,
                            job_waits.budget_window)) {
    std::cerr << "recoverd: --restart-budget: not N/DURATION (e.g. 3/1h) or "
                 "off: "
              << restart_budget << "\n";
    return 2;
  }
  job_waits.budget_exit = budget_verdict == "exit";

  opts.control_tls.client_certs = control_client_cert == "optional"
                                    ? client_cert_mode::optional
                                    : client_cert_mode::required;
  opts.om_on_agent_listener = !no_om_on_agent;
  opts.limits = no_rate_limits ? rate_limits::unlimited()
                               : rate_limits::defaults();
  for (const auto& x : rate_limit_args)
    if (auto err = parse_rate_limit(x, opts.limits)) {
      std::cerr << "recoverd: " << message_of(err) << "\n";
      return 2;
    }
  if (!authz_file.empty()) {
    auto policy = load_authz_file(authz_file);
    if (!policy) {
      std::cerr << "recoverd: " << message_of(policy.error()) << "\n";
      return 2;
    }
    opts.authz = std::make_shared<const authz_policy>(std::move(*policy));
  }

  raise_open_file_limit();

  // Signals are taken by sigwait below; every thread started from here on
  // inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (opts.http_listen == "off")
    opts.http_listen.clear();
  if (store == "etcd") {
    std::stringstream list{etcd_endpoints};
    for (std::string x; std::getline(list, x, ',');)
      if (!x.empty())
        replica.etcd.endpoints.push_back(x);
    if (!parse_duration(etcd_lease_ttl, replica.lease_ttl)) {
      std::cerr << "recoverd: --etcd-lease-ttl: not a duration: "
                << etcd_lease_ttl << "\n";
      return 2;
    }
    if (auto err = validate(replica)) {
      std::cerr << "recoverd: --store etcd: " << message_of(err) << "\n";
      return 2;
    }
    switch (run_replica(opts, replica, signals)) {
      case replica_end::stopped:
        return 0;
      case replica_end::failed:
        return 1;
      case replica_end::deposed:
        // A clean slate: the same process (pid, flags) starts again as a
        // standby, its state rebuilt from etcd and the archive.
        std::fflush(nullptr);
        execv("/proc/self/exe", argv);
        std::cerr << "recoverd: cannot re-join as a standby: "
                  << std::strerror(errno) << "\n";
        return 1;
    }
  } else if (!etcd_endpoints.empty()) {
    std::cerr << "recoverd: --etcd-endpoints needs --store etcd\n";
    return 2;
  }
  auto running = app::start(opts);
  if (!running) {
    std::cerr << "recoverd: " << message_of(running.error()) << "\n";
    return 1;
  }
  std::printf("recoverd: listening on %s\n", (*running)->address().c_str());
  if ((*running)->control_port() != 0)
    std::printf("recoverd: control on %s\n",
                (*running)->control_address().c_str());
  if (!(*running)->http_address().empty())
    std::printf("recoverd: http on %s\n", (*running)->http_address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  ES_INFO("recoverd received {}; shutting down",
          sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*running)->stop();
  return 0;
}
