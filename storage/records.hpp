#pragma once

/// The storage records the journal and the event log exchange: encoded
/// events and snapshots, and what a purge of old history removes.

#include <cstdint>
#include <string>

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

/// A deleted job whose history is to be removed: its events up to and
/// including `up_to_seq` (the seq of its deletion), their entries in the
/// cluster-wide order, and a snapshot no newer than that.
struct purge_target {
  std::string job_id;
  uint64_t up_to_seq = 0;
};

/// What a purge removed.
struct purge_stats {
  uint64_t jobs = 0;          ///< Jobs whose history was removed.
  uint64_t events = 0;        ///< Event records removed.
  uint64_t index_entries = 0; ///< Entries of the cluster-wide order removed.
  uint64_t snapshots = 0;     ///< Snapshots removed.
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
typename Inspector::result_type inspect(Inspector& f, purge_target& x) {
  return f(caf::meta::type_name("purge_target"), x.job_id, x.up_to_seq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, purge_stats& x) {
  return f(caf::meta::type_name("purge_stats"), x.jobs, x.events,
           x.index_entries, x.snapshots);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, deleted_job& x) {
  return f(caf::meta::type_name("deleted_job"), x.job_id, x.seq,
           x.deleted_at_ms);
}

} // namespace recoverd
