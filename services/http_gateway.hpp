#pragma once

/// The Inspect API as HTTP/JSON (design §6) plus /metrics, on a port of its
/// own. JSON is the proto3 JSON of protos/inspect.proto, rendered from the
/// same `inspect_api` the gRPC service uses, so both say the same thing.
/// Requests run on the HTTP server's own threads, which wait for the actors;
/// no actor thread ever waits for HTTP.
///
///   GET /api/v1/jobs[?namespace=NS]                 ListJobs
///   GET /api/v1/jobs/{id}                           GetJob
///   GET /api/v1/jobs/{id}/events[?from=SEQ&limit=N] ListEvents
///   GET /api/v1/jobs/{id}/incidents                 ListIncidents
///   GET /api/v1/jobs/{id}/at?seq=SEQ | ?time=T      GetJobAt (T: Unix ms or
///                                                   RFC 3339)
///   GET /api/v1/status[?job=ID][&detailed=1]        GetStatus: every
///                                                   component; detailed:
///                                                   every job too
///   GET /api/v1/watch[?job=ID]                      WatchEvents as
///                                                   server-sent events
///                                                   (at most 12 at once)
///   GET /metrics                                    Prometheus text
///
/// Errors are JSON `{"error": {"code": 404, "status": "NOT_FOUND",
/// "message": "..."}}` with the HTTP status of `to_http_status`. `?pretty=1`
/// indents JSON answers.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>

#include "services/access.hpp"
#include "services/tls.hpp"

namespace recoverd {

class inspect_api;
class request_metrics;

/// The HTTP server.
class http_gateway {
public:
  /// @param stream_buffer Events a watch may have queued before it is ended.
  /// @param request_timeout Time a client has to send a request head (from
  ///        its connect or the previous answer); slower ones are closed.
  http_gateway(const inspect_api& api, request_metrics& metrics,
               size_t stream_buffer,
               std::chrono::milliseconds request_timeout
               = std::chrono::seconds(5));

  ~http_gateway();

  /// Who may read: every route needs a role of the `HTTP` row of the
  /// access table, identified by a verified client certificate (HTTPS) or
  /// `Authorization: Bearer <token>`. Call
  /// before `start`; by default access control is off.
  void set_access(access_settings access);

  /// Where `/readyz` learns readiness: empty when ready, else why not.
  /// Call before `start`; unset: ready whenever the port answers.
  void set_readiness(std::function<std::string()> f);

  /// Serves HTTPS with `ctx` (`make_ssl_context`); a client certificate the
  /// handshake verified identifies the caller as on the gRPC listeners.
  /// Call before `start`; null: plaintext.
  void set_tls(ssl_context_ptr ctx);

  http_gateway(const http_gateway&) = delete;
  http_gateway& operator=(const http_gateway&) = delete;

  /// Binds `listen` ("host:port"; port 0 picks a free one) and serves on a
  /// thread of its own. Fails with a clear message when it cannot bind.
  [[nodiscard]] caf::error start(const std::string& listen);

  /// The bound port; 0 before `start`.
  int port() const;

  /// Ends open watches, stops accepting, waits for running requests.
  /// Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  bool tls_ = false;
};

} // namespace recoverd
