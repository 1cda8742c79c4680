#include "services/access.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>
#include <toml++/toml.h>

#include "actors/error.hpp"

namespace recoverd {

namespace {

constexpr role_set bit(role x) {
  return static_cast<role_set>(x);
}

constexpr role_set agents = bit(role::agent);
constexpr role_set operators = bit(role::operator_);
constexpr role_set platforms = bit(role::platform);
// Reading is for everyone who is not an agent.
constexpr role_set readers = bit(role::viewer) | operators | platforms;
constexpr role_set everyone = readers | agents;

struct table_row {
  std::string_view method;
  rpc_rule rule;
};

// THE access table: one row per RPC. An RPC missing here is refused.
constexpr table_row table[] = {
  // Recover, agent side: reports and subscriptions of one job.
  {"/Recover/Init", {agents, false, true, rpc_class::agent}},
  {"/Recover/Register", {agents, false, true, rpc_class::agent}},
  {"/Recover/SubscribeProcessManageSignal",
   {agents, false, true, rpc_class::agent}},
  {"/Recover/ReportStopComplete", {agents, false, true, rpc_class::report}},
  {"/Recover/ReportRecoverStrategy", {agents, false, true, rpc_class::report}},
  {"/Recover/ReportRecoverStatus", {agents, false, true, rpc_class::report}},
  {"/Recover/ReportProcessFault", {agents, false, true, rpc_class::report}},
  {"/Recover/SubscribeNotifySwitch", {agents, false, true, rpc_class::agent}},
  {"/Recover/ReplySwitchNicResult", {agents, false, true, rpc_class::report}},
  {"/Recover/SubscribeNotifyExecStressTest",
   {agents, false, true, rpc_class::agent}},
  {"/Recover/ReplyStressTestResult", {agents, false, true, rpc_class::report}},
  // Stateless, answers nothing about any job.
  {"/Recover/HealthCheck", {everyone, false, true, rpc_class::health}},
  // Recover, operator side (O&M).
  {"/Recover/SwitchNicTrack", {operators, true, false, rpc_class::om}},
  {"/Recover/SubscribeSwitchNicSignal",
   {operators, true, false, rpc_class::om}},
  {"/Recover/StressTest", {operators, true, false, rpc_class::om}},
  {"/Recover/SubscribeStressTestResponse",
   {operators, true, false, rpc_class::om}},
  // Platform.
  {"/recoverd.platform.v1.Platform/PutJob",
   {platforms, false, false, rpc_class::write}},
  {"/recoverd.platform.v1.Platform/DeleteJob",
   {platforms, false, false, rpc_class::write}},
  {"/recoverd.platform.v1.Platform/ReportDeviceFaults",
   {platforms, false, false, rpc_class::write}},
  {"/recoverd.platform.v1.Platform/SetAnnotations",
   {platforms | operators, false, false, rpc_class::write}},
  {"/recoverd.platform.v1.Platform/ClearNodeHealth",
   {operators, false, false, rpc_class::om}},
  {"/recoverd.platform.v1.Platform/GetJob",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.platform.v1.Platform/ListJobs",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.platform.v1.Platform/GetAnnotations",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.platform.v1.Platform/WatchAnnotations",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.platform.v1.Platform/ListNodeHealth",
   {readers, false, false, rpc_class::read}},
  // Inspect: read-only.
  {"/recoverd.inspection.v1.Inspect/ListJobs",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/GetJob",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/ListEvents",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/WatchEvents",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/ListIncidents",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/GetJobAt",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/GetStatus",
   {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/GetStats",
     {readers, false, false, rpc_class::read}},
  {"/recoverd.inspection.v1.Inspect/ListNodes",
   {readers, false, false, rpc_class::read}},
  // The HTTP port: the Inspect API as JSON and /metrics, read-only.
  {http_method, {readers, false, false, rpc_class::read}},
  // Health and reflection answer nothing about jobs: open to everyone who
  // can reach the listener (load balancers, grpcurl).
  {"/grpc.health.v1.Health/Check", {everyone, false, false, rpc_class::health}},
  {"/grpc.health.v1.Health/Watch", {everyone, false, false, rpc_class::health}},
  {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
   {everyone, false, false, rpc_class::health}},
  {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
   {everyone, false, false, rpc_class::health}},
};

std::string describe(const principal& x) {
  return "'" + x.name + "' (role " + to_string(x.r) + ")";
}

caf::error denied(std::string msg) {
  return make_error(errc::permission_denied, std::move(msg));
}

} // namespace

const char* to_string(role x) {
  switch (x) {
    case role::agent: return "agent";
    case role::operator_: return "operator";
    case role::platform: return "platform";
    case role::viewer: return "viewer";
  }
  return "unknown";
}

bool parse_role(std::string_view name, role& out) {
  for (auto x : {role::agent, role::operator_, role::platform, role::viewer})
    if (name == to_string(x)) {
      out = x;
      return true;
    }
  return false;
}

std::string to_string_roles(role_set xs) {
  std::string out;
  for (auto x : {role::agent, role::operator_, role::platform, role::viewer})
    if (xs & bit(x)) {
      if (!out.empty())
        out += ", ";
      out += to_string(x);
    }
  return out;
}

const rpc_rule* rule_of(std::string_view method) {
  if (method.empty())
    return nullptr;
  for (const auto& row : table)
    if (row.method == method)
      return &row.rule;
  return nullptr;
}

std::vector<std::string> access_table_methods() {
  std::vector<std::string> out;
  for (const auto& row : table)
    if (!row.method.empty())
      out.emplace_back(row.method);
  return out;
}

std::string sha256_hex(std::string_view x) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(x.data(), x.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

std::string bearer_token_of(std::string_view header) {
  constexpr std::string_view scheme = "bearer ";
  if (header.size() <= scheme.size())
    return {};
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i])
      return {};
  auto token = header.substr(scheme.size());
  while (!token.empty() && token.front() == ' ')
    token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ')
    token.remove_suffix(1);
  return std::string{token};
}

namespace {

// Reads one [[identity]] or [[token]] entry.
caf::expected<principal> read_entry(const toml::table& entry,
                                    const std::string& where, bool is_token,
                                    std::string& sha256) {
  for (const auto& [key, value] : entry) {
    auto k = key.str();
    bool known = k == "name" || k == "role" || (!is_token && k == "jobs")
      || k == "max_jobs" || (is_token && k == "sha256");
    if (!known)
      return make_error(errc::invalid_argument,
                        where + ": unknown key '" + std::string{k} + "'");
  }
  principal x;
  auto name = entry["name"].value<std::string>();
  if (!name || name->empty())
    return make_error(errc::invalid_argument,
                      where + ": name: required, a non-empty string");
  x.name = *name;
  auto role_name = entry["role"].value<std::string>();
  if (!role_name || !parse_role(*role_name, x.r))
    return make_error(errc::invalid_argument,
                      where + " (" + x.name
                        + "): role: required, one of agent, operator, "
                          "platform, viewer");
  if (auto jobs = entry["jobs"]; jobs) {
    if (x.r != role::agent)
      return make_error(errc::invalid_argument,
                        where + " (" + x.name
                          + "): jobs: only an agent is limited to jobs");
    auto* list = jobs.as_array();
    if (list == nullptr)
      return make_error(errc::invalid_argument,
                        where + " (" + x.name + "): jobs: a list of job ids");
    for (const auto& j : *list) {
      auto id = j.value<std::string>();
      if (!id || id->empty())
        return make_error(errc::invalid_argument,
                          where + " (" + x.name
                            + "): jobs: every entry a non-empty job id");
      x.jobs.push_back(*id);
    }
    if (x.jobs.empty())
      return make_error(errc::invalid_argument,
                        where + " (" + x.name
                          + "): jobs: empty; omit it for every job");
  }
  if (auto cap = entry["max_jobs"]; cap) {
    auto n = cap.value<int64_t>();
    if (x.r != role::platform)
      return make_error(errc::invalid_argument,
                        where + " (" + x.name
                          + "): max_jobs: only a platform creates jobs");
    if (!n || *n <= 0)
      return make_error(errc::invalid_argument,
                        where + " (" + x.name
                          + "): max_jobs: a positive number of jobs");
    x.max_jobs = static_cast<uint64_t>(*n);
  }
  if (is_token) {
    auto digest = entry["sha256"].value<std::string>();
    bool hex = digest && digest->size() == 64
      && std::all_of(digest->begin(), digest->end(), [](char c) {
                 return std::isxdigit(static_cast<unsigned char>(c)) != 0;
               });
    if (!hex)
      return make_error(errc::invalid_argument,
                        where + " (" + x.name
                          + "): sha256: required, the token's SHA-256 as 64 "
                            "hex digits");
    sha256 = *digest;
    std::transform(sha256.begin(), sha256.end(), sha256.begin(), [](char c) {
      return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    });
  }
  return x;
}

} // namespace

caf::expected<authz_policy> parse_authz(std::string_view text,
                                        std::string_view source) {
  auto src = std::string{source};
  toml::table doc;
  try {
    doc = toml::parse(text, src);
  } catch (const toml::parse_error& err) {
    std::ostringstream msg;
    msg << src << ":" << err.source().begin.line << ": " << err.description();
    return make_error(errc::invalid_argument, msg.str());
  }
  authz_policy out;
  for (const auto& [key, value] : doc) {
    auto k = std::string{key.str()};
    if (k != "identity" && k != "token")
      return make_error(errc::invalid_argument,
                        src + ": unknown section '" + k
                          + "' (expected [[identity]] or [[token]])");
    auto* list = value.as_array();
    if (list == nullptr || !list->is_array_of_tables())
      return make_error(errc::invalid_argument,
                        src + ": " + k + ": write it as [[" + k + "]]");
    bool is_token = k == "token";
    size_t i = 0;
    for (const auto& node : *list) {
      auto where = src + ": " + k + "[" + std::to_string(i++) + "]";
      std::string digest;
      auto x = read_entry(*node.as_table(), where, is_token, digest);
      if (!x)
        return x.error();
      bool taken = out.identities.count(x->name) > 0;
      for (const auto& [_, t] : out.tokens)
        taken = taken || t.name == x->name;
      if (taken)
        return make_error(errc::invalid_argument,
                          where + ": name '" + x->name + "' is used twice");
      if (is_token) {
        if (out.tokens.count(digest) > 0)
          return make_error(errc::invalid_argument,
                            where + ": the same sha256 as another token");
        out.tokens.emplace(std::move(digest), std::move(*x));
      } else {
        auto name = x->name;
        out.identities.emplace(std::move(name), std::move(*x));
      }
    }
  }
  if (out.identities.empty() && out.tokens.empty())
    return make_error(errc::invalid_argument,
                      src + ": names no [[identity]] and no [[token]]");
  return out;
}

caf::expected<authz_policy> load_authz_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_argument, "--authz: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto policy = parse_authz(text.str(), path);
  if (!policy)
    return make_error(errc::invalid_argument,
                      "--authz: " + message_of(policy.error()));
  return policy;
}

caf::expected<principal> authorize(const access_settings& settings,
                                   std::string_view method,
                                   const caller_credentials& caller,
                                   const std::string& job_id) {
  auto name = std::string{method};
  const auto* rule = rule_of(method);
  if (rule == nullptr)
    return denied(name + " is not in the access table");
  // Where it is served comes first: it does not depend on who asks.
  if (settings.listener == listener_kind::control && rule->agent_rpc)
    return denied(name
                  + " is served on the agent listener, not the "
                    "control listener");
  if (settings.listener == listener_kind::agent && rule->om
      && !settings.om_on_agent_listener)
    return denied(name
                  + " is an O&M RPC; this daemon serves it on the "
                    "control listener only");
  // Who asks: a verified certificate name the policy knows, else a token.
  const principal* who = nullptr;
  if (settings.policy) {
    for (const auto& n : caller.cert_names)
      if (auto i = settings.policy->identities.find(n);
          i != settings.policy->identities.end()) {
        who = &i->second;
        break;
      }
    if (who == nullptr && !caller.bearer_token.empty()) {
      auto i = settings.policy->tokens.find(sha256_hex(caller.bearer_token));
      if (i != settings.policy->tokens.end())
        who = &i->second;
    }
  }
  if (!settings.policy) {
    principal anyone;
    if (!caller.cert_names.empty())
      anyone.name = caller.cert_names.front();
    return anyone;
  }
  if (who == nullptr) {
    // Only a caller that sent nothing: a wrong token or an unknown
    // certificate is a mistake to report, not an anonymous agent.
    bool anonymous_agent = settings.anonymous_agents
      && settings.listener != listener_kind::control
      && caller.cert_names.empty() && caller.bearer_token.empty()
      && (rule->roles & agents) != 0;
    if (anonymous_agent) {
      principal anyone;
      anyone.r = role::agent;
      return anyone;
    }
    std::string why;
    if (!caller.cert_names.empty())
      why = "its client certificate '" + caller.cert_names.front()
        + "' is not in the authz file";
    else if (!caller.bearer_token.empty())
      why = "its bearer token is not in the authz file";
    else
      why = "it sent neither a client certificate nor a bearer token";
    return make_error(errc::unauthenticated,
                      name + " needs an identity, and " + why);
  }
  if ((rule->roles & bit(who->r)) == 0)
    return denied(describe(*who) + " may not call " + name + ", it needs "
                  + to_string_roles(rule->roles));
  if (who->r == role::agent && !who->jobs.empty() && !job_id.empty()
      && std::find(who->jobs.begin(), who->jobs.end(), job_id)
        == who->jobs.end())
    return denied(describe(*who) + " may not call " + name + " for job '"
                  + job_id + "', only for its jobs");
  return *who;
}

std::string audit_name(const principal& who, const std::string& peer,
                       bool peer_fallback) {
  if (!who.name.empty() || !peer_fallback)
    return who.name;
  return peer;
}

caf::error limit(const access_settings& settings, std::string_view method,
                 const principal& who, std::string_view peer_address,
                 const std::string& job_id, int64_t& retry_after_ms) {
  if (!settings.limiter)
    return {};
  const auto* rule = rule_of(method);
  // Unlimited classes cost no key and no lock.
  if (rule == nullptr || !settings.limiter->limits(rule->cls, !job_id.empty()))
    return {};
  // An authenticated caller is one client wherever it connects from; an
  // anonymous one is its address.
  auto client = who.name.empty() ? peer_host(peer_address) : "id:" + who.name;
  auto refused = settings.limiter->acquire(rule->cls, client,
                                           rule->cls == rpc_class::report
                                             ? std::string_view{job_id}
                                             : std::string_view{});
  if (!refused)
    return {};
  retry_after_ms = refused->retry_after_ms;
  const auto& limits = settings.limiter->limits();
  bool by_job = std::string_view{refused->scope} == "job";
  const auto& r = by_job ? limits.per_job_reports
                         : limits.per_client[static_cast<size_t>(rule->cls)];
  auto rate = std::to_string(static_cast<int64_t>(r.per_second));
  auto burst = std::to_string(static_cast<int64_t>(r.burst));
  std::string what = by_job ? "job '" + job_id + "' is over its limit of "
      + rate + " reports/s (burst " + burst + ")"
                            : "client '" + client + "' is over its limit of "
      + rate + " " + to_string(rule->cls) + " calls/s (burst " + burst + ")";
  return make_error(errc::overloaded,
                    std::string{method} + " refused: " + what + "; retry in "
                      + std::to_string(refused->retry_after_ms) + " ms");
}

} // namespace recoverd
