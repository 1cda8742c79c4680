#pragma once

/// The waits of the recovery protocol, as the pure machines see them.

#include <chrono>

namespace recoverd {

/// Milliseconds, the unit of every configured wait.
using millis = std::chrono::milliseconds;

/// Every wait of the recovery protocol (reference §1.5; design §4.9) that
/// the machines implement. The reference's waits of what recoverd does not
/// do (signal enqueue, ra-block rescheduling, scale-in resource check,
/// restart-fault delay, hot switch, pre-exit, new-pod bookkeeping) have no
/// setting: a flag that changes nothing would mislead.
struct timeouts {
  millis keepalive{5'000};         ///< Keep-alive period on agent streams.
  millis report{900'000};          ///< Any wait for an agent report.
  millis notify{30'000};           ///< A signal nobody picks up (design §4.3).
  millis fault_flush{1'000};       ///< Fault flush before the global notice.
  millis resource_release{10'000}; ///< Force-release before the global notice.
  millis recover_in_place{15'000}; ///< "Fault disappeared?" (5 x 3 s).
  millis reschedule{270'000};      ///< Pod reschedule wait for recover.
  millis hccl_convergence{3'000};    ///< Routing convergence before retry.
  millis exit_reschedule{20'000};    ///< Listen for reschedule after dump/exit.
  millis restart_all{60'000};        ///< Wait after restarting all processes.
  millis job_fallback{135'000};      ///< Job running again after fallback.
  millis platform{300'000};          ///< Platform annotation waits.
  millis poll{5'000};                ///< Polling period of platform checks.
  /// The restart budget (crash-loop guard): at most `budget_flows` fault
  /// recoveries start within `budget_window`; 0 = no budget. A job's
  /// annotation `recoverd.io/restart-budget` overrides it.
  uint32_t budget_flows = 0;
  millis budget_window{3'600'000}; ///< The restart budget's window.
  /// Past the budget: kill the job (true) or reschedule it as a whole, the
  /// job-level fallback (false).
  bool budget_exit = false;
};

} // namespace recoverd
