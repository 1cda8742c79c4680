#pragma once

/// The daemon as an object: opens the event log, replays every job, starts
/// the actors and the gRPC server, and stops them in the right order. Used
/// by `main` and by the service tests (in-process server).

#include <chrono>
#include <cstdint>
#include <atomic>
#include <mutex>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/expected.hpp>
#include <grpcpp/server.h>

#include "actors/actors.hpp"
#include "actors/config.hpp"
#include "actors/model/text.hpp"
#include "services/access.hpp"
#include "services/listener.hpp"
#include "services/tls.hpp"

namespace recoverd {

namespace storage {
class event_log;
struct event_log_options;
struct replay_result;
} // namespace storage

class http_gateway;
class inspect_api;
class inspect_service;
class platform_service;
class recover_service;
class report_gate;
class request_metrics;

/// Everything the daemon is configured with.
struct app_options {
  /// gRPC listen address of the agent listener (every service when there
  /// is no control listener); port 0 picks a free port.
  std::string listen = "127.0.0.1:8899";
  /// TLS of the agent listener; plaintext by default (the unmodified TaskD
  /// client dials without TLS).
  tls_options tls;
  /// gRPC listen address of the control listener (Platform, Inspect, the
  /// O&M RPCs); empty: no control listener, everything on `listen`.
  std::string control_listen;
  /// TLS of the control listener.
  tls_options control_tls{{}, {}, {}, client_cert_mode::required};
  /// The authz file's policy; null: access control is off.
  std::shared_ptr<const authz_policy> authz;
  /// Whether the agent listener serves the O&M RPCs (SwitchNicTrack,
  /// StressTest and their operator streams).
  bool om_on_agent_listener = true;
  /// With access control on: callers of the agent listener without any
  /// identity act as agents of every job (the unmodified TaskD client).
  bool anonymous_agents = false;
  /// Per-client and per-job rate limits; unlimited by default here (the
  /// daemon's flags default to `rate_limits::defaults()`).
  rate_limits limits = rate_limits::unlimited();
  /// HTTP (JSON API, /metrics) listen address; port 0 picks a free port;
  /// empty: no HTTP server (the daemon's flag defaults to 127.0.0.1:8900).
  std::string http_listen;
  /// Time an HTTP client has to send a complete request head, from its
  /// connect or from the previous answer; slower connections are closed.
  std::chrono::milliseconds http_request_timeout{5000};
  /// TLS of the HTTP port; plaintext by default.
  tls_options http_tls{{}, {}, {}, client_cert_mode::optional};
  /// Directory of the event log.
  std::string data_dir = "./recoverd-data";
  /// Changes are refused (UNAVAILABLE) while the data directory's file
  /// system has less free space than this; 0: no check.
  uint64_t min_free_space = uint64_t{64} << 20;
  /// The event log's block cache, shared by its column families, with the
  /// index and filter blocks charged to it.
  uint64_t log_cache = uint64_t{32} << 20;
  /// Every memtable of the event log together.
  uint64_t log_memtables = uint64_t{64} << 20;
  /// Caps on open gRPC connections (total and per peer address); a
  /// connection over a cap is closed at once.
  connection_limits connections;
  /// Journal settings.
  journal_config journal;
  /// Registry and job settings.
  registry_config registry;
  /// The fleet's node registry (its clock defaults to the jobs' clock).
  nodes_config nodes;
  /// CAF worker threads; 0: CAF's default (one per core, at least 4).
  size_t worker_threads = 0;
  /// The jobs as a standby kept them live (`--store etcd`): start from
  /// these instead of replaying the log. Null: replay.
  std::shared_ptr<storage::replay_result> preloaded = nullptr;
  /// At start-up, leave dormant (replayed when first asked for) the jobs
  /// whose stored digest is current and, folded for their digest only, the
  /// others that may stay dormant (see `storage::replay_all`); false
  /// replays and spawns every job.
  bool dormant_start = true;
  /// How often the inspector stores the folds of the jobs' histories that
  /// changed since (a clean stop stores them all), so that the first fold
  /// after a crash reads only the events after them; zero: only at a clean
  /// stop. Not under `--store etcd`.
  std::chrono::milliseconds history_store_interval{60'000};
};

/// The event log's options from `opts` (the daemon's log, a replica's
/// archive).
storage::event_log_options log_options(const app_options& opts);

/// What start-up replayed.
struct replay_stats {
  size_t jobs = 0;          ///< Live jobs, dormant ones included.
  /// Live jobs left dormant until first asked for.
  size_t dormant = 0;
  /// Of the dormant jobs, those without a current digest (after a crash):
  /// folded for their digest, which start-up then stores.
  size_t folded_dormant = 0;
  size_t deleted_jobs = 0;  ///< Deleted jobs whose history is retained.
  size_t from_snapshot = 0; ///< Jobs that started at a snapshot.
  uint64_t events = 0;      ///< Events folded (after snapshots).
  size_t discarded = 0;     ///< Undecodable last records left out.
  size_t nodes = 0;         ///< Nodes the node registry knows.
  double millis = 0;        ///< Time to replay the log.
  double ready_millis = 0;  ///< Time from open to serving.
  bool preloaded = false;   ///< The jobs came live from a standby.
};

/// A running recoverd.
class app {
public:
  /// Opens the log, replays, starts actors and server. Fails with a clear
  /// message when the data directory is in use, the address cannot be
  /// bound, or the configuration is invalid; then nothing keeps running.
  [[nodiscard]] static caf::expected<std::unique_ptr<app>>
  start(app_options opts);

  ~app();

  /// Closes every stream, stops the server, flushes the journal and closes
  /// the log. Idempotent.
  void stop();

  /// The bound port.
  int port() const {
    return port_;
  }

  /// "host:port" clients can dial.
  std::string address() const;

  /// The bound port of the control listener; 0 without one.
  int control_port() const {
    return control_port_;
  }

  /// "host:port" of the control listener; `address()` without one.
  std::string control_address() const;

  /// The bound HTTP port; 0 without an HTTP server.
  int http_port() const;

  /// "host:port" of the HTTP server; empty without one.
  std::string http_address() const;

  /// The actor system.
  caf::actor_system& system() {
    return *sys_;
  }

  /// The job registry.
  job_registry_actor registry() const {
    return registry_;
  }

  /// The journal.
  journal_actor journal() const {
    return journal_;
  }

  /// The event hub.
  event_hub_actor hub() const {
    return hub_;
  }

  /// The inspector.
  inspector_actor inspector() const {
    return inspector_;
  }

  /// The historian.
  historian_actor historian() const {
    return historian_;
  }

  /// The fleet's node registry.
  node_registry_actor nodes() const {
    return nodes_;
  }

  /// The gRPC listeners' connection counts, summed (each listener has its
  /// own caps).
  connection_figures connections() const;

  /// Empty when the daemon is ready to serve (start-up done, the journal
  /// writes); otherwise why not (for `/readyz`).
  std::string unready_reason() const;

  /// The rate limiter of every listener.
  const rate_limiter& limiter() const {
    return *limiter_;
  }

  /// The event log.
  storage::event_log& log() {
    return *log_;
  }

  /// What start-up replayed.
  const replay_stats& replayed() const {
    return replayed_;
  }

private:
  app() = default;

  app_options opts_;
  std::unique_ptr<storage::event_log> log_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  journal_actor journal_;
  job_registry_actor registry_;
  event_hub_actor hub_;
  inspector_actor inspector_;
  historian_actor historian_;
  status_desk_actor desk_;
  node_registry_actor nodes_;
  job_directory_ptr directory_;
  std::unique_ptr<request_metrics> metrics_;
  std::unique_ptr<recover_service> recover_;
  std::unique_ptr<recover_service> control_recover_;
  std::unique_ptr<platform_service> platform_;
  std::unique_ptr<inspect_api> inspect_api_;
  std::unique_ptr<inspect_service> inspect_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc_listener> listener_;
  std::unique_ptr<grpc::Server> control_server_;
  std::unique_ptr<grpc_listener> control_listener_;
  std::unique_ptr<http_gateway> http_;
  std::shared_ptr<rate_limiter> limiter_;
  std::shared_ptr<report_gate> gate_;
  int port_ = 0;
  int control_port_ = 0;
  replay_stats replayed_;
  bool stopped_ = false;
  // Sets the gRPC health status of both listeners from readiness.
  void update_health();
  // Readiness: serving once start-up is done, while the journal writes.
  std::atomic<bool> serving_{false};
  std::atomic<bool> journal_ok_{true};
  // Guards the servers' health status against their reset in `stop`.
  std::mutex health_mtx_;
};

} // namespace recoverd
