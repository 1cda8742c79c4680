#pragma once

/// Rebuilding jobs from the log: latest snapshot plus the events after it.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/job_model.hpp"
#include "storage/event_log.hpp"

namespace recoverd::storage {

/// One job as replayed.
struct replayed_job {
  job_model state;           ///< The fold of its events.
  uint64_t events_replayed = 0; ///< Events folded after the snapshot.
  bool from_snapshot = false;   ///< A snapshot was the starting point.
};

/// Every job of the log.
struct replay_result {
  std::vector<replayed_job> live;     ///< Jobs that exist.
  std::vector<std::string> deleted;   ///< Jobs whose last event deleted them.
  uint64_t events_replayed = 0;       ///< Events folded over all jobs.
};

/// Replays one job. A job without events comes back empty (seq 0) with its id
/// set.
[[nodiscard]] caf::expected<replayed_job>
replay_job(const event_log& log, const std::string& job_id,
           uint64_t up_to_seq = UINT64_MAX);

/// Replays every job of the log.
[[nodiscard]] caf::expected<replay_result> replay_all(const event_log& log);

} // namespace recoverd::storage
