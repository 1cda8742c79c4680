#pragma once

#include <cstdint>

#include "actors/actors.hpp"

namespace recoverd {

/// The daemon's long-lived components the STATUS DESK asks, in the order
/// it lists them. One that is not running (a null handle) is listed as
/// such.
struct status_components {
  job_registry_actor registry;
  journal_actor journal;
  event_hub_actor hub;
  inspector_actor inspector;
  historian_actor historian;
};

/// State of the STATUS DESK actor.
struct status_desk_state {
  status_components parts;
  /// Fan-outs asked for so far.
  uint64_t rounds = 0;

  static inline const char* name = "status_desk";
};

/// The STATUS DESK behaviour. It never blocks: run it on the scheduler.
status_desk_actor::behavior_type
status_desk(status_desk_actor::stateful_pointer<status_desk_state> self,
            status_components parts);

} // namespace recoverd
