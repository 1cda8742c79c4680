#include "services/metrics.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <unistd.h>

namespace recoverd {

namespace {

std::string escape(const std::string& x) {
  std::string out;
  out.reserve(x.size());
  for (auto c : x) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", x);
  return buf;
}

void family(std::string& out, const char* name, const char* type,
            const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

using labels = std::vector<std::pair<const char*, std::string>>;

void sample(std::string& out, const std::string& name, const labels& ls,
            const std::string& value) {
  out += name;
  if (!ls.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [key, val] : ls) {
      if (!first)
        out += ',';
      first = false;
      out += key;
      out += "=\"";
      out += escape(val);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const labels& ls,
            uint64_t value) {
  sample(out, name, ls, std::to_string(value));
}

// One histogram's series from per-bucket (not cumulative) counts.
template <class Bounds>
void histogram_samples(std::string& out, const std::string& name,
                       labels ls, const Bounds& bounds,
                       const std::vector<uint64_t>& buckets, double scale,
                       double sum, uint64_t count) {
  uint64_t cumulative = 0;
  size_t i = 0;
  for (auto bound : bounds) {
    cumulative += i < buckets.size() ? buckets[i] : 0;
    ++i;
    auto with = ls;
    with.emplace_back("le", number(static_cast<double>(bound) * scale));
    sample(out, name + "_bucket", with, cumulative);
  }
  auto with = ls;
  with.emplace_back("le", "+Inf");
  sample(out, name + "_bucket", with, count);
  sample(out, name + "_sum", ls, number(sum));
  sample(out, name + "_count", ls, count);
}

// The first whitespace-separated field of the line of `path` that starts
// with `key`, or 0.
uint64_t proc_field(const char* path, const std::string& key) {
  std::ifstream in{path};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      std::istringstream rest{line.substr(key.size())};
      uint64_t x = 0;
      rest >> x;
      return x;
    }
  return 0;
}

// Resident pages per /proc/self/statm, in bytes.
uint64_t resident_bytes() {
  std::ifstream in{"/proc/self/statm"};
  uint64_t size = 0;
  uint64_t resident = 0;
  if (!(in >> size >> resident))
    return 0;
  auto page = ::sysconf(_SC_PAGESIZE);
  return resident * static_cast<uint64_t>(page > 0 ? page : 4096);
}

// Entries of /proc/self/fd (counting the one that lists them).
uint64_t open_fds() {
  std::error_code ec;
  uint64_t n = 0;
  for (std::filesystem::directory_iterator i{"/proc/self/fd", ec}, end;
       !ec && i != end; i.increment(ec))
    ++n;
  return n;
}

// Unix seconds of the process start: field 22 of /proc/self/stat (clock
// ticks after boot) plus btime of /proc/stat; 0 if either is unreadable.
double start_time_seconds() {
  std::ifstream in{"/proc/self/stat"};
  std::string stat;
  std::getline(in, stat);
  // The command name (field 2) may hold spaces; count from its ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields{stat.substr(close + 1)};
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
    // skip fields 3..21
  }
  uint64_t ticks = 0;
  auto boot = proc_field("/proc/stat", "btime");
  auto hz = ::sysconf(_SC_CLK_TCK);
  if (!(fields >> ticks) || boot == 0 || hz <= 0)
    return 0;
  return static_cast<double>(boot)
         + static_cast<double>(ticks) / static_cast<double>(hz);
}

// The build and process series, read from /proc/self at each scrape.
void render_process(std::string& out) {
  family(out, "recoverd_build_info", "gauge",
         "Always 1; the label names the version of this build.");
  sample(out, "recoverd_build_info", {{"version", RECOVERD_VERSION}}, 1);
  family(out, "process_resident_memory_bytes", "gauge",
         "Resident memory size in bytes.");
  sample(out, "process_resident_memory_bytes", {}, resident_bytes());
  family(out, "process_open_fds", "gauge", "Open file descriptors.");
  sample(out, "process_open_fds", {}, open_fds());
  family(out, "process_threads", "gauge", "Threads of the process.");
  sample(out, "process_threads", {},
         proc_field("/proc/self/status", "Threads:"));
  family(out, "process_start_time_seconds", "gauge",
         "Start time of the process since the Unix epoch in seconds.");
  char start[32];
  std::snprintf(start, sizeof(start), "%.2f", start_time_seconds());
  sample(out, "process_start_time_seconds", {}, start);
}

// A duration histogram's series (its bounds are milliseconds).
void duration_samples(std::string& out, const char* name, labels ls,
                      const duration_histogram& h) {
  histogram_samples(out, name, std::move(ls), duration_bounds_ms(), h.buckets,
                    1e-3, static_cast<double>(h.sum_ms) / 1e3, h.count);
}

// Goodput: flow durations, time lost by cause, fleet MTTR and ETTR. Built
// from the replayed log, so they survive a restart.
void render_goodput(std::string& out, const cluster_stats& c) {
  family(out, "recoverd_flow_duration_seconds", "histogram",
         "Duration of finished flows over the whole log, by kind, last "
         "strategy and outcome.");
  for (const auto& [key, h] : c.goodput.flow_durations)
    duration_samples(out, "recoverd_flow_duration_seconds",
                     {{"kind", std::get<0>(key)},
                      {"strategy", std::get<1>(key)},
                      {"outcome", std::get<2>(key)}},
                     h);
  family(out, "recoverd_incident_time_lost_seconds", "histogram",
         "Training time lost per finished incident (start of the flow until "
         "training resumed or the flow ended), by cause.");
  for (const auto& [cause, h] : c.goodput.lost_by_cause)
    duration_samples(out, "recoverd_incident_time_lost_seconds",
                     {{"cause", cause}}, h);
  family(out, "recoverd_incidents", "gauge",
         "Incidents over the whole log (running ones included), by cause.");
  for (const auto& [cause, n] : c.fleet.by_cause)
    sample(out, "recoverd_incidents", {{"cause", cause}}, n);
  family(out, "recoverd_fleet_mttr_seconds", "gauge",
         "Mean time lost by finished recovery incidents of every job.");
  sample(out, "recoverd_fleet_mttr_seconds", {},
         number(static_cast<double>(c.fleet.mttr_ms) / 1e3));
  family(out, "recoverd_fleet_ettr", "gauge",
         "Effective training time ratio of every job: (observed - lost) / "
         "observed time.");
  sample(out, "recoverd_fleet_ettr", {}, number(c.fleet.ettr));
  family(out, "recoverd_fleet_time_lost_seconds", "gauge",
         "Training time lost to incidents by every job (running ones until "
         "now).");
  sample(out, "recoverd_fleet_time_lost_seconds", {},
         number(static_cast<double>(c.fleet.time_lost_ms) / 1e3));
}

class metrics_interceptor final : public grpc::experimental::Interceptor {
public:
  metrics_interceptor(request_metrics::method_counters& m, bool streaming)
    : counters_(m),
      streaming_(streaming),
      start_(std::chrono::steady_clock::now()) {
    counters_.started(streaming_);
  }

  ~metrics_interceptor() override {
    // A call that ended without sending a status was cancelled.
    if (!recorded_)
      record(grpc::StatusCode::CANCELLED);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using hook = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(hook::PRE_SEND_STATUS))
      record(methods->GetSendStatus().error_code());
    methods->Proceed();
  }

private:
  void record(grpc::StatusCode code) {
    if (recorded_)
      return;
    recorded_ = true;
    auto seconds = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start_)
                     .count();
    counters_.finished(streaming_, code, seconds);
  }

  request_metrics::method_counters& counters_;
  bool streaming_;
  std::chrono::steady_clock::time_point start_;
  bool recorded_ = false;
};

class metrics_interceptor_factory final
  : public grpc::experimental::ServerInterceptorFactoryInterface {
public:
  metrics_interceptor_factory(request_metrics& m,
                              const std::set<std::string>& known)
    : other_(m.counters("other")) {
    // Every method's counters are made now: a call finds them without a
    // lock or a copy of its name.
    for (const auto& method : known)
      known_.emplace(method, &m.counters(method));
  }

  grpc::experimental::Interceptor*
  CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    using type = grpc::experimental::ServerRpcInfo::Type;
    const char* method = info->method();
    bool streaming = info->type() != type::UNARY;
    // The method name is client input for unknown methods.
    auto i = method != nullptr ? known_.find(method) : known_.end();
    return new metrics_interceptor(i != known_.end() ? *i->second : other_,
                                   streaming);
  }

private:
  request_metrics::method_counters& other_;
  std::map<std::string, request_metrics::method_counters*, std::less<>>
    known_;
};

} // namespace

const std::vector<double>& request_metrics::latency_bounds() {
  static const std::vector<double> bounds = {0.0005, 0.001, 0.0025, 0.005,
                                             0.01,   0.025, 0.05,   0.1,
                                             0.25,   0.5,   1,      2.5,
                                             5,      10};
  return bounds;
}

request_metrics::method_counters&
request_metrics::counters(const std::string& method) {
  std::lock_guard<std::mutex> guard{mtx_};
  return methods_[method];
}

void request_metrics::method_counters::started(bool streaming) {
  if (!streaming)
    return;
  open.fetch_add(1, std::memory_order_relaxed);
  streamed.store(true, std::memory_order_relaxed);
}

void request_metrics::method_counters::finished(bool streaming,
                                               grpc::StatusCode code,
                                               double seconds) {
  auto c = static_cast<size_t>(code);
  if (c >= by_code.size())
    c = static_cast<size_t>(grpc::StatusCode::UNKNOWN);
  by_code[c].fetch_add(1, std::memory_order_relaxed);
  if (streaming) {
    open.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  const auto& bounds = latency_bounds();
  size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i])
    ++i;
  buckets[i].fetch_add(1, std::memory_order_relaxed);
  nanos.fetch_add(static_cast<uint64_t>(std::max(seconds, 0.0) * 1e9),
                  std::memory_order_relaxed);
  unary.fetch_add(1, std::memory_order_relaxed);
}

void request_metrics::http_finished(const std::string& route, int status) {
  std::lock_guard<std::mutex> guard{mtx_};
  ++http_[{route, status}];
}

void request_metrics::http_connections_closed(size_t timed_out,
                                              size_t refused) {
  std::lock_guard<std::mutex> guard{mtx_};
  http_timed_out_ = timed_out;
  http_refused_ = refused;
}

void request_metrics::set_connection_source(
  std::function<connection_figures()> f) {
  std::lock_guard<std::mutex> guard{mtx_};
  connections_ = std::move(f);
}

void request_metrics::set_rate_limiter(std::shared_ptr<const rate_limiter> x) {
  std::lock_guard<std::mutex> guard{mtx_};
  limiter_ = std::move(x);
}

void request_metrics::set_report_gate(std::shared_ptr<const report_gate> x) {
  std::lock_guard<std::mutex> guard{mtx_};
  gate_ = std::move(x);
}

void request_metrics::render(std::string& out) const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (gate_) {
    family(out, "recoverd_reports_held_total", "counter",
           "Agent reports held at the edge while a device fault was still "
           "stopping other jobs (stops go first).");
    sample(out, "recoverd_reports_held_total", {}, gate_->held_total());
  }
  if (limiter_) {
    family(out, "recoverd_rate_limited_total", "counter",
           "Calls refused with RESOURCE_EXHAUSTED by a rate limit: a "
           "client's bucket of a class of RPC, or a job's report bucket.");
    for (size_t i = 0; i < rpc_class_count; ++i) {
      auto c = static_cast<rpc_class>(i);
      sample(out, "recoverd_rate_limited_total",
             {{"class", to_string(c)}, {"scope", "client"}},
             limiter_->refused_by_client(c));
    }
    sample(out, "recoverd_rate_limited_total",
           {{"class", "report"}, {"scope", "job"}},
           limiter_->refused_by_job());
  }
  if (connections_) {
    auto c = connections_();
    family(out, "recoverd_grpc_connections_open", "gauge",
           "gRPC connections open now.");
    sample(out, "recoverd_grpc_connections_open", {}, c.open);
    family(out, "recoverd_grpc_connections_refused_total", "counter",
           "gRPC connections closed at accept: the total cap "
           "(--max-connections) or the cap per peer address "
           "(--max-connections-per-peer) was reached.");
    sample(out, "recoverd_grpc_connections_refused_total",
           {{"reason", "total"}}, c.refused_total);
    sample(out, "recoverd_grpc_connections_refused_total",
           {{"reason", "peer"}}, c.refused_peer);
  }
  family(out, "recoverd_grpc_requests_total", "counter",
         "gRPC calls finished, by method and status code.");
  for (const auto& [method, m] : methods_) {
    // By the code's name, as a reader looks them up.
    std::map<std::string, uint64_t> by_name;
    for (size_t c = 0; c < m.by_code.size(); ++c)
      if (auto n = m.by_code[c].load(std::memory_order_relaxed); n > 0)
        by_name[status_code_name(static_cast<grpc::StatusCode>(c))] = n;
    for (const auto& [code, n] : by_name)
      sample(out, "recoverd_grpc_requests_total",
             {{"method", method}, {"code", code}}, n);
  }
  family(out, "recoverd_grpc_request_duration_seconds", "histogram",
         "Latency of unary gRPC calls, by method.");
  for (const auto& [method, m] : methods_) {
    auto count = m.unary.load(std::memory_order_relaxed);
    if (count == 0)
      continue;
    std::vector<uint64_t> buckets;
    for (const auto& b : m.buckets)
      buckets.push_back(b.load(std::memory_order_relaxed));
    auto sum = static_cast<double>(m.nanos.load(std::memory_order_relaxed))
               / 1e9;
    histogram_samples(out, "recoverd_grpc_request_duration_seconds",
                      {{"method", method}}, latency_bounds(), buckets, 1.0,
                      sum, count);
  }
  family(out, "recoverd_grpc_open_streams", "gauge",
         "Server streams open now, by method.");
  for (const auto& [method, m] : methods_)
    if (m.streamed.load(std::memory_order_relaxed))
      sample(out, "recoverd_grpc_open_streams", {{"method", method}},
             std::to_string(m.open.load(std::memory_order_relaxed)));
  family(out, "recoverd_http_requests_total", "counter",
         "HTTP requests answered, by route and status.");
  for (const auto& [key, n] : http_)
    sample(out, "recoverd_http_requests_total",
           {{"route", key.first}, {"code", std::to_string(key.second)}}, n);
  family(out, "recoverd_http_connections_closed_total", "counter",
         "HTTP connections the server closed: request head not complete "
         "within --http-request-timeout, or over the connection cap.");
  sample(out, "recoverd_http_connections_closed_total",
         {{"reason", "timeout"}}, http_timed_out_);
  sample(out, "recoverd_http_connections_closed_total", {{"reason", "limit"}},
         http_refused_);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
make_metrics_interceptor(request_metrics& m, std::set<std::string> known) {
  return std::make_unique<metrics_interceptor_factory>(m, known);
}

std::set<std::string> grpc_methods(const std::vector<std::string>& services) {
  std::set<std::string> result;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const auto& name : services) {
    const auto* service = pool->FindServiceByName(name);
    if (service == nullptr)
      continue;
    for (int i = 0; i < service->method_count(); ++i)
      result.insert("/" + name + "/" + service->method(i)->name());
  }
  return result;
}

const char* status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

std::string render_metrics(const request_metrics& requests,
                           const cluster_stats& c) {
  std::string out;
  requests.render(out);
  family(out, "recoverd_jobs", "gauge", "Jobs that exist, per the log.");
  sample(out, "recoverd_jobs", {}, c.jobs);
  family(out, "recoverd_jobs_registered", "gauge",
         "Jobs registered for recovery, per the log.");
  sample(out, "recoverd_jobs_registered", {}, c.registered);
  family(out, "recoverd_active_flows", "gauge",
         "Flows of the recovery machine running now, by kind and state.");
  for (const auto& [key, n] : c.active_flows)
    sample(out, "recoverd_active_flows",
           {{"kind", key.first}, {"state", key.second}}, n);
  family(out, "recoverd_flows_finished_total", "counter",
         "Flows finished over the whole log, by kind, last strategy and "
         "outcome.");
  // Outcomes may carry an operator message's details: the labels are
  // mapped into closed vocabularies, and the counts of one series summed.
  std::map<flow_key, uint64_t> finished;
  for (const auto& [key, n] : c.finished)
    finished[{kind_label(std::get<0>(key)), strategy_label(std::get<1>(key)),
              outcome_label(std::get<2>(key))}]
      += n;
  for (const auto& [key, n] : finished)
    sample(out, "recoverd_flows_finished_total",
           {{"kind", std::get<0>(key)},
            {"strategy", std::get<1>(key)},
            {"outcome", std::get<2>(key)}},
           n);
  render_goodput(out, c);
  family(out, "recoverd_log_events_total", "counter",
         "Events in the log (its last global position).");
  sample(out, "recoverd_log_events_total", {}, c.events);
  family(out, "recoverd_journal_batches_total", "counter",
         "Journal writes (one WriteBatch each) since start.");
  sample(out, "recoverd_journal_batches_total", {}, c.journal_batches);
  family(out, "recoverd_journal_records_total", "counter",
         "Events written by the journal since start.");
  sample(out, "recoverd_journal_records_total", {}, c.journal_records);
  family(out, "recoverd_journal_batch_size", "histogram",
         "Events per journal write (group commit).");
  histogram_samples(out, "recoverd_journal_batch_size", {},
                    journal_histograms::batch_bounds, c.journal_hist.batches,
                    1.0, static_cast<double>(c.journal_records),
                    c.journal_batches);
  family(out, "recoverd_journal_write_seconds", "histogram",
         "Duration of journal writes including the sync.");
  histogram_samples(out, "recoverd_journal_write_seconds", {},
                    journal_histograms::write_bounds, c.journal_hist.writes,
                    1e-6, static_cast<double>(c.journal_write_micros) / 1e6,
                    c.journal_batches);
  family(out, "recoverd_retention_purged_events_total", "counter",
         "Events the retention removed since start, of deleted jobs (their "
         "whole history) and of live jobs (before their latest snapshot).");
  sample(out, "recoverd_retention_purged_events_total", {{"job", "deleted"}},
         c.purged_events);
  sample(out, "recoverd_retention_purged_events_total", {{"job", "live"}},
         c.purged_live_events);
  family(out, "recoverd_retention_kept_incidents_total", "counter",
         "Incidents stored since start in place of removed live-job events.");
  sample(out, "recoverd_retention_kept_incidents_total", {},
         c.kept_incidents);
  family(out, "recoverd_journal_failed", "gauge",
         "1 once a journal write failed (appends are refused).");
  sample(out, "recoverd_journal_failed", {}, c.journal_failed ? 1 : 0);
  family(out, "recoverd_event_watchers", "gauge",
         "Event watchers (WatchEvents, /api/v1/watch) open now.");
  sample(out, "recoverd_event_watchers", {}, c.hub.watchers);
  family(out, "recoverd_event_watchers_dropped_total", "counter",
         "Event watchers dropped for falling behind.");
  sample(out, "recoverd_event_watchers_dropped_total", {}, c.hub.dropped);
  family(out, "recoverd_nodes_tracked", "gauge",
         "Nodes the fleet's node registry has a record of.");
  sample(out, "recoverd_nodes_tracked", {}, c.nodes_tracked);
  family(out, "recoverd_nodes_quarantined", "gauge",
         "Nodes the fleet's node registry quarantines now.");
  sample(out, "recoverd_nodes_quarantined", {}, c.nodes_quarantined);
  render_process(out);
  return out;
}

} // namespace recoverd
