#pragma once

/// The access check at the gRPC edge: the caller's credentials from the
/// server context, handed to `authorize` (services/access.hpp). Every RPC
/// handler calls `admit` first.

#include <optional>
#include <string>
#include <string_view>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "services/access.hpp"
#include "services/status_mapping.hpp"

namespace recoverd {

/// The verified client-certificate names (CN, then DNS SANs) and the bearer
/// token (`authorization: Bearer ...` metadata) of a call.
caller_credentials credentials_of(const grpc::ServerContextBase& ctx);

/// The one gate of every RPC: `authorize`, then `limit`. A refusal by a
/// rate limit also sets the trailing metadata `grpc-retry-pushback-ms`
/// (gRPC's retry hint) on `ctx`.
[[nodiscard]] caf::expected<principal> gate(const access_settings& settings,
                                            grpc::CallbackServerContext* ctx,
                                            std::string_view method,
                                            const std::string& job_id);

/// Runs the access check for a unary call: on a refusal finishes `reactor`
/// with UNAUTHENTICATED or PERMISSION_DENIED and returns nothing.
std::optional<principal> admit(const access_settings& settings,
                               grpc::CallbackServerContext* ctx,
                               grpc::ServerUnaryReactor* reactor,
                               std::string_view method,
                               const std::string& job_id = {});

/// Runs the access check for a stream: on a refusal ends the stream
/// through `sink->finish` and returns nothing.
template <class Sink>
std::optional<principal> admit_stream(const access_settings& settings,
                                      grpc::CallbackServerContext* ctx,
                                      Sink& sink, std::string_view method,
                                      const std::string& job_id = {}) {
  auto who = gate(settings, ctx, method, job_id);
  if (!who) {
    sink->finish(who.error());
    return std::nullopt;
  }
  return std::move(*who);
}

} // namespace recoverd
