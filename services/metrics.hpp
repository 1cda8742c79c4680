#pragma once

/// The /metrics page (Prometheus text format 0.0.4): request counters and
/// latencies recorded at the edge, plus the cluster figures the inspector
/// computes from the log and the actors.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include "actors/inspection.hpp"
#include "services/listener.hpp"
#include "services/rate_limit.hpp"
#include "services/report_gate.hpp"

namespace recoverd {

/// Counters of gRPC calls and HTTP requests. Safe to use from any thread.
class request_metrics {
public:
  /// Upper bounds of the latency buckets, in seconds.
  static const std::vector<double>& latency_bounds();

  /// Latency buckets: one per bound, and +Inf.
  static constexpr size_t latency_buckets = 15;

  /// One method's call counters. The calls update them without a lock;
  /// the lock only guards the set of methods.
  struct method_counters {
    /// Finished calls by status code (gRPC's 0..16; others count as
    /// UNKNOWN).
    std::array<std::atomic<uint64_t>, 17> by_code{};
    /// Unary latencies, not cumulative.
    std::array<std::atomic<uint64_t>, latency_buckets> buckets{};
    std::atomic<uint64_t> nanos{0}; ///< Sum of the unary latencies.
    std::atomic<uint64_t> unary{0}; ///< Unary calls finished.
    std::atomic<int64_t> open{0};   ///< Streams open now.
    std::atomic<bool> streamed{false}; ///< A stream was ever opened.

    /// A call began; `streaming` for server-streaming calls.
    void started(bool streaming);

    /// A call ended with `code` after `seconds` (latency is recorded for
    /// unary calls only).
    void finished(bool streaming, grpc::StatusCode code, double seconds);
  };

  /// The counters of `method`, made on first use; they live as long as
  /// this object, so a call may keep them.
  method_counters& counters(const std::string& method);

  /// An HTTP request for `route` was answered with `status`.
  void http_finished(const std::string& route, int status);

  /// The HTTP server's own counts since start: connections closed because
  /// their request head was late, and refused over the connection cap.
  void http_connections_closed(size_t timed_out, size_t refused);

  /// Where the gRPC listener's connection counts come from; called while
  /// rendering.
  void set_connection_source(std::function<connection_figures()> f);

  /// The limiter whose refusals /metrics counts.
  void set_rate_limiter(std::shared_ptr<const rate_limiter> x);

  /// The gate whose held reports /metrics counts.
  void set_report_gate(std::shared_ptr<const report_gate> x);

  /// Appends this object's series to `out`.
  void render(std::string& out) const;

private:
  mutable std::mutex mtx_;
  // Under the lock: nodes, so the counters stay where they are.
  std::map<std::string, method_counters> methods_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  size_t http_timed_out_ = 0;
  size_t http_refused_ = 0;
  std::function<connection_figures()> connections_;
  std::shared_ptr<const rate_limiter> limiter_;
  std::shared_ptr<const report_gate> gate_;
};

/// A server interceptor factory that records every call into `m`, which
/// must outlive the server. Calls of a method not in `known` (full names,
/// "/package.Service/Method") count as method "other", so that clients
/// cannot add series.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
make_metrics_interceptor(request_metrics& m, std::set<std::string> known);

/// The full names ("/package.Service/Method") of the methods of the
/// services named `services` ("package.Service") that the generated
/// descriptor pool knows; names it does not know add nothing.
std::set<std::string> grpc_methods(const std::vector<std::string>& services);

/// Name of a gRPC status code, e.g. "NOT_FOUND".
const char* status_code_name(grpc::StatusCode code);

/// The whole /metrics page, with the build and process series
/// (recoverd_build_info, process_*) read from /proc/self at each call.
std::string render_metrics(const request_metrics& requests,
                           const cluster_stats& cluster);

} // namespace recoverd
