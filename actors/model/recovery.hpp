#pragma once

/// A job's machine: process-level recovery (reference §5), DP scale-in/out,
/// link switch (§8) and stress test (§9), one table of (state, event) ->
/// (next state, entry action) whose rows live in `actors/model/machines/`,
/// one file per machine. Pure: `step` takes the job's state, one input and
/// the configured waits, and returns the machine's new sub-state plus what it
/// wants written, without any I/O. Waits become absolute deadlines in the
/// state; signals to the agent become an outbox in the state; the job actor
/// performs both.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/model/error.hpp"
#include "actors/model/timeouts.hpp"
#include "actors/model/topology.hpp"
#include "actors/model/types.hpp"
#include "actors/model/vocabulary.hpp"

namespace recoverd {

/// One ReportRecoverStatus (or ReportStopComplete) as the machine keeps it.
struct recover_report {
  int32_t code = 0;
  std::string strategy;
  std::vector<std::string> isolate_ranks;
};

/// Field-wise equality.
inline bool operator==(const recover_report& x, const recover_report& y) {
  return x.code == y.code && x.strategy == y.strategy
    && x.isolate_ranks == y.isolate_ranks;
}

/// What one flow of the machine holds, from leaving INIT until back in
/// INIT; a finished flow resets it with `= {}`.
struct flow_part {
  /// The machine's state; `init` when idle.
  flow_state state = flow_state::init;
  /// The flow's uuid; empty when idle.
  std::string uuid;
  /// Fault caches: global rank -> type (normal; uce / network are retry
  /// faults).
  std::map<std::string, fault_type> faults;
  /// Pod ranks holding faults.
  std::set<int32_t> fault_pods;
  /// Strategies the agent reported for this flow.
  std::vector<std::string> agent_strategies;
  /// Strategies decided in this flow, in order.
  std::vector<std::string> decided;
  /// Results the agent reported in this flow, in order.
  std::vector<recover_report> results;
  /// The signal the current Notify state delivers; empty when none.
  std::optional<process_signal> outbox;
  /// The signal delivered last, whose answer the current wait waits for;
  /// empty outside such a wait. A new agent or worker stream gets it again
  /// with its uuid (design §4.1), without a second delivery input.
  std::optional<process_signal> awaited;
  /// Absolute deadline of the current wait (Unix ms); 0 when none.
  int64_t deadline_ms = 0;
  /// The event the machine receives at the deadline.
  flow_event deadline_event = flow_event::none;
  /// When the flow began (Unix ms); 0 when idle.
  int64_t started_ms = 0;
  /// The flow was started past the job's restart budget.
  bool over_budget = false;
  /// Job health from the flow's faults: Healthy, SubHealthy or UnHealthy.
  std::string health = "Healthy";
  /// Fault pods' uids when they became fault pods (pod rank -> uid), to
  /// see them rescheduled.
  std::map<int32_t, std::string> origin_uids;
  /// End of a polled wait (reschedule, job-level fallback); 0 when none.
  int64_t wait_until_ms = 0;
  /// The decided strategy whose signal waits for a delay (HCCL convergence).
  std::string pending_strategy;
  /// Platform mode: waiting for ProcessResultFault after writing
  /// ProcessConfirmFault.
  bool platform_round = false;
  /// recover-in-place candidates: pods with software faults only.
  std::set<int32_t> in_place_pods;
  /// The fault processes are restarted in place (reference "restarting
  /// fault processes"); `in_place_pods` restart, the other fault pods exit.
  bool restart_in_place = false;
  /// The recover-in-place check (reference §5.4 step 3) has run.
  bool in_place_checked = false;
  /// Nodes a stress test's result isolates, until the recovery takes them.
  std::vector<std::string> isolate_nodes;
};

/// The running operator action (link switch or stress test); reset with
/// `= {}` when it ends.
struct operator_action {
  /// Which action runs; `none` when none.
  om_kind kind = om_kind::none;
  /// Who asked for it (the operator's peer).
  std::string who;
  /// Link switch: global ranks and their operations (true = to backup).
  std::vector<std::string> switch_ranks;
  std::vector<bool> switch_ops;
  /// Stress test: global rank -> operations to run.
  stress_ops_map stress_params;
  /// Stress test: a fault was reported while it ran (reference §9.2 406),
  /// so it ends in a recovery whatever the result.
  bool stress_fault = false;
};

/// What outlives flows: the job's documents, its counters and what an
/// operator was told last.
struct job_standing {
  /// The reference's PodGroup label `process-recover-enable`.
  std::string label;
  /// The reset document's retry counter (reference §13 RetryTime).
  int32_t retry_time = 0;
  /// The reset document (`reset.json`) as the reference would write it.
  std::string reset_json;
  /// Hex SHA-256 of `reset_json` (the reference's `checkCode`).
  std::string reset_check;
  /// Flows completed so far (any outcome).
  uint64_t flows = 0;
  /// How the last flow ended, e.g. "recover-success", "killed".
  std::string last_outcome;
  /// The last message for the operator stream, and whether it was final.
  std::string om_last_message;
  bool om_done = false;
  /// The kind of operator action `om_last_message` belongs to.
  om_kind om_last_kind = om_kind::none;
  /// Nodes stress tests found faulty (node -> when, Unix ms). Cleared only
  /// by an operator.
  std::map<std::string, int64_t> unhealthy_nodes;
  /// When the recent fault recoveries started (Unix ms), oldest first: at
  /// most the restart budget's count, within its window.
  std::vector<int64_t> recovery_starts;
};

/// The job annotation that sets a job's own restart budget ("N/DURATION"
/// or "off"; see `parse_restart_budget`).
constexpr const char* restart_budget_annotation = "recoverd.io/restart-budget";

/// The recovery machine's part of a job's state, grouped by lifetime.
struct recovery {
  flow_part flow;
  operator_action action;
  job_standing job;
};

/// An input of the machine.
struct flow_input {
  /// The event (reference §5.2: faultOccur, receiveReport, notifySuccess,
  /// ..., or an input that is not a row: faultAbsorbed, jobChanged, ...).
  flow_event name = flow_event::none;
  /// When the input was decided (Unix ms).
  int64_t now_ms = 0;
  /// A uuid to use if the step starts a new flow or signal.
  std::string fresh_uuid;
  /// faultOccur / faultAbsorbed: the faults.
  std::vector<fault_rank> faults;
  /// receiveReport of ReportRecoverStrategy: the strategies.
  std::vector<std::string> strategies;
  /// receiveReport of ReportStopComplete / ReportRecoverStatus.
  recover_report report;
  /// Which RPC a report came from.
  report_kind kind = report_kind::none;
  /// notify results: the signal that was delivered.
  std::optional<process_signal> delivered;
  /// startSwitchNic: the ranks, their operations, and who asked.
  std::vector<std::string> switch_ranks;
  std::vector<bool> switch_ops;
  std::string who;
  /// startStressTest: global rank -> operations.
  stress_ops_map stress_params;
  /// receiveReport of ReplyStressTestResult: the results.
  stress_results stress_result;
  /// nodeHealthCleared: the node.
  std::string node;
  /// The caller's authenticated identity: recorded as the `by` of the
  /// step's event, not in the step.
  std::string by;
};

/// What one step wrote besides the machine's state.
struct step_output {
  /// States entered, in order (the first is the state before the step).
  std::vector<flow_state> path;
  /// Annotations recoverd writes (e.g. ProcessRecoverStatus).
  string_map annotations;
  /// Annotations recoverd removes (e.g. a stale ProcessResultFault).
  std::vector<std::string> removed_annotations;
  /// Signals to send once, without waiting for their delivery (reference:
  /// "send result ignored"), e.g. the dump-exit after a dump.
  std::vector<process_signal> side_signals;
  /// Messages for the operator stream (the last may be final).
  std::vector<std::string> om_messages;
  /// The operator action ended with this step.
  bool om_final = false;
};

/// What one step produced: its input, the machine's whole state after it,
/// and what it wrote.
struct flow_step : step_output {
  /// The input, as the step received it.
  flow_input input;
  /// The machine's state after the step.
  recovery after;
};

/// One requested link operation: a device of a node, to backup (true) or
/// back (false).
struct nic_op {
  std::string node;
  std::string device;
  bool to_backup = false;
};

/// Checks a SwitchNicTrack request against the job (reference §8.1 order
/// and texts, plus: an empty request and a job without an agent stream are
/// refused). On success fills the global ranks and operations.
biz_status validate_switch(const recovery& current, const job_spec& spec,
                           bool registered, bool subscribed,
                           const std::vector<nic_op>& ops,
                           std::vector<std::string>& ranks,
                           std::vector<bool>& to_backup);

/// Checks a StressTest request against the job (reference §9.1 order and
/// texts, plus: the job must be running and have an agent stream). On
/// success fills the operations per global rank.
biz_status validate_stress(const recovery& current, const job_spec& spec,
                           bool registered, bool subscribed,
                           const stress_request& req, stress_ops_map& params);

/// Checks a ReplyStressTestResult: every rank belongs to the job and every
/// code is "0".."4". Fails with invalid_argument naming the bad field.
failure validate_stress_results(const job_spec& spec,
                                const stress_results& results,
                                const rank_index* ranks = nullptr);

/// One row of the transition table.
struct transition {
  flow_state from;
  flow_event event;
  flow_state to;
};

/// The transition table, in reference order (R1..R46), for documentation and
/// the table-driven test.
const std::vector<transition>& transitions();

/// Runs one input through the machine. Fails with `unexpected_report` when
/// the current state has no rule for the input (nothing changes then).
/// @param spec The job's spec (topology and configured strategies).
/// @param init The configuration captured at Init.
/// @param device_faults The fault center's current view of the job (for
///        recover-in-place: a pod with a device fault cannot restart in place).
/// @param ranks The job's rank index; built from `spec` when null.
[[nodiscard]] expected<flow_step>
step(const recovery& current, const job_spec& spec, const init_config& init,
     const flow_input& in, const timeouts& waits,
     const std::vector<device_fault>& device_faults = {},
     const rank_index* ranks = nullptr);

struct recovery_delta;

/// What an absorbed fault (`fault_absorbed`: a fault joining a running
/// flow) changes: the same as diffing `current` with `step`'s state after
/// it, but found from the ranks `in` names alone, without copying the
/// state, so a report on a flow of 4,000 faults costs what one on a flow of
/// 4 does.
[[nodiscard]] recovery_delta absorb(const recovery& current,
                                    const job_spec& spec,
                                    const init_config& init,
                                    const flow_input& in,
                                    const rank_index& ranks);

/// The event a delivered signal produces (reference §2.4), or `none`.
flow_event send_result_event(const process_signal& sig);

/// The report the waiting state waits for, or `none`.
report_kind expected_report(flow_state state);

} // namespace recoverd
