#include "services/app.hpp"

#include <chrono>
#include <cmath>

#include <absl/synchronization/mutex.h>
#include <caf/logger.hpp>
#include <caf/scoped_actor.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

#include "actors/error.hpp"
#include "health.pb.h"
#include "actors/event_hub.hpp"
#include "actors/historian.hpp"
#include "actors/inspector.hpp"
#include "actors/status_desk.hpp"
#include "actors/job_directory.hpp"
#include "actors/job_registry.hpp"
#include "actors/journal.hpp"
#include "actors/log.hpp"
#include "actors/node_registry.hpp"
#include "services/http_gateway.hpp"
#include "services/inspect_service.hpp"
#include "services/listener.hpp"
#include "services/metrics.hpp"
#include "services/platform_service.hpp"
#include "services/recover_service.hpp"
#include "storage/event_log.hpp"
#include "storage/node_codec.hpp"
#include "storage/replay.hpp"

namespace recoverd {

namespace {

// What every gRPC listener shares: channel arguments, message limits and
// the metrics interceptor.
void configure_builder(grpc::ServerBuilder& builder, request_metrics& metrics) {
  // gRPC enables SO_REUSEPORT by default: a second daemon would then share
  // the port silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keep-alive as the reference: server pings after 1 min idle, 5 s timeout;
  // clients may ping every 3 s (existing agents do), even without calls.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
    GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 2'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A connection that has not finished its HTTP/2 handshake in 10 s is
  // closed (gRPC's default is 2 min): a flood of silent TCP connections
  // holds descriptors for seconds, not minutes.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.SetMaxReceiveMessageSize(4 * 1024 * 1024);
  builder.SetMaxSendMessageSize(8 * 1024 * 1024);
  std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
    interceptors;
  // The methods /metrics names; every other method is "other". The default
  // health service is not built from a generated descriptor: it is named
  // here.
  auto known = grpc_methods(
    {::Recover::service_full_name(),
     recoverd::platform::v1::Platform::service_full_name(),
     recoverd::inspection::v1::Inspect::service_full_name(),
     "grpc.reflection.v1alpha.ServerReflection",
     "grpc.reflection.v1.ServerReflection"});
  known.insert("/grpc.health.v1.Health/Check");
  known.insert("/grpc.health.v1.Health/Watch");
  interceptors.push_back(make_metrics_interceptor(metrics, std::move(known)));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
}

// One gRPC listener: recoverd accepts on `listen` itself (to cap
// connections in total and per peer before gRPC holds them), hands them to
// a server of `services` with the credentials of `tls`, and starts it.
caf::error serve_listener(const std::string& listen, connection_limits limits,
                          const tls_options& tls, request_metrics& metrics,
                          const std::vector<grpc::Service*>& services,
                          std::unique_ptr<grpc::Server>& server,
                          std::unique_ptr<grpc_listener>& listener) {
  auto creds = make_server_credentials(tls);
  if (!creds)
    return creds.error();
  grpc::ServerBuilder builder;
  configure_builder(builder, metrics);
  auto listening = grpc_listener::open(listen, limits);
  if (!listening)
    return listening.error();
  listener = std::move(*listening);
  listener->attach(builder, *creds);
  for (auto* x : services)
    builder.RegisterService(x);
  server = builder.BuildAndStart();
  if (server)
    listener->start();
  if (!server || listener->port() == 0) {
    server.reset();
    return make_error(errc::invalid_argument,
                      "cannot listen on " + listen
                        + " (address in use or invalid)");
  }
  return caf::none;
}

} // namespace

storage::event_log_options log_options(const app_options& opts) {
  storage::event_log_options result;
  result.path = opts.data_dir;
  result.sync = opts.journal.sync == sync_policy::always;
  result.min_free_bytes = opts.min_free_space;
  result.block_cache_bytes = opts.log_cache;
  result.memtable_bytes = opts.log_memtables;
  return result;
}

caf::expected<std::unique_ptr<app>> app::start(app_options opts) {
  if (!opts.registry.job.clock)
    opts.registry.job.clock = system_clock_ms;
  if (auto err = validate(opts.registry))
    return err;
  if (!opts.nodes.clock)
    opts.nodes.clock = opts.registry.job.clock;
  if (auto err = validate(opts.nodes))
    return err;
  if (auto err = validate(opts.journal))
    return err;
  if (auto err = validate(opts.tls, "agent listener"))
    return err;
  if (auto err = validate(opts.control_tls, "control listener"))
    return err;
  if (auto err = validate(opts.http_tls, "HTTP port"))
    return err;
  // Debian builds Abseil without NDEBUG, so every absl::Mutex that gRPC
  // takes also updates a global lock graph to detect deadlocks: a few
  // percent of a report's CPU, under a global lock of its own.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<app> self{new app};
  self->opts_ = opts;
  // 1. The log (fails at once when another daemon holds the directory).
  auto t0 = std::chrono::steady_clock::now();
  auto since = [](auto start) {
    return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
  };
  auto log = storage::event_log::open(log_options(opts));
  if (!log)
    return log.error();
  self->log_ = std::move(*log);
  // 2. Replay every job.
  auto t1 = std::chrono::steady_clock::now();
  auto replayed = opts.preloaded
                    ? caf::expected<storage::replay_result>{std::move(
                      *opts.preloaded)}
                    : storage::replay_all(*self->log_, 0,
                                          opts.dormant_start);
  self->opts_.preloaded = nullptr;
  self->replayed_.preloaded = opts.preloaded != nullptr;
  if (!replayed)
    return replayed.error();
  // A torn last record goes before the journal runs, so that the job's next
  // event takes its seq and the cluster-wide order never points at it.
  for (const auto& x : replayed->discarded) {
    ES_WARN("recoverd discarded event {} of job {} ({} bytes): it cannot be "
            "decoded and is the job's last record, as a write torn by a "
            "crash leaves it: {}",
            x.seq, x.job_id, x.bytes, x.reason);
    if (auto found = self->log_->discard(x.job_id, x.seq); !found)
      return found.error();
  }
  std::vector<initial_job> jobs;
  jobs.reserve(replayed->live.size());
  for (auto& j : replayed->live)
    jobs.push_back({std::move(j.state), j.tail});
  replayed->live.clear();
  self->replayed_.jobs = jobs.size() + replayed->dormant.size();
  self->replayed_.dormant = replayed->dormant.size();
  self->replayed_.folded_dormant = replayed->fresh_digests.size();
  self->replayed_.deleted_jobs = replayed->deleted.size();
  self->replayed_.from_snapshot = replayed->from_snapshot;
  self->replayed_.events = replayed->events_replayed;
  self->replayed_.discarded = replayed->discarded.size();
  // The fleet's node registry: its own stream, apart from every job's.
  auto nodes = storage::replay_nodes(*self->log_, opts.nodes.scoring);
  if (!nodes)
    return nodes.error();
  self->replayed_.nodes = nodes->table.nodes.size();
  self->replayed_.millis = since(t1);
  // 3. Actors.
  self->cfg_ = std::make_unique<caf::actor_system_config>();
  if (opts.worker_threads > 0)
    self->cfg_->set("scheduler.max-threads", opts.worker_threads);
  self->cfg_->add_error_category(errc_category, render_error);
  // An idle CAF worker polls its queue, then sleeps 50 us at a time for up
  // to 25 ms before it waits on its condition variable. On the few cores a
  // daemon next to the training job gets, those wake-ups take the CPU the
  // gRPC threads need (recovery_bench: reports/s +35% without them); an
  // idle worker now waits on the condition variable right after polling.
  self->cfg_->set("work-stealing.moderate-poll-attempts", size_t{0});
  self->sys_ = std::make_unique<caf::actor_system>(*self->cfg_);
  // The journal blocks in fsync: it gets its own thread. Its failures make
  // the daemon unready (gRPC health NOT_SERVING, /readyz 503).
  auto journal_cfg = opts.journal;
  journal_cfg.on_health = [raw = self.get()](bool ok) {
    raw->journal_ok_ = ok;
    raw->update_health();
  };
  self->journal_ = self->sys_->spawn<caf::detached>(
    recoverd::journal, self->log_.get(), journal_cfg);
  self->nodes_ = self->sys_->spawn(node_registry, std::move(*nodes),
                                   opts.nodes, self->journal_);
  // Jobs tell the node registry what they made durable about their nodes.
  opts.registry.job.observe_nodes
    = [hdl = self->nodes_](std::vector<node_observation> xs) {
        caf::anon_send(hdl, observe_atom::value, std::move(xs));
      };
  self->registry_ = self->sys_->spawn(job_registry, opts.registry,
                                      self->journal_, std::move(jobs),
                                      std::move(replayed->dormant),
                                      std::move(replayed->deleted),
                                      static_cast<const storage::event_log*>(
                                        self->log_.get()));
  // The digests start-up computed, none being current (as after a crash):
  // stored, they spare the next start-up that fold. Not at once: checking
  // each against its job's last record takes the CPU start-up needs to
  // serve. A cache: should the daemon stop first or the write fail, the
  // next start-up folds those jobs again, nothing worse.
  if (!replayed->fresh_digests.empty())
    caf::delayed_anon_send(self->journal_, std::chrono::seconds{5},
                           digest_atom::value,
                           std::move(replayed->fresh_digests));
  // Live watchers get what the journal makes durable, from the first event
  // after start-up on.
  auto watching = std::make_shared<std::atomic<size_t>>(0);
  self->hub_ = self->sys_->spawn(event_hub, watching);
  {
    caf::scoped_actor scope{*self->sys_};
    caf::error failed;
    scope->request(self->journal_, std::chrono::seconds(10), watch_atom::value,
                   self->hub_, watching)
      .receive([](ok_atom) {}, [&](caf::error& err) { failed = err; });
    // Reports reach their job without a hop through the registry.
    self->directory_ = std::make_shared<job_directory>();
    scope->request(self->registry_, std::chrono::seconds(60), watch_atom::value,
                   self->directory_)
      .receive([](ok_atom) {}, [&](caf::error& err) { failed = err; });
    if (failed) {
      self->stop();
      return failed;
    }
  }
  // The inspector and the historian read the log: each gets its own
  // thread, so that a long job's post-mortem does not hold up /metrics.
  const auto* reader = static_cast<const storage::event_log*>(self->log_.get());
  self->historian_ = self->sys_->spawn<caf::detached>(recoverd::historian,
                                                      reader);
  self->inspector_ = self->sys_->spawn<caf::detached>(
    recoverd::inspector, reader, self->registry_, self->journal_, self->hub_,
    opts.journal.authority ? std::chrono::milliseconds{0}
                           : opts.history_store_interval);
  // GetStatus asks each of them with a timeout, from an actor that is never
  // busy: a stuck one is listed as such.
  self->desk_ = self->sys_->spawn(
    status_desk, status_components{self->registry_, self->journal_,
                                   self->hub_, self->inspector_,
                                   self->historian_});
  // 4. The servers: the agent listener, and the control listener when one
  // is configured (a service object serves one server: the control
  // listener gets its own Recover instance, for the O&M RPCs).
  auto buffer = opts.registry.job.stream_buffer;
  bool split = !opts.control_listen.empty();
  self->limiter_ = std::make_shared<rate_limiter>(opts.limits);
  access_settings agent_access{opts.authz,
                               split ? listener_kind::agent
                                     : listener_kind::combined,
                               opts.om_on_agent_listener,
                               opts.anonymous_agents, self->limiter_};
  access_settings control_access{opts.authz, listener_kind::control,
                                 opts.om_on_agent_listener, false,
                                 self->limiter_};
  const auto& ui_access = split ? control_access : agent_access;
  // A fault's stops go out before the answers of the jobs it already
  // stopped (design §7).
  self->gate_ = std::make_shared<report_gate>();
  const auto& gate = self->gate_;
  self->recover_ = std::make_unique<recover_service>(
    *self->sys_, self->registry_, buffer, self->directory_, agent_access, gate);
  if (split)
    self->control_recover_ = std::make_unique<recover_service>(
      *self->sys_, self->registry_, buffer, self->directory_, control_access,
      gate);
  self->platform_ = std::make_unique<platform_service>(
    *self->sys_, self->registry_, buffer, ui_access, self->nodes_,
    self->directory_, gate);
  self->inspect_api_ = std::make_unique<inspect_api>(
    *self->sys_, self->inspector_, self->historian_, self->desk_, self->hub_,
    self->nodes_);
  self->inspect_ = std::make_unique<inspect_service>(*self->inspect_api_,
                                                     buffer, ui_access);
  self->metrics_ = std::make_unique<request_metrics>();
  self->metrics_->set_connection_source(
    [raw = self.get()] { return raw->connections(); });
  self->metrics_->set_rate_limiter(self->limiter_);
  self->metrics_->set_report_gate(self->gate_);
  // grpc.health.v1.Health (SERVING while the server runs) and reflection,
  // so grpcurl and load balancers work.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC serves health without protobuf descriptors; using ours here links
  // them in, so reflection can describe grpc.health.v1.Health too.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  std::vector<grpc::Service*> agent_services{self->recover_.get()};
  if (!split) {
    agent_services.push_back(self->platform_.get());
    agent_services.push_back(self->inspect_.get());
  }
  if (auto err = serve_listener(opts.listen, opts.connections, opts.tls,
                                *self->metrics_, agent_services,
                                self->server_, self->listener_)) {
    self->stop();
    return err;
  }
  self->port_ = self->listener_->port();
  if (split) {
    if (auto err = serve_listener(
          opts.control_listen, opts.connections, opts.control_tls,
          *self->metrics_,
          {self->control_recover_.get(), self->platform_.get(),
           self->inspect_.get()},
          self->control_server_, self->control_listener_)) {
      self->stop();
      return err;
    }
    self->control_port_ = self->control_listener_->port();
  }
  // NOT_SERVING until the jobs are there.
  self->update_health();
  // The registry spawns the jobs before it takes its first message: once it
  // answers, every job can be served.
  {
    caf::scoped_actor probe{*self->sys_};
    probe->request(self->registry_, std::chrono::seconds(60), get_atom::value,
                   std::string{})
      .receive([](const job_status&) {}, [](const caf::error&) {});
  }
  self->replayed_.ready_millis = since(t0);
  self->serving_ = true;
  self->update_health();
  const auto& r = self->replayed_;
  if (r.preloaded)
    ES_INFO("recoverd took {} jobs ({} deleted) live from the standby, "
            "replaying {} events of the ones that were not, in {:.1f} ms "
            "(incarnation {})",
            r.jobs, r.deleted_jobs, r.events, r.millis,
            self->log_->incarnation());
  else
    ES_INFO("recoverd replayed {} jobs ({} from snapshots, {} deleted) and "
            "{} events from {} in {:.1f} ms, discarded {} torn records; {} "
            "of the jobs dormant ({} of them folded for their digest), given "
            "their actor when first asked for (incarnation {})",
            r.jobs, r.from_snapshot, r.deleted_jobs, r.events, opts.data_dir,
            r.millis, r.discarded, r.dormant, r.folded_dormant,
            self->log_->incarnation());
  ES_INFO("recoverd listening on {} ({}) (started in {:.1f} ms)",
          self->address(), opts.tls.enabled() ? "TLS" : "plaintext",
          r.ready_millis);
  if (split)
    ES_INFO("recoverd control listener on {} ({}), O&M RPCs {} on the agent "
            "listener",
            self->control_address(),
            opts.control_tls.enabled() ? "TLS" : "plaintext",
            opts.om_on_agent_listener ? "also" : "not");
  if (split && !opts.control_tls.enabled()
      && !is_loopback_address(opts.control_listen))
    ES_WARN("recoverd control listener {} is not a loopback address and has "
            "no TLS: anyone who reaches it can change jobs (set "
            "--control-tls-cert and --control-tls-key)",
            opts.control_listen);
  if (opts.authz)
    ES_INFO("recoverd access control on: {} identities, {} tokens{}",
            opts.authz->identities.size(), opts.authz->tokens.size(),
            opts.anonymous_agents ? ", anonymous agents allowed on the "
                                    "agent listener"
                                  : "");
  else
    ES_INFO("recoverd access control is off (no --authz): every caller may "
            "call every RPC its listener serves");
  if (!opts.http_listen.empty()) {
    self->http_ = std::make_unique<http_gateway>(
      *self->inspect_api_, *self->metrics_, buffer, opts.http_request_timeout);
    self->http_->set_access(ui_access);
    self->http_->set_readiness(
      [raw = self.get()] { return raw->unready_reason(); });
    auto tls = make_ssl_context(opts.http_tls);
    if (!tls) {
      self->stop();
      return tls.error();
    }
    self->http_->set_tls(std::move(*tls));
    if (auto err = self->http_->start(opts.http_listen)) {
      self->stop();
      return err;
    }
  }
  // This thread spawned actors: it lets go of CAF's logger, so that any
  // thread may stop the app (see spawn_at_edge).
  caf::logger::set_current_actor_system(nullptr);
  return self;
}

app::~app() {
  stop();
}

void app::update_health() {
  std::lock_guard<std::mutex> guard{health_mtx_};
  bool up = serving_ && journal_ok_;
  for (auto* x : {server_.get(), control_server_.get()})
    if (x != nullptr)
      if (auto* health = x->GetHealthCheckService())
        health->SetServingStatus(up);
}

std::string app::unready_reason() const {
  if (!serving_)
    return "starting or stopping";
  if (!journal_ok_)
    return "the event log cannot be written (see recoverctl status)";
  return {};
}

connection_figures app::connections() const {
  connection_figures sum;
  for (const auto* l : {listener_.get(), control_listener_.get()}) {
    if (l == nullptr)
      continue;
    auto f = l->figures();
    sum.open += f.open;
    sum.accepted += f.accepted;
    sum.refused_total += f.refused_total;
    sum.refused_peer += f.refused_peer;
  }
  return sum;
}

std::string app::address() const {
  auto host = opts_.listen.substr(0, opts_.listen.rfind(':'));
  return host + ":" + std::to_string(port_);
}

std::string app::control_address() const {
  if (!control_server_)
    return address();
  auto host = opts_.control_listen.substr(0, opts_.control_listen.rfind(':'));
  return host + ":" + std::to_string(control_port_);
}

int app::http_port() const {
  return http_ ? http_->port() : 0;
}

std::string app::http_address() const {
  if (!http_)
    return {};
  auto host = opts_.http_listen.substr(0, opts_.http_listen.rfind(':'));
  return host + ":" + std::to_string(http_->port());
}

void app::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  if (sys_) {
    caf::scoped_actor self{*sys_};
    // Streams first: the server waits for open streams until its deadline.
    if (registry_)
      self->request(registry_, std::chrono::seconds(10), shutdown_atom::value)
        .receive([](ok_atom) {},
                 [](caf::error& err) {
                   ES_WARN("recoverd could not close all streams: {}",
                           message_of(err));
                 });
    if (hub_)
      self->request(hub_, std::chrono::seconds(10), shutdown_atom::value)
        .receive([](ok_atom) {},
                 [](caf::error& err) {
                   ES_WARN("recoverd could not close all watches: {}",
                           message_of(err));
                 });
    // HTTP before gRPC: nothing of it waits for the gRPC server, but its
    // requests wait for the actors.
    if (http_)
      http_->stop();
    if (listener_)
      listener_->stop();
    if (control_listener_)
      control_listener_->stop();
    auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
    if (control_server_)
      control_server_->Shutdown(deadline);
    if (server_)
      server_->Shutdown(deadline);
    // With no request left, the jobs' digests let the next start-up leave
    // them dormant. Not under etcd: a leader starts from its standby's jobs.
    if (registry_ && !opts_.journal.authority)
      self->request(registry_, std::chrono::seconds(30), digest_atom::value)
        .receive(
          [](uint64_t n) {
            ES_INFO("recoverd stored the digests of {} jobs for the next "
                    "start-up",
                    n);
          },
          [](caf::error& err) {
            ES_WARN("recoverd could not store the jobs' digests (the next "
                    "start-up replays every job): {}",
                    message_of(err));
          });
    // Likewise the inspector's folds: the next start-up's first fold takes
    // them up instead of reading every job's history again.
    if (inspector_ && !opts_.journal.authority)
      self
        ->request(inspector_, std::chrono::seconds(30), digest_atom::value,
                  history_atom::value)
        .receive(
          [](uint64_t n) {
            ES_INFO("recoverd stored the histories of {} jobs for the next "
                    "start-up",
                    n);
          },
          [](caf::error& err) {
            ES_WARN("recoverd could not store the jobs' histories (the next "
                    "start-up folds every job's events): {}",
                    message_of(err));
          });
    if (journal_)
      self->request(journal_, std::chrono::seconds(30), flush_atom::value)
        .receive([](ok_atom) {},
                 [](caf::error& err) {
                   ES_WARN("recoverd could not flush the journal: {}",
                           message_of(err));
                 });
  }
  {
    std::lock_guard<std::mutex> guard{health_mtx_};
    serving_ = false;
    control_server_.reset();
    server_.reset();
  }
  http_.reset();
  listener_.reset();
  control_listener_.reset();
  // Every holder of actor handles goes before the actor system (a live
  // handle to the detached journal would hang its destructor).
  recover_.reset();
  control_recover_.reset();
  platform_.reset();
  // A report still held goes to its job while the job is there.
  if (gate_)
    gate_->close();
  // Every actor is told to exit, and its handle is kept until all are done.
  // An actor whose last reference went with a pending delayed message (a
  // job's keep-alive, the registry's sweep) would be destroyed on CAF's
  // clock thread, and its clean-up would then wait on the clock's own full
  // queue: with CAF 0.17.6 that hung the shutdown of 10,000 subscribed jobs.
  std::vector<caf::strong_actor_ptr> held;
  auto stop_actor = [&](auto& hdl) {
    if (!hdl)
      return;
    caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
    held.push_back(caf::actor_cast<caf::strong_actor_ptr>(hdl));
    hdl = nullptr;
  };
  if (directory_)
    for (auto& job : directory_->take_all())
      stop_actor(job);
  directory_.reset();
  inspect_.reset();
  inspect_api_.reset();
  stop_actor(desk_);
  stop_actor(inspector_);
  stop_actor(historian_);
  stop_actor(hub_);
  stop_actor(registry_);
  stop_actor(nodes_);
  stop_actor(journal_);
  if (sys_) {
    sys_->await_all_actors_done();
    held.clear();
    sys_.reset();
  }
  cfg_.reset();
  if (log_) {
    log_.reset();
    ES_INFO("recoverd stopped; event log closed");
  }
}

} // namespace recoverd
