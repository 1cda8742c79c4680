#pragma once

/// How faults enter a job's machine: from an agent's ReportProcessFault and
/// from the fault center's device snapshots (reference §4.1).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "actors/model/error.hpp"
#include "actors/model/recovery.hpp"
#include "actors/model/topology.hpp"

namespace recoverd {

/// What recovery makes of a fault level (spec §3.1 "Levels", §3.4 gates 1
/// and 3).
enum class level_class : uint8_t {
  /// A fault for recovery that makes the job UnHealthy: ManuallySeparateNPU,
  /// SeparateNPU, RestartNPU, FreeRestartNPU, RestartBusiness,
  /// RestartRequest, and the empty level of callers that send none.
  fault,
  /// SubHealthFault: a fault only while the job is SubHealthy.
  sub_health,
  /// NotHandleFault, PreSeparateNPU: recorded, never a fault for recovery.
  not_handled,
  /// NormalNPU, NormalNetwork: no fault at all; the entry is dropped.
  no_fault,
  /// Any other name: the entry is skipped and reported.
  unknown,
};

/// The class of the fault level `level` (names are case-sensitive).
level_class classify_level(const std::string& level);

/// A job's health from the levels of its faults (spec §3.4 gate 3):
/// "UnHealthy" if any is of class `fault`, else "SubHealthy" if any is of
/// class `sub_health`, else "Healthy".
std::string health_of(const std::vector<device_fault>& faults);

/// A fault-center snapshot checked entry by entry.
struct checked_snapshot {
  /// The snapshot's health state, or the one `health_of` computes from
  /// `kept` when the snapshot gave none.
  std::string health_state;
  /// The entries that passed, in order: what the job records. Entries of
  /// class `no_fault` are dropped silently.
  std::vector<device_fault> kept;
  /// One line per skipped entry, naming it by index, e.g.
  /// `faults[3]: device "9" on node "n1" is not in the job's topology`.
  std::vector<std::string> ignored;
};

/// Checks each entry of `x` against `spec` on its own, so that one stale or
/// unknown device does not hide the job's real faults. An entry is skipped
/// (and named in `ignored`) when its level is unknown, it has no fault
/// codes, its device (or, for a node-level entry with an empty device id,
/// its node) is not in the job's topology, or its pod uid is not the uid of
/// the pod there now (the pod was replaced). Fails only for a health state
/// other than "", "Healthy", "SubHealthy" and "UnHealthy". Linear in the
/// entries and the topology.
/// @param ranks The job's rank index; built from `spec` when null.
[[nodiscard]] expected<checked_snapshot>
check_snapshot(const job_spec& spec, const job_device_faults& x,
               const rank_index* ranks = nullptr);

/// What a ReportProcessFault with `faults` is for the machine: `fault_occur`
/// (starts a flow), `fault_absorbed` (joins the running flow) or `pre_exit`
/// (retry faults of a job without step retry: tell the agent, start
/// nothing). Fails on an unknown rank or fault type, naming the field.
/// @param ranks The job's rank index; built from `spec` when null.
[[nodiscard]] expected<flow_event> classify_process_fault(
  const recovery& current, const job_spec& spec, const init_config& init,
  const std::vector<fault_rank>& faults, const rank_index* ranks = nullptr);

/// The fault-center path (reference §4.1): the faults of `after` that were
/// not in `before` (a fault that persists is not raised again; one that
/// clears and returns is), as ranks with wire types ("0" for 80E01801 and
/// "2" for 8C1F860B when step retry is allowed, "1" otherwise), and what the
/// machine does with them: `fault_occur`, `fault_absorbed`, `pre_exit`, or
/// `none` when nothing is new. Linear in the faults of both snapshots.
/// A SubHealthy job's faults are handled only when its sub-health strategy
/// is graceExit and the job is dump-only (reference §4.1 step 2, hot switch
/// not supported). Levels (spec §3.4 gates 1 and 4): NotHandleFault,
/// PreSeparateNPU, NormalNPU and NormalNetwork entries are no faults,
/// SubHealthFault entries are faults only when the snapshot's health is
/// SubHealthy; any other level (unknown ones included: `check_snapshot`
/// skips those before) is a fault. A node-level entry (empty device id)
/// faults every rank of the job's pods on its node.
/// @param health_state The health of `after`.
/// @param ranks The job's rank index; built from `spec` when null.
/// @param before_health The health of `before`; empty: `health_state`.
std::pair<flow_event, std::vector<fault_rank>>
fault_center_input(const recovery& current, const job_spec& spec,
                   const init_config& init,
                   const std::vector<device_fault>& before,
                   const std::vector<device_fault>& after,
                   const std::string& health_state = "UnHealthy",
                   const rank_index* ranks = nullptr,
                   const std::string& before_health = {});

} // namespace recoverd
