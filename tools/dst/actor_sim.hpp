#pragma once

/// Deterministic simulation of the job actor (issue 11): the schedules of
/// `sim.hpp` run against the real registry, job actor and journal on a real
/// event log in a temporary directory, all under CAF's deterministic test
/// coordinator, with a manual clock that the simulator advances (firing the
/// delayed messages the coordinator holds at their time).
///
/// The agent is a recording stream sink: it answers the signal it actually
/// received (a step without `settle` loses what is pushed during it), sends
/// random, duplicate and late reports, drops its stream and subscribes
/// again. A crash-restart stops the actors, closes and reopens the log,
/// replays it with `storage::replay_all` and spawns them again.
///
/// After every step (and after every timer that fires) the checker reads the
/// new events of the log and checks: the fold of the log is the live state
/// (as the job actor answers Inspect); one uuid per flow and a new one per
/// flow; no signal of a flow after it ended; every flow ends within the sum
/// of its waits; a report is accepted only in its wait; an open agent stream
/// holds the pending and the awaited signal; and after a restart the job
/// has everything that was acknowledged before it.

#include "tools/dst/sim.hpp"

namespace recoverd::dst {

/// Knobs of the actor mode besides `run_options`.
struct actor_options {
  /// Applied to every job replayed at a crash-restart before it is spawned
  /// (the checker's self-test loses acknowledged state with it).
  std::function<void(job_model&)> tamper_restart;
};

/// Runs `s` against the job actor, checking every invariant after every
/// step. `run_options::tamper_replay` applies to the checker's fold of the
/// log, `run_options::extra_check` to the live state.
outcome run_actor(const schedule& s, const run_options& opts = {},
                  const actor_options& aopts = {});

} // namespace recoverd::dst
