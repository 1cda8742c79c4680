#pragma once

/// A gRPC listening socket that recoverd accepts on itself, so that it can
/// cap connections in total and per peer before gRPC sees them (gRPC 1.51
/// has no such limit). Accepted connections are handed to the server with
/// the listener's credentials, so TLS works as with `AddListeningPort`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/expected.hpp>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

namespace recoverd {

/// Connection caps of one listener; 0 means no cap.
struct connection_limits {
  /// Connections open at once, from every peer together.
  size_t total = 1024;
  /// Connections open at once from one peer address.
  size_t per_peer = 512;
};

/// Counts of one listener since start.
struct connection_figures {
  size_t open = 0;             ///< Connections open now.
  uint64_t accepted = 0;       ///< Connections handed to gRPC.
  uint64_t refused_total = 0;  ///< Closed at once: the total cap was reached.
  uint64_t refused_peer = 0;   ///< Closed at once: the peer's cap was reached.
};

/// A listen address split: the host (brackets of an IPv6 literal removed;
/// empty: every interface) and the port.
struct listen_address {
  std::string host;
  uint16_t port = 0;
};

/// Splits "host:port" (port 0 to 65535); fails with `errc::invalid_argument`
/// ("cannot listen on ADDRESS: ...") otherwise.
[[nodiscard]] caf::expected<listen_address>
parse_listen_address(const std::string& address);

/// A listening TCP socket whose connections go to one gRPC server.
class grpc_listener {
public:
  /// Binds `address` ("host:port", "[v6]:port"; port 0 picks a free port)
  /// and listens. Fails with a clear message when the address is invalid or
  /// in use.
  [[nodiscard]] static caf::expected<std::unique_ptr<grpc_listener>>
  open(const std::string& address, connection_limits limits);

  ~grpc_listener();

  grpc_listener(const grpc_listener&) = delete;
  grpc_listener& operator=(const grpc_listener&) = delete;

  /// Registers the listener with `builder`; connections get `creds`. Call
  /// before `BuildAndStart`.
  void attach(grpc::ServerBuilder& builder,
              std::shared_ptr<grpc::ServerCredentials> creds);

  /// Starts accepting; call once the server is started (gRPC closes what it
  /// gets before that).
  void start();

  /// Stops accepting and closes the listening socket. Idempotent.
  void stop();

  /// The bound port.
  int port() const {
    return port_;
  }

  /// The counts so far.
  connection_figures figures() const;

private:
  struct peer_fd {
    uint64_t dev = 0;
    uint64_t ino = 0;
    std::string peer;
  };

  grpc_listener() = default;

  void run();
  void accept_one();
  // Forgets connections gRPC has closed: their descriptor is gone or now
  // names another file.
  void prune();

  connection_limits limits_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
  mutable std::mutex mtx_;
  std::map<int, peer_fd> open_;
  std::map<std::string, size_t> per_peer_;
  connection_figures figures_;
  std::chrono::steady_clock::time_point last_warning_{};
};

} // namespace recoverd
