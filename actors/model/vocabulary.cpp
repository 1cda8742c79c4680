#include "actors/model/vocabulary.hpp"

#include <array>
#include <utility>

namespace recoverd {

namespace {

// The string forms, in enumerator order: a name's index is its value.
constexpr std::array state_names = {
  "INIT",
  "NotifyWaitFaultFlushingState",
  "NotifyStopTrainState",
  "WaitReportStopCompleteState",
  "WaitFaultFlushFinishedState",
  "NotifyGlobalFaultState",
  "WaitReportRecoverStrategyState",
  "NotifyDecidedStrategyState",
  "WaitReportStepRetryStatusState",
  "WaitReportProcessRecoverStatusState",
  "WaitReportDumpStatusState",
  "CheckRecoverResultState",
  "KillPodForUnrecoverableRetryState",
  "ListenScheduleResultState",
  "NotifyRestartAllProcessState",
  "WaitRestartAllProcessState",
  "FaultClearState",
  "FaultRetryState",
  "NotifyKillJobState",
  "NotifyDumpState",
  "NotifyScaleInStrategyState",
  "WaitReportScaleInIsolateRanksState",
  "CheckReportScaleInIsolateRanksState",
  "WaitReportScaleInStatusState",
  "ScaleRunningState",
  "WaitReportScaleOutStatusState",
  "NotifyPauseTrainState",
  "WaitReportPauseCompleteState",
  "NotifySwitchNicState",
  "WaitSwitchNicFinishedState",
  "NotifyContinueTrainState",
  "WaitContinueTrainState",
  "NotifyStressTestState",
  "WaitStressTestFinishedState",
};
static_assert(state_names.size()
              == static_cast<size_t>(flow_state::wait_stress_test_finished)
                + 1);

constexpr std::array event_names = {
  "",
  "faultOccur",
  "platStrategyCheck",
  "notifyFinish",
  "waitPlatStrategyTimeout",
  "dumpForFault",
  "notifyFail",
  "notifySuccess",
  "receiveReport",
  "receiveTimeout",
  "processNotReadyEvent",
  "flushFinished",
  "resourceReleased",
  "inPlaceChecked",
  "resultFaultCheck",
  "writeConfirmFaultOrWaitResultFaultTimeout",
  "hcclConverged",
  "notifyRetryStrategySuccess",
  "notifyRecoverStrategySuccess",
  "notifyDumpStrategySuccess",
  "notifyExitStrategySuccess",
  "rescheduleCheck",
  "scheduleTimeout",
  "recoverSuccess",
  "recoverFail",
  "recoverableRetryError",
  "unRecoverableRetryError",
  "checkFinish",
  "finishKillPod",
  "scheduleCheck",
  "scheduleSuccess",
  "restartFinish",
  "clearSuccess",
  "clearFail",
  "fallbackCheck",
  "finish",
  "changeSwitchPauseError",
  "changeSwitchEnableError",
  "notifyScaleInStrategySuccessEvent",
  "needTryScaleStrategyInEvent",
  "notifyFaultNodesExitSuccessEvent",
  "scaleInSuccessEvent",
  "scaleOutSuccessEvent",
  "scaleCheck",
  "notifyScaleOutStrategySuccessEvent",
  "startSwitchNic",
  "switchNicRecvPause",
  "processPauseFail",
  "switchNicFail",
  "waitSwitchNicRecvFault",
  "notifyContinueSuccessEvent",
  "switchNicRecvContinue",
  "continueTrainFail",
  "startStressTest",
  "stressTestRecvPause",
  "stressTestRecvFault",
  "stressTestFail",
  "stressTestRecvContinue",
  "restartBudgetReschedule",
  "restartBudgetExit",
  "faultAbsorbed",
  "jobChanged",
  "annotationsChanged",
  "nodeHealthCleared",
  "preExit",
};
static_assert(event_names.size()
              == static_cast<size_t>(flow_event::pre_exit) + 1);

constexpr std::array report_kind_names
  = {"", "stop", "strategy", "status", "switch", "stress", "process"};
static_assert(report_kind_names.size()
              == static_cast<size_t>(report_kind::process) + 1);

constexpr std::array om_kind_names = {"", "switch", "stress"};
constexpr std::array fault_type_names = {"0", "1", "2"};
constexpr std::array stress_code_names = {"0", "1", "2", "3", "4"};

template <class Enum, class Names>
const char* name_of(Enum x, const Names& names) {
  auto i = static_cast<size_t>(x);
  return i < names.size() ? names[i] : "?";
}

template <class Enum, class Names>
std::optional<Enum> parse(std::string_view x, const Names& names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (x == names[i])
      return static_cast<Enum>(i);
  return std::nullopt;
}

} // namespace

stress_verdict verdict_of(stress_code x) {
  switch (x) {
    case stress_code::passed:
    case stress_code::not_run: return stress_verdict::pass;
    case stress_code::isolate_node: return stress_verdict::isolate_node;
    case stress_code::rank_fault:
    case stress_code::voltage_fault: return stress_verdict::fault_rank;
  }
  return stress_verdict::fault_rank;
}

stress_verdict verdict_of(std::string_view wire_code) {
  auto code = stress_code_from_string(wire_code);
  return code ? verdict_of(*code) : stress_verdict::fault_rank;
}

const char* rpc_name(report_kind x) {
  switch (x) {
    case report_kind::none: return "";
    case report_kind::stop: return "ReportStopComplete";
    case report_kind::strategy: return "ReportRecoverStrategy";
    case report_kind::status: return "ReportRecoverStatus";
    case report_kind::switch_nic: return "ReplySwitchNicResult";
    case report_kind::stress: return "ReplyStressTestResult";
    case report_kind::process: return "ReportProcessFault";
  }
  return "";
}

const char* to_string(flow_state x) {
  return name_of(x, state_names);
}

const char* to_string(flow_event x) {
  return name_of(x, event_names);
}

const char* to_string(report_kind x) {
  return name_of(x, report_kind_names);
}

const char* to_string(om_kind x) {
  return name_of(x, om_kind_names);
}

const char* to_string(fault_type x) {
  return name_of(x, fault_type_names);
}

const char* to_string(stress_code x) {
  return name_of(x, stress_code_names);
}

std::optional<flow_state> state_from_string(std::string_view x) {
  return parse<flow_state>(x, state_names);
}

std::optional<flow_event> event_from_string(std::string_view x) {
  return parse<flow_event>(x, event_names);
}

std::optional<report_kind> report_kind_from_string(std::string_view x) {
  return parse<report_kind>(x, report_kind_names);
}

std::optional<om_kind> om_kind_from_string(std::string_view x) {
  return parse<om_kind>(x, om_kind_names);
}

std::optional<fault_type> fault_type_from_string(std::string_view x) {
  return parse<fault_type>(x, fault_type_names);
}

std::optional<stress_code> stress_code_from_string(std::string_view x) {
  return parse<stress_code>(x, stress_code_names);
}

} // namespace recoverd
