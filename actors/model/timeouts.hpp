#pragma once

/// The waits of the recovery protocol, as the pure machines see them.

#include <chrono>

namespace recoverd {

/// Milliseconds, the unit of every configured wait.
using millis = std::chrono::milliseconds;

/// Every wait of the recovery protocol (reference §1.5; design §4.9).
struct timeouts {
  millis keepalive{5'000};         ///< Keep-alive period on agent streams.
  millis report{900'000};          ///< Any wait for an agent report.
  millis notify{30'000};           ///< A signal nobody picks up (design §4.3).
  millis signal_enqueue{1'000};    ///< Enqueue of a signal (killMaster: 60 s).
  millis fault_flush{1'000};       ///< Fault flush before the global notice.
  millis resource_release{10'000}; ///< Force-release before the global notice.
  millis rack_reschedule{12'000};  ///< ra-block rescheduling (4 x 3 s).
  millis recover_in_place{15'000}; ///< "Fault disappeared?" (5 x 3 s).
  millis reschedule{270'000};      ///< Pod reschedule wait for recover.
  millis scale_in_resource{20'000};  ///< Scale-in resource check.
  millis hccl_convergence{3'000};    ///< Routing convergence before retry.
  millis exit_reschedule{20'000};    ///< Listen for reschedule after dump/exit.
  millis restart_all{60'000};        ///< Wait after restarting all processes.
  millis job_fallback{135'000};      ///< Job running again after fallback.
  millis restart_fault_delay{5'000}; ///< Before clearing reset in recover.
  millis platform{300'000};          ///< Platform annotation waits.
  millis hot_switch_pod{60'000};     ///< Backup pod running (hot switch).
  millis pre_exit{10'000};           ///< Pre-exit: FSM leaving INIT.
  millis new_pod_delay{10'000};      ///< New-pod origin bookkeeping.
  millis poll{5'000};                ///< Polling period of platform checks.
};

} // namespace recoverd
