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

/// State of the INSPECTOR actor.
struct inspector_state {
  /// Read-only access to the log; outlives the actor.
  const storage::event_log* log = nullptr;
  job_registry_actor registry;
  journal_actor journal;
  event_hub_actor hub;
  /// Every job's history (incidents, subscription, counts, goodput), folded
  /// from the log's global order up to `position`, starting with what the
  /// retention kept of removed events; caught up before each answer.
  std::unordered_map<std::string, job_history> histories;
  /// Global position of the last event folded into `histories`.
  uint64_t position = 0;
  /// The full histories of the jobs whose incidents were asked for last
  /// (a few: each holds every incident of its job).
  std::unordered_map<std::string, cached_history> incident_cache;
  /// Asks for incidents so far (the clock of `cached_history::used`).
  uint64_t incident_asks = 0;
  /// Events decoded for incidents so far: what the cache saves shows here.
  uint64_t incident_events_read = 0;
  /// Why the last periodic fold failed; empty when it did not (a failure
  /// is logged once, not every second).
  std::string fold_error;

  static inline const char* name = "inspector";
};

/// The INSPECTOR behaviour. Run it detached: it reads the log.
/// @param log The event log; outlives the actor.
inspector_actor::behavior_type
inspector(inspector_actor::stateful_pointer<inspector_state> self,
          const storage::event_log* log, job_registry_actor registry,
          journal_actor journal, event_hub_actor hub);

} // namespace recoverd
