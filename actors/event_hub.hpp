#pragma once

#include <string>
#include <vector>

#include "actors/actors.hpp"

namespace recoverd {

/// State of the EVENT HUB actor.
struct event_hub_state {
  /// One live watcher.
  struct watcher {
    /// Its job; empty for every job.
    std::string job_id;
    event_sink_ptr sink;
  };

  std::vector<watcher> watchers;
  hub_stats stats;
  /// `watchers.size()` for the journal; may be null.
  watcher_gauge watching;

  static inline const char* name = "event_hub";
};

/// The EVENT HUB behaviour.
/// @param watching Kept equal to the number of watchers; may be null.
event_hub_actor::behavior_type
event_hub(event_hub_actor::stateful_pointer<event_hub_state> self,
          watcher_gauge watching);

} // namespace recoverd
