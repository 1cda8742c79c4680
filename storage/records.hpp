#pragma once

/// The storage records the journal and the event log exchange: encoded
/// events, snapshots and incidents, and what a purge of old history removes.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace recoverd {

/// One encoded event to append.
struct log_record {
  std::string job_id;
  uint64_t seq = 0;
  std::string bytes;
};

/// One encoded snapshot to store with an append.
struct snapshot_record {
  std::string job_id;
  uint64_t seq = 0;
  std::string bytes;
};

/// The encoded digest of a job (see `job_digest`), taken at its event `seq`.
struct digest_record {
  std::string job_id;
  uint64_t seq = 0;
  std::string bytes;
};

/// Records of the fleet's own streams (the node registry's, ...), kept
/// apart from every job's events: written in the same write as the jobs'
/// records, never in the cluster-wide order, never removed by a job's
/// deletion. `log_record::job_id` names the stream. A snapshot at seq S
/// replaces its stream's events up to S, which the same write removes.
struct fleet_records {
  std::vector<log_record> events;
  std::vector<snapshot_record> snapshots;

  /// True when there is nothing to write.
  bool empty() const {
    return events.empty() && snapshots.empty();
  }
};

/// A job whose history is to be removed up to and including `up_to_seq`,
/// with the entries of those events in the cluster-wide order.
///
/// For a deleted job (`live` false) `up_to_seq` is the seq of its deletion,
/// and its snapshot, stored incidents and base state no newer than that go
/// too. For a live job (`live` true) `up_to_seq` lies before its latest
/// snapshot, which is kept (see `storage/retention.hpp`).
struct purge_target {
  std::string job_id;
  uint64_t up_to_seq = 0;
  bool live = false;
};

/// One finished incident of a live job, encoded (`protos/history.proto`),
/// kept when the retention removes the events it was built from.
struct incident_record {
  std::string job_id;
  /// Seq of the incident's first event (its key within the job).
  uint64_t first_seq = 0;
  std::string bytes;
};

/// What a purge removed.
struct purge_stats {
  uint64_t jobs = 0;          ///< Jobs whose history was removed.
  uint64_t events = 0;        ///< Event records removed.
  uint64_t index_entries = 0; ///< Entries of the cluster-wide order removed.
  uint64_t snapshots = 0;     ///< Snapshots removed.
  uint64_t live_jobs = 0;     ///< Live jobs whose old events were removed.
  uint64_t live_events = 0;   ///< Event records of live jobs removed.
  uint64_t incidents = 0;     ///< Incidents of live jobs stored to keep.
};

/// A job whose last event deleted it, as the registry remembers it.
struct deleted_job {
  std::string job_id;
  uint64_t seq = 0;          ///< Seq of the deletion event.
  int64_t deleted_at_ms = 0; ///< When it was deleted, Unix ms.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_record& x) {
  return f(caf::meta::type_name("log_record"), x.job_id, x.seq, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_record& x) {
  return f(caf::meta::type_name("snapshot_record"), x.job_id, x.seq, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, digest_record& x) {
  return f(caf::meta::type_name("digest_record"), x.job_id, x.seq, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, purge_target& x) {
  return f(caf::meta::type_name("purge_target"), x.job_id, x.up_to_seq,
           x.live);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, purge_stats& x) {
  return f(caf::meta::type_name("purge_stats"), x.jobs, x.events,
           x.index_entries, x.snapshots, x.live_jobs, x.live_events,
           x.incidents);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, deleted_job& x) {
  return f(caf::meta::type_name("deleted_job"), x.job_id, x.seq,
           x.deleted_at_ms);
}

} // namespace recoverd
