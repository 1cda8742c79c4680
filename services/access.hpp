#pragma once

/// Access control (design §8): who the caller is, which roles an RPC
/// needs, and the one check that compares them. Pure apart from reading
/// the authz file; `services/` calls `check_access` at the start of every
/// RPC and HTTP request.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "services/rate_limit.hpp"

namespace recoverd {

/// What a caller may do.
enum class role : uint8_t {
  /// A training agent: Recover reports and subscriptions, optionally only
  /// for some jobs.
  agent = 1,
  /// An operator: link switches, stress tests, node health, annotations.
  operator_ = 2,
  /// The scheduling platform: jobs, annotations, device faults.
  platform = 4,
  /// A dashboard or person reading: Inspect, GetJob, /metrics.
  viewer = 8,
};

/// A set of roles (bits of `role`).
using role_set = uint8_t;

/// Name of a role as the authz file spells it ("operator", ...).
const char* to_string(role x);

/// The role of a name as the authz file spells it; false when unknown.
bool parse_role(std::string_view name, role& out);

/// Names of the roles in `xs`, e.g. "viewer, operator".
std::string to_string_roles(role_set xs);

/// Which listener a call arrived on.
enum class listener_kind : uint8_t {
  /// The only listener (no control listener configured): serves every RPC.
  combined,
  /// The agent listener: Recover, health, and the O&M RPCs unless off.
  agent,
  /// The control listener: Platform, Inspect, reflection, the O&M RPCs.
  control,
};

/// Where an RPC is served and who may call it.
struct rpc_rule {
  /// Roles that may call it.
  role_set roles = 0;
  /// An operator-driven (O&M) RPC of the Recover service.
  bool om = false;
  /// An agent RPC of the Recover service (served on the agent listener).
  bool agent_rpc = false;
  /// The class whose per-client bucket the RPC takes a token from.
  rpc_class cls = rpc_class::read;
};

/// The access table: the rule of an RPC by its full gRPC name (e.g.
/// "/recoverd.platform.v1.Platform/PutJob"), or of `http_method` for every
/// route of the HTTP port; null for a method it does not know (refused).
const rpc_rule* rule_of(std::string_view method);

/// Every method `rule_of` knows, in table order (for tests and the README).
std::vector<std::string> access_table_methods();

/// The name the HTTP port's routes go by in the access table.
constexpr std::string_view http_method = "HTTP";

/// An identity the authz file names, with its role.
struct principal {
  /// Certificate CN or DNS SAN, or the token's name.
  std::string name;
  /// What it may do.
  role r = role::viewer;
  /// Agent only: the jobs it may report for; empty means every job.
  std::vector<std::string> jobs;
  /// Platform only: most jobs it may own (create and not delete); 0: only
  /// the daemon's job cap.
  uint64_t max_jobs = 0;
};

/// Who the caller is for the audit: its identity's name; for a caller
/// without one, its address when `peer_fallback`, else empty.
std::string audit_name(const principal& who, const std::string& peer,
                       bool peer_fallback);

/// The authz file: identities by name and tokens by hex SHA-256.
struct authz_policy {
  /// Certificate names (CN or DNS SAN) -> principal.
  std::map<std::string, principal> identities;
  /// Lowercase hex SHA-256 of a token -> principal.
  std::map<std::string, principal> tokens;
};

/// Parses an authz file's text (TOML, see the README); `source` names it in
/// errors. Refuses unknown keys and roles, missing names, duplicate names
/// and `sha256` values that are not 64 hex digits.
[[nodiscard]] caf::expected<authz_policy> parse_authz(std::string_view text,
                                                      std::string_view source);

/// Reads and parses an authz file.
[[nodiscard]] caf::expected<authz_policy>
load_authz_file(const std::string& path);

/// Lowercase hex SHA-256 of `x`.
std::string sha256_hex(std::string_view x);

/// How a listener applies access control.
struct access_settings {
  /// The policy; null: access control is off (every caller may call
  /// everything the listener serves).
  std::shared_ptr<const authz_policy> policy;
  /// The listener this applies to.
  listener_kind listener = listener_kind::combined;
  /// Whether the agent listener serves the O&M RPCs.
  bool om_on_agent_listener = true;
  /// Agent listener only: callers without an identity act as an agent of
  /// every job (the unmodified TaskD client has neither certificate nor
  /// token).
  bool anonymous_agents = false;
  /// The per-client and per-job buckets (shared by every listener); null:
  /// no rate limits.
  std::shared_ptr<rate_limiter> limiter = nullptr;
};

/// What the transport knows about a caller.
struct caller_credentials {
  /// Names of a verified client certificate: its CN, then its DNS SANs.
  std::vector<std::string> cert_names;
  /// The bearer token the caller sent; empty when none.
  std::string bearer_token;
};

/// The one access check: may the caller call `method` (for `job_id`, when
/// the request names a job) on this listener? Returns who the caller is
/// (name empty when access control is off and the caller sent no
/// certificate), or `unauthenticated` (no known identity) or
/// `permission_denied` (not served on this listener, wrong role, or an
/// agent of other jobs), each with a message naming method and caller.
[[nodiscard]] caf::expected<principal>
authorize(const access_settings& settings, std::string_view method,
          const caller_credentials& caller, const std::string& job_id = {});

/// The rate-limit check after `authorize`: takes a token of the RPC's class
/// from the bucket of the caller (`who`'s name, else `peer_address`) and,
/// for reports, of the job. Fails with `overloaded` naming the bucket and
/// the retry hint, which `retry_after_ms` receives.
[[nodiscard]] caf::error limit(const access_settings& settings,
                               std::string_view method, const principal& who,
                               std::string_view peer_address,
                               const std::string& job_id,
                               int64_t& retry_after_ms);

/// The token of an `Authorization` header value "Bearer <token>" (scheme
/// case-insensitive); empty for anything else.
std::string bearer_token_of(std::string_view header);

} // namespace recoverd
