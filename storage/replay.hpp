#pragma once

/// Rebuilding jobs from the log: latest snapshot plus the events after it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/model/job_model.hpp"
#include "storage/event_log.hpp"

namespace recoverd::storage {

/// A job's last record that could not be decoded: what a write torn by a
/// crash leaves behind. Replay leaves it out instead of failing.
struct discarded_event {
  std::string job_id;
  uint64_t seq = 0;
  size_t bytes = 0;   ///< Size of the record.
  std::string reason; ///< Why it did not decode.
};

/// One job as replayed.
struct replayed_job {
  job_model state;           ///< The fold of its events.
  uint64_t events_replayed = 0; ///< Events folded after the snapshot.
  /// Those events and the snapshot, as the job's next snapshot counts them.
  snapshot_tail tail;
  bool from_snapshot = false;   ///< A snapshot was the starting point.
  /// The undecodable last record left out, if any.
  std::optional<discarded_event> discarded;
};

/// Every job of the log.
struct replay_result {
  std::vector<replayed_job> live;     ///< Jobs that exist, replayed.
  /// Jobs that exist and were left undecoded: their stored digest still
  /// describes them (see `replay_all`).
  std::vector<job_digest> dormant;
  /// The digests of the dormant jobs that had none current: the fold at
  /// start-up computed them; stored (`event_log::put_digests`), they spare
  /// the next start-up that fold.
  std::vector<digest_record> fresh_digests;
  std::vector<deleted_job> deleted;   ///< Jobs whose last event deleted them.
  std::vector<discarded_event> discarded; ///< Torn last records left out.
  uint64_t events_replayed = 0;       ///< Events folded over all jobs.
  size_t from_snapshot = 0;           ///< Jobs that started at a snapshot.
};

/// Replays one job. A job without events comes back empty (seq 0) with its id
/// set. An undecodable record is an error naming the job and the seq, unless
/// it is the job's last record in the log: then it is left out and reported
/// in `discarded`. A point before the job's first kept event (see
/// `event_log::first_seq`) is a `history_purged` error.
[[nodiscard]] caf::expected<replayed_job>
replay_job(const event_log& log, const std::string& job_id,
           uint64_t up_to_seq = UINT64_MAX);

/// Replays every job of the log, in order of job id, on `threads` threads
/// (0: one per core, at most 8). With `use_digests`, a job whose stored
/// digest is still valid (taken at its last event, see
/// `event_log::put_digests`) is not read further: it comes back in
/// `dormant`, for its actor to replay it when it is first asked for. So does
/// a job without a current digest that may stay dormant (`to_digest`, as
/// after a crash): folded without its spec's details, it comes back in
/// `dormant` and its digest in `fresh_digests`; only the others are
/// replayed in full.
[[nodiscard]] caf::expected<replay_result>
replay_all(const event_log& log, size_t threads = 0, bool use_digests = false);

} // namespace recoverd::storage
