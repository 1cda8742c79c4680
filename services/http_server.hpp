#pragma once

/// The HTTP server under the gateway: cpp-httplib's parser and router, with
/// its connection handling replaced so that slow and idle clients cost no
/// thread.
///
/// cpp-httplib serves each connection on a pool thread from accept to
/// close, and its read timeout applies to each read, not to a request: a
/// client that sends one header byte now and then keeps a thread forever,
/// and a handful of them leave nothing for /metrics (slowloris). Here one
/// thread waits for request heads on every connection at once; a connection
/// goes to a pool thread only with a complete head, and goes back to the
/// waiter after its answer. A connection whose head is not complete within
/// the request timeout (from the accept, or from the previous answer) is
/// closed, and so are connections beyond a cap.

#include <chrono>
#include <cstddef>
#include <memory>

#include <string>
#include <vector>

#include <httplib.h>

#include "services/tls.hpp"

namespace recoverd {

/// Limits of a `guarded_http_server`.
struct http_server_limits {
  /// Time a client has to send a complete request head, from its connect or
  /// from the end of the previous answer; also bounds the reading of a
  /// request's body.
  std::chrono::milliseconds request_timeout{5000};
  /// Threads that run requests (each open watch holds one).
  size_t threads = 16;
  /// Open connections at most; more are closed at once.
  size_t max_connections = 512;
  /// Requests on one connection before it is closed.
  size_t max_requests_per_connection = 100;
};

/// A cpp-httplib server whose connections wait for their request heads
/// without holding a thread (see the file comment). Routes and handlers
/// are set as on `httplib::Server`.
class guarded_http_server final : public httplib::Server {
public:
  /// Starts the waiter and the request threads.
  explicit guarded_http_server(http_server_limits limits);

  /// Stops the threads and closes every connection.
  ~guarded_http_server() override;

  /// Widens the accept queue of the bound socket to `n` (cpp-httplib
  /// listens with a backlog of 5, so a burst of connects waits in the
  /// kernel for SYN retransmits of seconds). Call after binding.
  void set_backlog(int n);

  /// Serves TLS with `ctx` (null: plaintext). Call before listening.
  void set_tls(ssl_context_ptr ctx);

  /// The verified client-certificate names (CN, then DNS SANs) of the
  /// connection whose request runs on the calling thread; empty outside a
  /// request, on plaintext, or without a certificate.
  static const std::vector<std::string>& current_cert_names();

  /// Connections closed because their request head was late, since start.
  size_t timed_out() const;

  /// Connections refused because of `max_connections`, since start.
  size_t refused() const;

  /// The waiter, the request threads and their connections (in the .cpp;
  /// public so that the task queue there can reach it).
  struct state;

private:
  // Called by cpp-httplib's accept loop for each accepted socket (inline,
  // see the task queue in the .cpp): hands the socket to the waiter.
  bool process_and_close_socket(socket_t sock) override;

  // Parses and answers one request from `strm` (cpp-httplib's own request
  // processing); `last` asks for "Connection: close".
  bool serve_request(httplib::Stream& strm, bool last, bool& closed);

  std::shared_ptr<state> state_;
  ssl_context_ptr tls_;
};

} // namespace recoverd
