#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "actors/actors.hpp"
#include "actors/model/incidents.hpp"

namespace recoverd {

namespace storage {
class event_log;
} // namespace storage

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
  /// Why the last periodic fold failed; empty when it did not (a failure
  /// is logged once, not every second).
  std::string fold_error;
  /// Of the first fold: jobs taken up from the folds a clean stop stored,
  /// and the events read from the log.
  uint64_t restored = 0;
  uint64_t first_fold_events = 0;
  /// Jobs whose fold changed since it was last stored.
  std::unordered_set<std::string> unsaved;
  /// How often the changed folds are stored; zero: only at a clean stop.
  std::chrono::milliseconds store_interval{0};
  /// A store is on its way to the journal.
  bool storing = false;
  /// Folds stored, and the stores that were not.
  uint64_t stored = 0;
  uint64_t store_failures = 0;

  static inline const char* name = "inspector";
};

/// The INSPECTOR behaviour. Run it detached: it reads the log.
/// @param log The event log; outlives the actor.
/// @param store_interval How often the folds that changed are stored
///        through the journal, so that the first fold after a crash reads
///        only what came after them; zero: only at a clean stop.
inspector_actor::behavior_type
inspector(inspector_actor::stateful_pointer<inspector_state> self,
          const storage::event_log* log, job_registry_actor registry,
          journal_actor journal, event_hub_actor hub,
          std::chrono::milliseconds store_interval);

} // namespace recoverd
