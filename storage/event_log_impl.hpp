#pragma once

/// The inside of `event_log`, shared by its source files (`event_log.cpp`:
/// open, append, reads; `event_log_purge.cpp`: the retention's purges).
/// Private to storage/: nothing else includes it.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include "storage/event_log.hpp"

namespace recoverd::storage::log_detail {

/// Column families, in the order they are opened. Never reorder or
/// renumber: handles are looked up by these indices.
enum cf : size_t {
  cf_default = 0,
  cf_events = 1,    // job id \0 be64(seq) -> event bytes (no range deletes:
                    // its memtable inserts with hints, see open)
  cf_global = 2,    // be64(position) -> event key
  cf_snapshots = 3, // job id -> be64(seq) + state bytes
  cf_meta = 4,      // "schema_version", "incarnation", "position_floor" -> be64
  cf_incidents = 5, // job id \0 be64(first seq) -> IncidentRecord bytes
  cf_bases = 6,     // job id -> be64(seq) + state bytes before the first event
  cf_fleet = 7,     // fleet streams: 'e' stream \0 be64(seq) -> event bytes,
                    // 's' stream -> be64(seq) + snapshot bytes
  cf_digests = 8,   // job id -> be64(seq) + be64(hash of the event record
                    // at seq) + digest bytes; history_key(job id) -> the
                    // same for the inspector's fold of the job's history
                    // (in this family: a version that predates it opens
                    // the log all the same, and never reads the key)
  cf_count = 9,
};

/// The column families' names, by index.
inline constexpr const char* cf_names[cf_count]
  = {"default", "events",    "global", "snapshots",
     "meta",    "incidents", "bases",  "fleet",
     "digests"};

/// Families a log written by an older version lacks; a read-only open
/// (which cannot create them) treats them as empty.
constexpr bool optional_family(size_t x) {
  return x == cf_incidents || x == cf_bases || x == cf_fleet
         || x == cf_digests;
}

/// Key of a job's stored history in the digests family: the job id, a 0
/// byte (job ids hold no control characters) and "history".
inline std::string history_key(std::string_view job_id) {
  std::string out{job_id};
  out.push_back('\0');
  out.append("history");
  return out;
}

/// Highest position ever handed out, kept when the newest index entries
/// are removed (purge, discard), so that positions are never reused.
inline constexpr const char* position_floor_key = "position_floor";

/// Refuses `what` when fewer than `reserve + need` bytes are free on the
/// file system of `path`: "No space left on device" with the figures.
caf::error check_space(const std::string& path, uint64_t reserve,
                       uint64_t need, const char* what);

/// A RocksDB failure as `errc::storage_failure`, saying what failed.
caf::error io_error(const std::string& what, const rocksdb::Status& st);

} // namespace recoverd::storage::log_detail

namespace recoverd::storage {

/// What an open event log holds.
struct event_log::impl {
  event_log_options opts;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::WriteOptions write_opts;
  std::shared_ptr<rocksdb::Cache> block_cache;
  uint64_t last_position = 0;
  uint64_t incarnation = 0;
  std::mutex fault_mtx;
  std::string injected_failure;

  ~impl() {
    if (db && !opts.read_only
        && log_detail::check_space(opts.path, opts.min_free_bytes, 0, "close")) {
      // On a full disk RocksDB's flush and close abort the process (its
      // file writers assert after ENOSPC). Leave the database as a crash
      // would: every acknowledged append is in the WAL, which the next
      // open replays.
      (void) db.release();
      return;
    }
    if (db) {
      // With the WAL on, Close() does not flush: the next open would replay
      // every unflushed write from the WAL, which for a big log takes
      // seconds. Flushing now makes a restart after a clean stop open at
      // once. A failed flush loses nothing: the WAL still holds the writes.
      if (!opts.read_only) {
        rocksdb::FlushOptions fo;
        fo.allow_write_stall = true;
        db->Flush(fo, handles).PermitUncheckedError();
      }
      for (auto* h : handles)
        if (h != nullptr)
          db->DestroyColumnFamilyHandle(h);
      handles.clear();
      db->Close();
    }
  }

  rocksdb::ColumnFamilyHandle* h(log_detail::cf x) const {
    return handles[x];
  }

  /// An iterator over `family` that stops before `*upper`, which must
  /// outlive it; `fill_cache` false keeps a one-off pass over old data out
  /// of the block cache.
  std::unique_ptr<rocksdb::Iterator>
  iterate_below(log_detail::cf family, const rocksdb::Slice* upper,
                bool fill_cache = true) const {
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = upper;
    ro.fill_cache = fill_cache;
    return std::unique_ptr<rocksdb::Iterator>{db->NewIterator(ro, h(family))};
  }

  caf::expected<std::optional<std::string>> get(log_detail::cf family,
                                                const std::string& key) const {
    if (h(family) == nullptr)
      return std::optional<std::string>{};
    std::string value;
    auto st = db->Get(rocksdb::ReadOptions{}, h(family), key, &value);
    if (st.IsNotFound())
      return std::optional<std::string>{};
    if (!st.ok())
      return log_detail::io_error("read failed", st);
    return std::optional<std::string>{std::move(value)};
  }
};

} // namespace recoverd::storage
