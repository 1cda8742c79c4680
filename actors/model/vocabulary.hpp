#pragma once

/// The typed vocabulary of the machines: states, events, report kinds,
/// operator actions, fault types and stress result codes. Strings appear
/// only at the wire, the log and the event record (`to_string` /
/// `from_string`); everywhere else the compiler checks the spelling.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace recoverd {

/// A state of a job's recovery machine (reference §5.1, §8.2, §9.2). The
/// string form is the reference's state name, e.g.
/// "WaitReportStopCompleteState"; `init` is "INIT".
enum class flow_state : uint8_t {
  init,
  notify_wait_fault_flushing,
  notify_stop_train,
  wait_stop_complete,
  wait_fault_flush_finished,
  notify_global_fault,
  wait_recover_strategy,
  notify_decided_strategy,
  wait_step_retry_status,
  wait_process_recover_status,
  wait_dump_status,
  check_recover_result,
  kill_pod_for_unrecoverable_retry,
  listen_schedule_result,
  notify_restart_all_process,
  wait_restart_all_process,
  fault_clear,
  fault_retry,
  notify_kill_job,
  notify_dump,
  notify_scale_in,
  wait_scale_in_isolate,
  check_scale_in_isolate,
  wait_scale_in_status,
  scale_running,
  wait_scale_out_status,
  notify_pause_train,
  wait_pause_complete,
  notify_switch_nic,
  wait_switch_nic_finished,
  notify_continue_train,
  wait_continue_train,
  notify_stress_test,
  wait_stress_test_finished,
};

/// Short alias: `st::wait_stop_complete`.
using st = flow_state;

/// An event of the machine: the reference's events (§5.2, §8.2, §9.2) plus
/// the inputs that are not rows of the table (`fault_absorbed`,
/// `job_changed`, `annotations_changed`, `node_health_cleared`, `pre_exit`).
/// The string form is the reference's event name, e.g. "receiveReport".
enum class flow_event : uint8_t {
  none,
  fault_occur,
  plat_strategy_check,
  notify_finish,
  wait_plat_strategy_timeout,
  dump_for_fault,
  notify_fail,
  notify_success,
  receive_report,
  receive_timeout,
  process_not_ready,
  flush_finished,
  resource_released,
  in_place_checked,
  result_fault_check,
  confirm_fault_timeout,
  hccl_converged,
  notify_retry_strategy_success,
  notify_recover_strategy_success,
  notify_dump_strategy_success,
  notify_exit_strategy_success,
  reschedule_check,
  schedule_timeout,
  recover_success,
  recover_fail,
  recoverable_retry_error,
  unrecoverable_retry_error,
  check_finish,
  finish_kill_pod,
  schedule_check,
  schedule_success,
  restart_finish,
  clear_success,
  clear_fail,
  fallback_check,
  finish,
  change_switch_pause_error,
  change_switch_enable_error,
  notify_scale_in_success,
  need_try_scale_in,
  notify_fault_nodes_exit_success,
  scale_in_success,
  scale_out_success,
  scale_check,
  notify_scale_out_success,
  start_switch_nic,
  switch_nic_recv_pause,
  process_pause_fail,
  switch_nic_fail,
  switch_nic_recv_fault,
  notify_continue_success,
  switch_nic_recv_continue,
  continue_train_fail,
  start_stress_test,
  stress_test_recv_pause,
  stress_test_recv_fault,
  stress_test_fail,
  stress_test_recv_continue,
  // The restart budget (not in the reference): a fault past it is not
  // recovered in place; the job is rescheduled as a whole, or killed.
  budget_reschedule,
  budget_exit,
  // Inputs that are not rows of the table.
  fault_absorbed,
  job_changed,
  annotations_changed,
  node_health_cleared,
  pre_exit,
};

/// Short alias: `ev::receive_report`.
using ev = flow_event;

/// Which RPC a report came from.
enum class report_kind : uint8_t {
  none,
  /// ReportStopComplete.
  stop,
  /// ReportRecoverStrategy.
  strategy,
  /// ReportRecoverStatus.
  status,
  /// ReplySwitchNicResult.
  switch_nic,
  /// ReplyStressTestResult.
  stress,
  /// ReportProcessFault (a fault, not an answer to a wait).
  process,
};

/// The operator action a job runs.
enum class om_kind : uint8_t {
  none,
  /// Link failover / switchback (SwitchNicTrack).
  switch_nic,
  /// Online stress test (StressTest).
  stress,
};

/// A rank's fault type on the wire ("0", "1", "2").
enum class fault_type : uint8_t {
  /// "0": an on-chip memory error (UCE) step retry can repair.
  uce = 0,
  /// "1": a normal fault; the rank's pod must restart.
  normal = 1,
  /// "2": a network (HCCL) error step retry can repair.
  network = 2,
};

/// A stress operation's result code (reference §9.2).
enum class stress_code : uint8_t {
  /// "0": passed.
  passed = 0,
  /// "1": the test could not run (not a fault).
  not_run = 1,
  /// "2": a hardware fault: the node is isolated.
  isolate_node = 2,
  /// "3": a fault of the rank.
  rank_fault = 3,
  /// "4": voltage not recovered: a fault of the rank.
  voltage_fault = 4,
};

/// What a stress result code makes recoverd do.
enum class stress_verdict : uint8_t {
  /// Training continues.
  pass,
  /// Every rank of the node becomes a fault and the node is recorded
  /// unhealthy; a recovery follows.
  isolate_node,
  /// The rank becomes a fault; a recovery follows.
  fault_rank,
};

/// The one place that says what a stress result code means.
stress_verdict verdict_of(stress_code x);

/// The verdict of a wire code ("0".."4"); an unknown code (refused at the
/// edge) counts as a fault of the rank.
stress_verdict verdict_of(std::string_view wire_code);

/// The Recover RPC a report comes from, e.g. "ReportStopComplete".
const char* rpc_name(report_kind x);

/// The reference's name of a state.
const char* to_string(flow_state x);
/// The reference's name of an event.
const char* to_string(flow_event x);
/// "stop", "strategy", "status", "switch", "stress", "process" or "".
const char* to_string(report_kind x);
/// "switch", "stress" or "".
const char* to_string(om_kind x);
/// "0", "1" or "2".
const char* to_string(fault_type x);
/// "0" .. "4".
const char* to_string(stress_code x);

/// Parses a state name; nothing when unknown.
std::optional<flow_state> state_from_string(std::string_view x);
/// Parses an event name; nothing when unknown.
std::optional<flow_event> event_from_string(std::string_view x);
/// Parses a report kind; nothing when unknown.
std::optional<report_kind> report_kind_from_string(std::string_view x);
/// Parses an operator action kind; nothing when unknown.
std::optional<om_kind> om_kind_from_string(std::string_view x);
/// Parses a wire fault type; nothing when unknown.
std::optional<fault_type> fault_type_from_string(std::string_view x);
/// Parses a stress result code; nothing when unknown.
std::optional<stress_code> stress_code_from_string(std::string_view x);

} // namespace recoverd
