#pragma once

/// What a step changed in a job's recovery state, so that a `flow_stepped`
/// event records the change instead of the whole state (whose fault cache
/// and pod uids hold every rank of the job). Snapshots still hold the whole
/// state. Pure.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/model/recovery.hpp"

namespace recoverd {

/// The fields of `recovery`, one each; their names (`to_string`) are the
/// field names of the stored `RecoveryState` record.
enum class recovery_field : uint8_t {
  // flow_part
  state,
  uuid,
  faults,
  fault_pods,
  agent_strategies,
  decided,
  results,
  outbox,
  deadline_ms,
  deadline_event,
  started_ms,
  health,
  origin_uids,
  wait_until_ms,
  pending_strategy,
  platform_round,
  in_place_pods,
  restart_in_place,
  in_place_checked,
  isolate_nodes,
  // operator_action
  om_kind,
  om_operator,
  switch_ranks,
  switch_ops,
  stress_params,
  stress_fault,
  // job_standing
  label,
  retry_time,
  reset_json,
  reset_check,
  flows,
  last_outcome,
  om_last_message,
  om_done,
  om_last_kind,
  unhealthy_nodes,
  // Added later (records name fields, so the order is free; new ones go
  // last all the same). flow_part:
  awaited,
  over_budget,
  // job_standing:
  recovery_starts,
};

/// Number of `recovery_field`s.
constexpr size_t recovery_field_count = 39;

/// The record name of a field, e.g. "faultPods".
const char* to_string(recovery_field x);

/// The field of a record name, if any.
std::optional<recovery_field> recovery_field_from_string(const std::string& x);

/// What one step changed: the fields it replaced, with their new values,
/// and the fault cache as entries set and removed (a flow's faults trickle
/// in, so a step names only the ranks it touched).
struct recovery_delta {
  /// Bit `k` set: field `k` is replaced by its value in `values`.
  uint64_t changed = 0;
  /// The new values of the replaced fields; the others are default.
  recovery values;
  /// Fault cache entries added or retyped (when `faults` is not replaced).
  std::map<std::string, fault_type> faults_set;
  /// Fault cache entries removed (when `faults` is not replaced).
  std::vector<std::string> faults_removed;

  /// Whether `x` is replaced.
  bool replaces(recovery_field x) const {
    return (changed >> static_cast<unsigned>(x)) & 1u;
  }

  /// Marks `x` replaced.
  void replace(recovery_field x) {
    changed |= uint64_t{1} << static_cast<unsigned>(x);
  }

  /// Nothing changed.
  bool empty() const {
    return changed == 0 && faults_set.empty() && faults_removed.empty();
  }
};

/// What turns `before` into `after`; takes the changed values from `after`.
recovery_delta diff(const recovery& before, recovery&& after);

/// A delta that replaces every field: how a record of the first version,
/// which held the whole state, reads.
recovery_delta replace_all(recovery&& after);

/// Field-wise equality of two recovery states.
bool operator==(const recovery& x, const recovery& y);

/// Applies `d` to `rec`.
void patch(recovery& rec, const recovery_delta& d);

/// Applies `d` to `rec`, taking its values.
void patch(recovery& rec, recovery_delta&& d);

} // namespace recoverd
