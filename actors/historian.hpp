#pragma once

#include <string>
#include <unordered_map>

#include "actors/actors.hpp"
#include "actors/model/incidents.hpp"

namespace recoverd {

namespace storage {
class event_log;
} // namespace storage

/// The full history of a job whose incidents were asked for, kept so that
/// the next ask folds only the events appended since.
struct cached_history {
  /// Every incident of the job's stored events, up to `history.seq()`.
  job_history history;
  /// The job's first stored seq when the fold began: a purge changes it.
  uint64_t first_seq = 0;
  /// The bytes of the event at `history.seq()`: a job deleted and put
  /// again may reuse its seqs with other events.
  std::string last_bytes;
  /// When it was last asked for (a counter), for dropping the oldest.
  uint64_t used = 0;
};

/// State of the HISTORIAN actor.
struct historian_state {
  /// Read-only access to the log; outlives the actor.
  const storage::event_log* log = nullptr;
  /// The full histories of the jobs whose incidents were asked for last
  /// (a few: each holds every incident of its job).
  std::unordered_map<std::string, cached_history> incident_cache;
  /// Asks for incidents so far (the clock of `cached_history::used`).
  uint64_t incident_asks = 0;
  /// Events decoded for incidents so far: what the cache saves shows here.
  uint64_t incident_events_read = 0;
  /// Events decoded to find a past point (GetJobAt) so far.
  uint64_t at_events_read = 0;
  /// Questions asked so far (ListEvents, ListIncidents, GetJobAt), those
  /// refused included.
  uint64_t asked = 0;

  static inline const char* name = "historian";
};

/// The HISTORIAN behaviour. Run it detached: it reads the log.
/// @param log The event log; outlives the actor.
historian_actor::behavior_type
historian(historian_actor::stateful_pointer<historian_state> self,
          const storage::event_log* log);

} // namespace recoverd
