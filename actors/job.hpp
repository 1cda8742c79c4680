#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/actors.hpp"
#include "actors/config.hpp"
#include "actors/model/job_model.hpp"

namespace recoverd {

/// State of a JOB actor: the folded model plus what is live only while the
/// daemon runs (streams, timers).
struct job_state {
  /// The fold of the job's events.
  job_model model;
  job_config cfg;
  journal_actor journal;
  /// The agent stream, if one is open.
  signal_sink_ptr subscriber;
  /// Generation of `subscriber`; 0 when none is open.
  uint64_t live_generation = 0;
  /// Open WatchAnnotations streams.
  std::vector<annotations_sink_ptr> watchers;
  /// Open SubscribeNotifySwitch (worker) streams; the newest gets the list.
  std::vector<switch_sink_ptr> switch_workers;
  /// Open SubscribeNotifyExecStressTest (worker) streams; the newest gets
  /// the operations.
  std::vector<stress_sink_ptr> stress_workers;
  /// Open operator streams of the running (or last) O&M action.
  std::vector<om_sink_ptr> operators;
  /// What was written since the last snapshot (see `snapshot_due`).
  snapshot_tail tail;
  /// `model.spec` encoded for a snapshot, kept until an event changes the
  /// spec (see `touches_spec`): a large job's spec is most of its
  /// snapshot, and flow steps leave it as it is.
  std::optional<std::string> spec_bytes;
  /// When the flow timers on their way are due (Unix ms). CAF cannot take
  /// a delayed message back, so a timer stays in memory until it is due: a
  /// wait whose deadline is later than one of these arms none, and the
  /// timer that fires first arms the current wait's (see `arm_flow_timer`).
  std::vector<int64_t> timers_due;
  /// Who caused the message being handled (an authenticated identity; empty
  /// for the daemon's own messages): the `by` of the events it commits.
  /// Set by every handler that commits; commits wait for durability with
  /// `await`, so no other message changes it meanwhile.
  std::string caller;

  static inline const char* name = "job";
};

/// The JOB behaviour.
/// @param initial The job's state as replayed from the log (or empty with
///                the sequence number to continue from).
/// @param tail What `initial` folds after its latest snapshot.
/// @param parent The registry; the job ends when it does.
job_actor::behavior_type job(job_actor::stateful_pointer<job_state> self,
                             job_model initial, snapshot_tail tail,
                             job_config cfg,
                             journal_actor journal, caf::actor_addr parent);

} // namespace recoverd
