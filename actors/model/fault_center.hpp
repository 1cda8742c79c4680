#pragma once

/// How faults enter a job's machine: from an agent's ReportProcessFault and
/// from the fault center's device snapshots (reference §4.1).

#include <utility>
#include <vector>

#include "actors/model/error.hpp"
#include "actors/model/recovery.hpp"
#include "actors/model/topology.hpp"

namespace recoverd {

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
/// not supported).
/// @param ranks The job's rank index; built from `spec` when null.
std::pair<flow_event, std::vector<fault_rank>>
fault_center_input(const recovery& current, const job_spec& spec,
                   const init_config& init,
                   const std::vector<device_fault>& before,
                   const std::vector<device_fault>& after,
                   const std::string& health_state = "UnHealthy",
                   const rank_index* ranks = nullptr);

} // namespace recoverd
