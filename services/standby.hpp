#pragma once

/// What a standby replica of `--store etcd` serves (issue #14): on every
/// gRPC listener, UNAVAILABLE to every call (HealthCheck and the gRPC health
/// service included: never PERMISSION_DENIED, which makes TaskD give up for
/// good); on the HTTP port, `/healthz` 200 and everything else 503, so a
/// readiness probe keeps a Service's traffic on the leader.

#include <functional>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "services/app.hpp"

namespace recoverd {

/// The standby's servers; they stop on destruction, freeing the ports for
/// the app of the same replica once it leads.
class standby_server {
public:
  /// Binds the listeners the app of `opts` would (the agent listener, the
  /// control listener and the HTTP port when configured, with their TLS
  /// files; port 0 picks a free one). `leader` says who leads, for the
  /// answers' messages; it may be unset.
  [[nodiscard]] static caf::expected<std::unique_ptr<standby_server>>
  start(const app_options& opts, std::function<std::string()> leader);

  ~standby_server();

  standby_server(const standby_server&) = delete;
  standby_server& operator=(const standby_server&) = delete;

  /// The listeners' bound addresses ("host:port"); empty when not served.
  std::string address() const;
  std::string control_address() const;
  std::string http_address() const;

  /// Stops every listener and waits for them.
  void stop();

  /// Calls answered UNAVAILABLE so far.
  size_t refused() const;

  struct impl;

private:
  standby_server() = default;
  std::unique_ptr<impl> impl_;
};

} // namespace recoverd
