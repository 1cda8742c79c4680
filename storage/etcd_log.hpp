#pragma once

/// The recovery-critical log in etcd (issue #14): fenced, group-committed
/// appends of encoded events, and reading a job's events back.
///
/// Key layout under `/recoverd/<cluster>/` (readable with `etcdctl`):
///
/// - `leader`: the leader key (see `storage/etcd_leader.hpp`);
/// - `log/<job>/<seq>`: one event, the seq as 20 decimal digits so keys sort
///   by seq;
/// - `meta/<job>`: `<last seq> <epoch>`, written with every append of the
///   job: the job's last event and the epoch of the term that wrote it.
///
/// `<job>` is the job id with `%`, `/` and bytes outside printable ASCII
/// percent-encoded, so that no job's prefix is another's.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "storage/etcd_client.hpp"
#include "storage/etcd_leader.hpp"
#include "storage/event_log.hpp"
#include "storage/records.hpp"

namespace recoverd::storage::etcd {

/// Where a cluster's keys live.
class layout {
public:
  /// The keys of cluster `cluster` (see `validate_cluster`).
  explicit layout(std::string cluster);

  /// The leader key.
  std::string leader_key() const;

  /// The prefix of every event key of `job_id`.
  std::string job_prefix(const std::string& job_id) const;

  /// The key of event `seq` of `job_id`.
  std::string event_key(const std::string& job_id, uint64_t seq) const;

  /// The meta key of `job_id`.
  std::string meta_key(const std::string& job_id) const;

  /// The prefix of every key of the cluster.
  const std::string& root() const {
    return root_;
  }

  /// `job_id` as it appears in keys.
  static std::string encode_job(const std::string& job_id);

private:
  std::string root_;
};

/// Checks a cluster name: 1 to 64 of `[A-Za-z0-9._-]`.
[[nodiscard]] caf::error validate_cluster(const std::string& cluster);

/// A job's meta key, decoded.
struct job_meta {
  /// Seq of the job's last stored event.
  uint64_t last_seq = 0;
  /// Epoch of the term that stored it.
  int64_t epoch = 0;
};

/// etcd's limits on one transaction (its defaults: `--max-txn-ops 128`,
/// `--max-request-bytes 1.5 MiB`).
struct txn_limits {
  /// Writes per transaction.
  size_t max_ops = 128;
  /// Estimated encoded size of a transaction's request.
  size_t max_bytes = size_t{3} << 19;
};

/// What an append did.
struct append_result {
  /// Transactions it took.
  size_t txns = 0;
  /// Revision of the store after its last transaction.
  int64_t revision = 0;
};

/// The log: appends go through the election's fence.
class etcd_log {
public:
  /// A log over `c` with the keys of `keys`, fenced by `election`, which
  /// must outlive it.
  etcd_log(std::shared_ptr<client> c, leader_election& election, layout keys,
           txn_limits limits = {});

  /// The transactions that append `batch` in epoch `epoch`, unfenced: each
  /// holds whole jobs' shares of the batch (their events and meta key) as
  /// long as they fit the limits; a job's share that does not fit in one
  /// is split in order, each part with its own meta. Each part is guarded
  /// by its first event's key being absent. Fails with
  /// `errc::invalid_argument` for an empty job id, a zero seq, seqs of a
  /// job not increasing in the batch, or one event above the size limit.
  [[nodiscard]] caf::expected<std::vector<txn>>
  plan(const std::vector<log_record>& batch, int64_t epoch) const;

  /// Appends `batch` durably (acknowledged by an etcd quorum) in as few
  /// fenced transactions as `plan` makes, in order. Fails with
  /// `errc::deposed` when this replica's term is over: then the failing
  /// transaction and the ones after it wrote nothing. Each event key is
  /// written once: a transaction whose events are already stored with the
  /// same bytes (a retry) counts as done and writes nothing; with other
  /// bytes it fails with `errc::conflict`. A batch of several
  /// transactions is not atomic: after any failure, earlier ones may be
  /// stored, and appending the same batch again completes it.
  [[nodiscard]] caf::expected<append_result>
  append(const std::vector<log_record>& batch);

  /// Up to `max` events of `job_id` with seq >= `from_seq`, in order.
  [[nodiscard]] caf::expected<std::vector<stored_event>>
  read(const std::string& job_id, uint64_t from_seq, size_t max) const;

  /// The meta key of `job_id`, none when the job has no events.
  [[nodiscard]] caf::expected<std::optional<job_meta>>
  meta(const std::string& job_id) const;

  /// The key layout.
  const layout& keys() const {
    return keys_;
  }

private:
  std::shared_ptr<client> client_;
  leader_election& election_;
  layout keys_;
  txn_limits limits_;
};

/// Group commit: callers on many threads hand in events and wait; one
/// thread appends everything handed in while the previous append was in
/// flight as one batch, and answers every caller of the batch once etcd
/// acknowledged it (or with the batch's error).
class group_committer {
public:
  /// Starts the committing thread over `log`, which must outlive it.
  explicit group_committer(etcd_log& log, size_t max_batch = 4096);

  /// Answers the callers still waiting with `errc::shutting_down`, stops.
  ~group_committer();

  group_committer(const group_committer&) = delete;
  group_committer& operator=(const group_committer&) = delete;

  /// Hands in `records`; the future holds the outcome of their append.
  std::future<caf::error> submit(std::vector<log_record> records);

  /// Batches appended so far.
  uint64_t batches() const;

private:
  struct pending {
    std::vector<log_record> records;
    std::promise<caf::error> done;
  };

  void run();

  etcd_log& log_;
  size_t max_batch_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<pending> queue_;
  bool stopping_ = false;
  uint64_t batches_ = 0;
  std::thread thread_;
};

} // namespace recoverd::storage::etcd
