#pragma once

/// The replicated store of `--store etcd` (issue #14): etcd is the
/// authority for every record the journal writes, and each replica keeps a
/// local RocksDB `event_log` as its archive (the leader writes it after
/// etcd acknowledged; a standby fills it from a watch).
///
/// Every kind of record is a stream of the fenced `etcd_log`: a job's
/// events under the job id; its snapshots, the fleet streams' events and
/// their snapshots under `<kind>/<name>`. A job id never holds a `/` (the
/// model refuses it), so no job's stream can be mistaken for another kind.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "storage/authority.hpp"
#include "storage/etcd_client.hpp"
#include "storage/etcd_leader.hpp"
#include "storage/etcd_log.hpp"
#include "storage/event_log.hpp"
#include "storage/records.hpp"
#include "storage/replay.hpp"

namespace recoverd::storage::etcd {

/// What a stream of the etcd log holds.
enum class record_kind : uint8_t {
  event,          ///< A job's events.
  snapshot,       ///< A job's snapshots.
  fleet_event,    ///< A fleet stream's events.
  fleet_snapshot, ///< A fleet stream's snapshots.
};

/// The etcd stream of records of kind `kind` of `name` (a job or a fleet
/// stream).
std::string stream_of(record_kind kind, const std::string& name);

/// A record read back from etcd.
struct etcd_record {
  record_kind kind = record_kind::event;
  /// The job or fleet stream.
  std::string name;
  uint64_t seq = 0;
  std::string bytes;
};

/// Parses an event key of `keys` (and its value) back into a record; none
/// for any other key of the cluster (the leader key, meta keys).
std::optional<etcd_record> parse_record(const layout& keys,
                                        const std::string& key,
                                        std::string value);

/// The key under which replica `replica` says how far its archive reaches
/// (the etcd revision it holds everything up to).
std::string archived_key(const layout& keys, const std::string& replica);

/// The authority of `--store etcd`: one fenced append of every record, and
/// the bounding of etcd's log. Once a snapshot of a stream is stored and
/// every archive that says how far it reaches holds it, the stream's older
/// events and snapshots go from etcd (the archives keep them): etcd holds
/// each stream's latest snapshot and what came after it.
class etcd_authority : public authority {
public:
  /// Appends through `log` and trims through `election`, both reading and
  /// writing the keys of `keys` over `c`; `log` and `election` must outlive
  /// it. Trims run at most every `trim_interval` (zero: after every
  /// commit), compactions every `compact_interval`.
  etcd_authority(etcd_log& log, leader_election& election,
                 std::shared_ptr<client> c,
                 std::chrono::milliseconds trim_interval
                 = std::chrono::seconds(1),
                 std::chrono::milliseconds compact_interval
                 = std::chrono::minutes(1));

  [[nodiscard]] caf::error commit(const std::vector<log_record>& events,
                                  const std::vector<snapshot_record>& snapshots,
                                  const fleet_records& fleet) override;

  /// Removes what every archive holds and a later snapshot covers; the
  /// number of streams trimmed. Fenced: `errc::deposed` once the term is
  /// over.
  [[nodiscard]] caf::expected<size_t> trim();

  /// Compacts etcd's revision history up to the revision every archive
  /// that marks its reach has passed (the current one when none does), so
  /// that no follower's watch loses a change it still needs; the revision
  /// compacted to, 0 when there was nothing to compact.
  [[nodiscard]] caf::expected<int64_t> compact_history();

  /// Snapshots whose older records still wait for the archives.
  size_t pending_trims() const {
    return pending_.size();
  }

private:
  /// A stored snapshot: once every archive holds `revision`, the streams'
  /// records before `seq` may go.
  struct pending_trim {
    std::string snapshots; ///< The snapshot's stream.
    std::string events;    ///< The stream of the events it folds.
    uint64_t seq = 0;
    int64_t revision = 0;
  };

  etcd_log& log_;
  leader_election& election_;
  std::shared_ptr<client> client_;
  /// How far every marking archive reaches (int64 max: none marks), and
  /// the store's revision when read.
  caf::expected<std::pair<int64_t, int64_t>> reach();

  std::chrono::milliseconds trim_interval_;
  std::chrono::milliseconds compact_interval_;
  std::chrono::steady_clock::time_point last_trim_;
  std::chrono::steady_clock::time_point last_compact_;
  int64_t compacted_ = 0;
  std::vector<pending_trim> pending_;
};

/// Keeps a local log in step with etcd: reads everything the cluster's log
/// holds, then watches it, and appends to `archive` each record the archive
/// does not have yet (by seq: a record seen twice is stored once).
class archive_follower {
public:
  /// Follows the log of `keys` through `c` into `archive`, which must
  /// outlive it. With a `replica` name, says how far the archive reaches
  /// under `archived_key` (on a lease of its own, so that a replica gone
  /// for good holds nothing back), for the leader's trimming.
  archive_follower(std::shared_ptr<client> c, layout keys, event_log& archive,
                   std::string replica = {});

  /// Stops following.
  ~archive_follower();

  archive_follower(const archive_follower&) = delete;
  archive_follower& operator=(const archive_follower&) = delete;

  /// Reads what etcd holds now into the archive, then starts the watch.
  [[nodiscard]] caf::error start();

  /// Stops the watch and reads what etcd holds now into the archive: once
  /// this replica leads, nobody else writes, so the archive is complete.
  [[nodiscard]] caf::error catch_up();

  /// The error that ended the watch, if it ended.
  caf::error failure() const;

  /// The jobs as the archive holds them, folded as their records arrived
  /// (hot standby): what a replica taking the lead starts from instead of
  /// replaying its archive. Call after `catch_up`. A job whose records did
  /// not arrive in order (the archive started at a snapshot, a deleted job
  /// put again) is replayed from the archive instead.
  [[nodiscard]] caf::expected<replay_result> take_jobs();

  /// Jobs kept live, and of those the ones `take_jobs` will replay.
  std::pair<size_t, size_t> live_jobs() const;

  /// Events folded into the live jobs as they arrived.
  uint64_t folded_events() const;

  /// Stops the watch; no append runs after it returns.
  void stop();

  /// The revision up to which the archive holds etcd's log.
  int64_t archived_revision() const;

  /// Records appended to the archive so far.
  uint64_t archived_records() const;

private:
  caf::error archive(std::vector<etcd_record> records, int64_t revision);

  /// Reads the whole log once into the archive; its revision.
  caf::expected<int64_t> read_all();

  /// Folds what the archive just stored into the live jobs.
  void fold(const std::vector<log_record>& events);

  /// Renews the mark's lease and writes the mark, every second.
  void mark_loop();

  /// Writes the mark when the archive moved on.
  void publish();

  std::shared_ptr<client> client_;
  layout keys_;
  event_log& archive_;
  std::string replica_;
  std::unique_ptr<watcher> watch_;
  std::thread marker_;
  std::condition_variable marker_cv_;
  bool stopping_ = false;
  int64_t lease_ = 0;
  int64_t published_ = 0;
  /// The live jobs: every job of the archive, as its events fold.
  std::map<std::string, job_model> jobs_;
  /// Jobs to replay from the archive at `take_jobs`.
  std::set<std::string> stale_;
  uint64_t folded_ = 0;
  bool loaded_ = false;
  mutable std::mutex mtx_;
  int64_t revision_ = 0;
  uint64_t records_ = 0;
  caf::error failure_;
};

} // namespace recoverd::storage::etcd
