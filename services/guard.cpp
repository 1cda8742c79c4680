#include "services/guard.hpp"

#include <grpcpp/security/auth_context.h>

namespace recoverd {

caller_credentials credentials_of(const grpc::ServerContextBase& ctx) {
  caller_credentials out;
  auto auth = ctx.auth_context();
  // Names count only when the handshake verified the certificate against
  // the client CA.
  if (auth && auth->IsPeerAuthenticated()) {
    for (const auto& x : auth->FindPropertyValues("x509_common_name"))
      out.cert_names.emplace_back(x.data(), x.size());
    for (const auto& x :
         auth->FindPropertyValues("x509_subject_alternative_name"))
      out.cert_names.emplace_back(x.data(), x.size());
  }
  const auto& md = ctx.client_metadata();
  if (auto i = md.find("authorization"); i != md.end())
    out.bearer_token = bearer_token_of({i->second.data(), i->second.size()});
  return out;
}

caf::expected<principal> gate(const access_settings& settings,
                              grpc::CallbackServerContext* ctx,
                              std::string_view method,
                              const std::string& job_id) {
  auto who = authorize(settings, method, credentials_of(*ctx), job_id);
  if (!who || !settings.limiter)
    return who;
  int64_t retry_ms = 0;
  // The address names only a caller without an identity.
  auto peer = who->name.empty() ? ctx->peer() : std::string{};
  if (auto err = limit(settings, method, *who, peer, job_id, retry_ms)) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms",
                             std::to_string(retry_ms));
    return err;
  }
  return who;
}

std::optional<principal> admit(const access_settings& settings,
                               grpc::CallbackServerContext* ctx,
                               grpc::ServerUnaryReactor* reactor,
                               std::string_view method,
                               const std::string& job_id) {
  auto who = gate(settings, ctx, method, job_id);
  if (!who) {
    reactor->Finish(to_grpc_status(who.error()));
    return std::nullopt;
  }
  return std::move(*who);
}

} // namespace recoverd
