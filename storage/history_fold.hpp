#pragma once

/// Every job's history (incidents, counts, goodput) folded from the log at
/// once, job by job on several threads: the inspector's first fold.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/model/incidents.hpp"

namespace recoverd::storage {

class event_log;

/// Every job's history, folded from the log.
struct folded_histories {
  /// By job id: each job's stored events, in seq order, after what the
  /// retention kept of its removed ones.
  std::unordered_map<std::string, job_history> histories;
  /// Every event up to this global position is folded (some after it may
  /// be too: they were appended while the fold ran).
  uint64_t position = 0;
  /// Jobs whose history was taken up from its stored fold (see
  /// `event_log::put_histories`), and the events read from the log.
  size_t restored = 0;
  uint64_t events = 0;
  /// Jobs whose fold is not the one stored: folded from their events, or
  /// taken up and then fed events after it.
  std::vector<std::string> unsaved;
};

/// Starts `h`, the history of job `job_id` whose first stored event is
/// `first_seq` > 1 (the retention removed the ones before), with what the
/// log kept of the removed events: the job's creation and topology, its
/// registration and subscription, and its kept incidents. Leaves `h` as it
/// is when the log kept no base for that seq.
[[nodiscard]] caf::error seed_history(const event_log& log,
                                      const std::string& job_id,
                                      uint64_t first_seq, job_history& h);

/// Folds every job's stored events into its history, keeping `keep`
/// finished incidents each, on `threads` threads (0: one per core, at most
/// 8). The same histories as folding the log's global order from its start,
/// in a fraction of the time: jobs fold independently. A job with a stored
/// fold still valid (see `event_log::reader::history`) is taken up from it
/// and folds only the events after it.
[[nodiscard]] caf::expected<folded_histories>
fold_histories(const event_log& log, size_t keep, size_t threads = 0);

} // namespace recoverd::storage
