#pragma once

/// The RocksDB event log (design §2). The only code that includes RocksDB
/// is this folder's `.cpp` files; this header does not.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/model/types.hpp"
#include "storage/records.hpp"

namespace recoverd::storage {

/// How to open the log.
struct event_log_options {
  /// Directory of the database; created when missing (unless read-only).
  std::string path;
  /// Sync the WAL on every append (durable against power loss). With false,
  /// appends survive a process crash but not a machine crash until
  /// `sync_wal` runs.
  bool sync = true;
  /// Open without writing: for post-mortem tools, also while a daemon runs.
  bool read_only = false;
  /// RocksDB memtable size in bytes; 0 means 16 MB.
  size_t write_buffer_size = 0;
  /// RocksDB's block cache, one for every column family, with the tables'
  /// index and filter blocks charged to it: what reading the log keeps in
  /// memory stays within this however large the log grows. 0 means 32 MB.
  size_t block_cache_bytes = 0;
  /// Every memtable together: past it RocksDB flushes the largest. 0 means
  /// 64 MB.
  size_t memtable_bytes = 0;
  /// Appends are refused while the file system of `path` has less free
  /// space than this (plus the append), so that RocksDB itself never runs
  /// out of space: Debian's RocksDB is built with assertions, and a WAL
  /// write failing with ENOSPC aborts the process inside `Write`. The room
  /// is for memtable flushes and a new WAL. 0: no check.
  uint64_t min_free_bytes = uint64_t{64} << 20;
};

/// What the log holds in memory now (RocksDB's own figures).
struct log_memory {
  /// Bytes in the shared block cache (data, index and filter blocks).
  uint64_t block_cache = 0;
  /// Its capacity.
  uint64_t block_cache_capacity = 0;
  /// Bytes the open tables hold outside the block cache.
  uint64_t table_readers = 0;
  /// Bytes in memtables, active and awaiting their flush.
  uint64_t memtables = 0;
  /// The capacity of the block cache each open column family reads
  /// through (the shared one's, for every family).
  std::vector<uint64_t> family_caches;
};

/// One stored event of a job.
struct stored_event {
  uint64_t seq = 0;
  std::string bytes;
};

/// One entry of the cluster-wide order.
struct global_entry {
  uint64_t position = 0;
  std::string job_id;
  uint64_t seq = 0;
  std::string bytes;
};

/// A purge in progress. The cluster-wide order is examined in steps, so that
/// the single writer can interleave appends; nothing is removed until
/// `event_log::commit_purge`.
struct purge_plan {
  /// What to remove, ordered by job id.
  std::vector<purge_target> targets;
  /// Next position of the cluster-wide order to examine.
  uint64_t next_position = 1;
  /// Last position when the plan was made; the targets' events are all at
  /// or before it (a deleted job's history does not grow).
  uint64_t end_position = 0;
  /// Positions of the targets' events found so far.
  std::vector<uint64_t> positions;
  /// States of live targets just before their first kept event, stored with
  /// the removal (see `event_log::base`).
  std::vector<snapshot_record> bases;
  /// Finished incidents of live targets' removed events, stored with the
  /// removal.
  std::vector<incident_record> incidents;

  /// True once the whole order up to `end_position` has been examined.
  bool scanned() const {
    return next_position > end_position;
  }
};

/// The durable, append-only, per-job event log with a cluster-wide order,
/// snapshots and metadata, and what the retention keeps of removed events
/// (incidents and base states). Appends come from one writer (the journal);
/// reads are safe from any thread.
class event_log {
public:
  /// Schema version this code writes and reads.
  static constexpr uint32_t schema_version = 1;

  /// Opens (or creates) the log. Fails with a clear message when another
  /// process holds the directory, or when it was written by another schema.
  [[nodiscard]] static caf::expected<std::unique_ptr<event_log>>
  open(const event_log_options& opts);

  ~event_log();
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;

  /// Appends events and snapshots of any number of jobs as one atomic
  /// `WriteBatch` (one sync when the log syncs), assigning the events
  /// consecutive global positions in order, and in the same batch the
  /// records of fleet streams (see `fleet_records`).
  [[nodiscard]] caf::error append(const std::vector<log_record>& events,
                                  const std::vector<snapshot_record>& snapshots
                                  = {},
                                  const fleet_records& fleet = {});

  /// What a fleet stream holds: its latest snapshot, if any, and its events
  /// after it, in order.
  struct fleet_stream {
    std::optional<snapshot_record> snapshot;
    std::vector<stored_event> events;
  };

  /// The fleet stream `name` (empty when it was never written).
  [[nodiscard]] caf::expected<fleet_stream> read_fleet(const std::string& name)
    const;

  /// Makes every append so far durable (for the `batch` sync policy).
  [[nodiscard]] caf::error sync_wal();

  /// Up to `max` events of `job_id` with seq >= `from_seq`, in order.
  [[nodiscard]] caf::expected<std::vector<stored_event>>
  read(const std::string& job_id, uint64_t from_seq, size_t max) const;

  /// Calls `f` for every event of `job_id` with seq >= `from_seq`, in order;
  /// stops at the first error `f` returns.
  [[nodiscard]] caf::error
  for_each(const std::string& job_id, uint64_t from_seq,
           const std::function<caf::error(uint64_t, std::string_view)>& f)
    const;

  /// Up to `max` entries of the cluster-wide order from `from_position`.
  [[nodiscard]] caf::expected<std::vector<global_entry>>
  tail(uint64_t from_position, size_t max) const;

  /// The latest snapshot of `job_id`, if any.
  [[nodiscard]] caf::expected<std::optional<snapshot_record>>
  snapshot(const std::string& job_id) const;

  /// Sequence number of the first stored event of `job_id`, 0 when none.
  /// Above 1 once the retention removed the job's oldest events.
  [[nodiscard]] caf::expected<uint64_t> first_seq(const std::string& job_id)
    const;

  /// The state of `job_id` just before its first stored event, if the
  /// retention removed earlier events of the live job: the starting point
  /// for a past state older than the latest snapshot.
  [[nodiscard]] caf::expected<std::optional<snapshot_record>>
  base(const std::string& job_id) const;

  /// The incidents the retention kept of `job_id`'s removed events, in
  /// order of their first seq.
  [[nodiscard]] caf::expected<std::vector<incident_record>>
  incidents(const std::string& job_id) const;

  /// Stores the digests of jobs (see `job_digest`) in one write, each in
  /// place of the job's earlier one and only while its seq is the job's
  /// last event: a digest of an older state is left out. Returns how many
  /// were stored.
  [[nodiscard]] caf::expected<size_t>
  put_digests(const std::vector<digest_record>& xs);

  /// Stores the inspector's folds of jobs' histories (`JobHistoryRecord`
  /// bytes, see `storage/incident_codec`) in one write, each in place of the
  /// job's earlier one and only while its seq is the job's last event.
  /// Not synced: they are a cache, made durable by the next synced write.
  /// Returns how many were stored.
  [[nodiscard]] caf::expected<size_t>
  put_histories(const std::vector<digest_record>& xs);

  /// Every job id that has events, in key order.
  [[nodiscard]] caf::expected<std::vector<std::string>> job_ids() const;

  /// Sequence number of the last event of `job_id`, 0 when none.
  [[nodiscard]] caf::expected<uint64_t> last_seq(const std::string& job_id)
    const;

  /// Global position of the last appended event, 0 when none. Never goes
  /// back, also when the newest entries were purged or discarded.
  uint64_t last_position() const;

  /// Removes the record `seq` of `job_id` and its entry in the cluster-wide
  /// order: for an undecodable last record (a torn write) found at start-up,
  /// before any append. Returns whether an index entry was found.
  [[nodiscard]] caf::expected<bool> discard(const std::string& job_id,
                                            uint64_t seq);

  /// Starts a purge of `targets` (see `purge_plan`), storing `bases` and
  /// `incidents` of live targets with it.
  purge_plan plan_purge(std::vector<purge_target> targets,
                        std::vector<snapshot_record> bases = {},
                        std::vector<incident_record> incidents = {}) const;

  /// Examines up to `max` entries of the cluster-wide order for `plan`.
  [[nodiscard]] caf::error scan_purge(purge_plan& plan, size_t max) const;

  /// Removes what `plan` found, plus the targets' events (and, of deleted
  /// jobs, snapshots, incidents and base states), and stores the plan's
  /// bases and incidents, in one `WriteBatch`. Requires `plan.scanned()`.
  /// Refuses a live target whose latest snapshot does not lie after it.
  [[nodiscard]] caf::expected<purge_stats> commit_purge(const purge_plan& plan);

  /// How many times the log has been opened for writing, this time included.
  uint64_t incarnation() const;

  /// Directory of the database.
  const std::string& path() const;

  /// What the log holds in memory now.
  log_memory memory() const;

  /// After a failed write: asks RocksDB to leave its error state (it flushes
  /// the memtables and starts a new WAL), so that a transient failure (a
  /// full disk freed, a file-descriptor shortage) does not stop the log for
  /// good. Fails while the cause lasts.
  caf::error resume();

  /// Testing aid: every later append fails as an I/O error would, with
  /// `reason` in its message.
  void inject_write_failure(std::string reason);

  /// Reads many jobs in turn from one thread (replay) with one iterator per
  /// column family instead of one per call: creating a RocksDB iterator
  /// costs more than reading a short job. Sees the log as it was when the
  /// reader was made; must not outlive the log.
  class reader {
  public:
    explicit reader(const event_log& log);
    ~reader();
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;

    /// The latest snapshot of `job_id`, if any.
    [[nodiscard]] caf::expected<std::optional<snapshot_record>>
    snapshot(const std::string& job_id);

    /// Calls `f` for every event of `job_id` with seq >= `from_seq`, in
    /// order; stops at the first error `f` returns.
    [[nodiscard]] caf::error
    for_each(const std::string& job_id, uint64_t from_seq,
             const std::function<caf::error(uint64_t, std::string_view)>& f);

    /// The digest of `job_id` (see `put_digests`) if one is stored and the
    /// job's last event is still the very record it was taken at; none
    /// otherwise (also on a log without digests).
    [[nodiscard]] caf::expected<std::optional<std::string>>
    digest(const std::string& job_id);

    /// The stored fold of `job_id`'s history (see `put_histories`) and the
    /// seq it was taken at, if one is stored and the job's event at that
    /// seq is still the very record it was taken at (later events may
    /// follow it); none otherwise.
    [[nodiscard]] caf::expected<std::optional<snapshot_record>>
    history(const std::string& job_id);

    /// The base state of `job_id` (see `event_log::base`), if any.
    [[nodiscard]] caf::expected<std::optional<snapshot_record>>
    base(const std::string& job_id);

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
  };

private:
  struct impl;
  explicit event_log(std::unique_ptr<impl> p);
  // Digests, or with `histories` stored histories (see `put_histories`).
  caf::expected<size_t> put_cached(const std::vector<digest_record>& xs,
                                   bool histories);
  std::unique_ptr<impl> impl_;
};

} // namespace recoverd::storage
