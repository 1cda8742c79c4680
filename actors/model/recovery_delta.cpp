#include "actors/model/recovery_delta.hpp"

#include <array>
#include <utility>

namespace recoverd {

namespace {

using rf = recovery_field;

// The field table: each field's id, record name and place in `recovery`.
// `f(id, name, get)` where `get(rec)` returns the field of `rec`.
template <class F>
void for_each_field(F&& f) {
  // clang-format off
  f(rf::state, "state", [](auto& r) -> auto& { return r.flow.state; });
  f(rf::uuid, "uuid", [](auto& r) -> auto& { return r.flow.uuid; });
  f(rf::faults, "faults", [](auto& r) -> auto& { return r.flow.faults; });
  f(rf::fault_pods, "faultPods", [](auto& r) -> auto& { return r.flow.fault_pods; });
  f(rf::agent_strategies, "agentStrategies", [](auto& r) -> auto& { return r.flow.agent_strategies; });
  f(rf::decided, "decided", [](auto& r) -> auto& { return r.flow.decided; });
  f(rf::results, "results", [](auto& r) -> auto& { return r.flow.results; });
  f(rf::outbox, "outbox", [](auto& r) -> auto& { return r.flow.outbox; });
  f(rf::deadline_ms, "deadlineMs", [](auto& r) -> auto& { return r.flow.deadline_ms; });
  f(rf::deadline_event, "deadlineEvent", [](auto& r) -> auto& { return r.flow.deadline_event; });
  f(rf::started_ms, "flowStartedMs", [](auto& r) -> auto& { return r.flow.started_ms; });
  f(rf::health, "health", [](auto& r) -> auto& { return r.flow.health; });
  f(rf::origin_uids, "originUids", [](auto& r) -> auto& { return r.flow.origin_uids; });
  f(rf::wait_until_ms, "waitUntilMs", [](auto& r) -> auto& { return r.flow.wait_until_ms; });
  f(rf::pending_strategy, "pendingStrategy", [](auto& r) -> auto& { return r.flow.pending_strategy; });
  f(rf::platform_round, "platformRound", [](auto& r) -> auto& { return r.flow.platform_round; });
  f(rf::in_place_pods, "inPlacePods", [](auto& r) -> auto& { return r.flow.in_place_pods; });
  f(rf::restart_in_place, "restartInPlace", [](auto& r) -> auto& { return r.flow.restart_in_place; });
  f(rf::in_place_checked, "inPlaceChecked", [](auto& r) -> auto& { return r.flow.in_place_checked; });
  f(rf::isolate_nodes, "isolateNodes", [](auto& r) -> auto& { return r.flow.isolate_nodes; });
  f(rf::om_kind, "omKind", [](auto& r) -> auto& { return r.action.kind; });
  f(rf::om_operator, "omOperator", [](auto& r) -> auto& { return r.action.who; });
  f(rf::switch_ranks, "switchRanks", [](auto& r) -> auto& { return r.action.switch_ranks; });
  f(rf::switch_ops, "switchOps", [](auto& r) -> auto& { return r.action.switch_ops; });
  f(rf::stress_params, "stressParams", [](auto& r) -> auto& { return r.action.stress_params; });
  f(rf::stress_fault, "stressFault", [](auto& r) -> auto& { return r.action.stress_fault; });
  f(rf::label, "label", [](auto& r) -> auto& { return r.job.label; });
  f(rf::retry_time, "retryTime", [](auto& r) -> auto& { return r.job.retry_time; });
  f(rf::reset_json, "resetJson", [](auto& r) -> auto& { return r.job.reset_json; });
  f(rf::reset_check, "resetCheck", [](auto& r) -> auto& { return r.job.reset_check; });
  f(rf::flows, "flows", [](auto& r) -> auto& { return r.job.flows; });
  f(rf::last_outcome, "lastOutcome", [](auto& r) -> auto& { return r.job.last_outcome; });
  f(rf::om_last_message, "omLastMessage", [](auto& r) -> auto& { return r.job.om_last_message; });
  f(rf::om_done, "omDone", [](auto& r) -> auto& { return r.job.om_done; });
  f(rf::om_last_kind, "omLastKind", [](auto& r) -> auto& { return r.job.om_last_kind; });
  f(rf::unhealthy_nodes, "unhealthyNodes", [](auto& r) -> auto& { return r.job.unhealthy_nodes; });
  f(rf::awaited, "awaited", [](auto& r) -> auto& { return r.flow.awaited; });
  f(rf::over_budget, "overBudget", [](auto& r) -> auto& { return r.flow.over_budget; });
  f(rf::recovery_starts, "recoveryStarts", [](auto& r) -> auto& { return r.job.recovery_starts; });
  // clang-format on
}

const std::array<const char*, recovery_field_count>& names() {
  static const auto result = [] {
    std::array<const char*, recovery_field_count> xs{};
    for_each_field([&](rf id, const char* name, auto) {
      xs[static_cast<size_t>(id)] = name;
    });
    return xs;
  }();
  return result;
}

template <class Delta>
void patch_impl(recovery& rec, Delta&& d) {
  for_each_field([&](rf id, const char*, auto get) {
    if (d.replaces(id))
      get(rec) = std::move(get(d.values));
  });
  if (!d.replaces(rf::faults)) {
    for (const auto& rank : d.faults_removed)
      rec.flow.faults.erase(rank);
    for (const auto& [rank, type] : d.faults_set)
      rec.flow.faults[rank] = type;
  }
}

} // namespace

const char* to_string(recovery_field x) {
  auto k = static_cast<size_t>(x);
  return k < recovery_field_count ? names()[k] : "";
}

std::optional<recovery_field> recovery_field_from_string(const std::string& x) {
  const auto& xs = names();
  for (size_t k = 0; k < xs.size(); ++k)
    if (x == xs[k])
      return static_cast<recovery_field>(k);
  return std::nullopt;
}

recovery_delta diff(const recovery& before, recovery&& after) {
  recovery_delta d;
  for_each_field([&](rf id, const char*, auto get) {
    if (id == rf::faults || get(before) == get(after))
      return;
    d.replace(id);
    get(d.values) = std::move(get(after));
  });
  // A flow's outcome is written with the count it ends, also when it
  // equals the previous one, so that each ending step names its outcome.
  if (d.replaces(rf::flows) && !d.replaces(rf::last_outcome)) {
    d.replace(rf::last_outcome);
    d.values.job.last_outcome = after.job.last_outcome;
  }
  const auto& was = before.flow.faults;
  auto& now = after.flow.faults;
  if (was == now)
    return d;
  // A flow's end empties the cache: one name says so. Otherwise the ranks
  // the step touched.
  if (now.empty()) {
    d.replace(rf::faults);
    return d;
  }
  for (const auto& [rank, type] : now) {
    auto i = was.find(rank);
    if (i == was.end() || i->second != type)
      d.faults_set.emplace(rank, type);
  }
  for (const auto& entry : was)
    if (now.count(entry.first) == 0)
      d.faults_removed.push_back(entry.first);
  return d;
}

recovery_delta replace_all(recovery&& after) {
  recovery_delta d;
  d.changed = (uint64_t{1} << recovery_field_count) - 1;
  d.values = std::move(after);
  return d;
}

bool operator==(const recovery& x, const recovery& y) {
  bool same = true;
  for_each_field(
    [&](rf, const char*, auto get) { same = same && get(x) == get(y); });
  return same;
}

void patch(recovery& rec, const recovery_delta& d) {
  patch_impl(rec, d);
}

void patch(recovery& rec, recovery_delta&& d) {
  patch_impl(rec, std::move(d));
}

} // namespace recoverd
