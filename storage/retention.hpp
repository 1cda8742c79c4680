#pragma once

/// The retention of live jobs: which of a live job's oldest events may go,
/// and what is kept of them. A live job's log would otherwise grow forever;
/// replay needs only its latest snapshot and the events from there on.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/model/incidents.hpp"
#include "storage/event_log.hpp"
#include "storage/records.hpp"

namespace recoverd::storage {

/// What a purge may remove of one live job, and what it stores instead.
struct live_cut {
  /// The events to remove: seq up to and including `target.up_to_seq`.
  purge_target target;
  /// The job's state after `target.up_to_seq` (for past states between the
  /// first kept event and the latest snapshot).
  snapshot_record base;
  /// The finished incidents of the removed events.
  std::vector<incident_record> incidents;
};

/// Chooses the first event of `job_id` to keep (the *cut*) and builds what
/// to store instead of the events before it. Every removed event is older
/// than `older_than_ms` and lies before the job's latest snapshot, and the
/// cut never falls inside an incident: a flow running at the cut keeps all
/// its events, so the incidents built from the kept events are whole.
/// Nothing is removable without a snapshot, without old events, or while
/// the job's oldest events are one running flow.
/// @param max_events Most events examined (and so removed) in one call; a
///        longer backlog is removed over several calls.
/// @param examined Incremented by the events read (twice per removed event).
[[nodiscard]] caf::expected<std::optional<live_cut>>
plan_live_cut(const event_log& log, const std::string& job_id,
              int64_t older_than_ms, uint64_t max_events, uint64_t& examined);

/// `plan_live_cut` reading through `reader`, whose iterators the calls for
/// many jobs share (in order of job id, they only move forward).
[[nodiscard]] caf::expected<std::optional<live_cut>>
plan_live_cut(event_log::reader& reader, const event_log& log,
              const std::string& job_id, int64_t older_than_ms,
              uint64_t max_events, uint64_t& examined);

/// The incidents the retention kept of `job_id`'s removed events, oldest
/// first; each lies entirely before the job's first stored event, so they
/// and the incidents built from the stored events never overlap.
[[nodiscard]] caf::expected<std::vector<incident>>
kept_incidents(const event_log& log, const std::string& job_id);

} // namespace recoverd::storage
