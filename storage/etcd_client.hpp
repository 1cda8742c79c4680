#pragma once

/// A small synchronous client of etcd's v3 API (KV, Lease and Watch) for
/// the etcd store (issue #14). Only `storage/` uses it; its header includes
/// no generated etcd code.
///
/// Calls block the calling thread until etcd answers (or the failover budget
/// is spent), so they run on a thread of their own (later a detached actor),
/// never on a gRPC callback thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace recoverd::storage::etcd {

/// How to reach an etcd cluster.
struct client_options {
  /// Client URLs of the members, tried in turn: `host:port`,
  /// `http://host:port` or `https://host:port`.
  std::vector<std::string> endpoints;
  /// PEM file of the CA that signed the members' certificates. TLS is used
  /// when this is set (or an endpoint is `https://`); empty: the system
  /// roots.
  std::string ca_file;
  /// PEM file of the client certificate, for members that require client
  /// certificates; set with `key_file` or not at all.
  std::string cert_file;
  /// PEM file of the client certificate's key.
  std::string key_file;
  /// Deadline of one RPC on one member.
  std::chrono::milliseconds rpc_timeout{std::chrono::seconds(2)};
  /// How long one call keeps trying the members while they are unavailable
  /// (no member reachable, or the cluster between leaders).
  std::chrono::milliseconds failover_budget{std::chrono::seconds(15)};
};

/// Checks options before a client is made: at least one endpoint, well
/// formed, and TLS files that exist.
[[nodiscard]] caf::error validate(const client_options& opts);

/// One key as etcd stores it.
struct key_value {
  /// The key.
  std::string key;
  /// Its value.
  std::string value;
  /// Revision of the key's creation (0 for an absent key).
  int64_t create_revision = 0;
  /// Revision of the key's last change.
  int64_t mod_revision = 0;
  /// Number of changes since creation.
  int64_t version = 0;
  /// Lease the key is attached to, 0 for none.
  int64_t lease = 0;
};

/// What a range read returned.
struct range_result {
  /// The keys found, in key order.
  std::vector<key_value> kvs;
  /// True when `limit` cut the result short.
  bool more = false;
  /// Revision of the store when it was read.
  int64_t revision = 0;
};

/// A range of keys: `[key, range_end)`; an empty `range_end` means the one
/// key.
struct key_range {
  /// The first key.
  std::string key;
  /// The first key after the range; empty: the range is `key` alone.
  std::string range_end;
};

/// The end of the range of every key that starts with `prefix`.
std::string prefix_end(std::string prefix);

/// What a compare in a transaction looks at.
enum class compare_target : uint8_t {
  create_revision, ///< The key's create revision (0: absent).
  mod_revision,    ///< The key's last-change revision.
  value,           ///< The key's value.
  version,         ///< The key's number of changes.
};

/// How a compare in a transaction relates the key to its operand.
enum class compare_result : uint8_t {
  equal,     ///< key == operand
  not_equal, ///< key != operand
  greater,   ///< key > operand
  less,      ///< key < operand
};

/// One condition of a transaction.
struct compare {
  /// The key compared.
  std::string key;
  /// What of the key is compared.
  compare_target target = compare_target::create_revision;
  /// How the key must relate to the operand (key `result` operand).
  compare_result result = compare_result::equal;
  /// Operand of revision and version compares.
  int64_t number = 0;
  /// Operand of value compares.
  std::string value;
};

/// One write of a transaction: a put, or a delete when `is_delete`.
struct txn_op {
  /// True for a delete, false for a put.
  bool is_delete = false;
  /// The key put or deleted (the first key of a deleted range).
  std::string key;
  /// Value of a put.
  std::string value;
  /// Lease of a put, 0 for none.
  int64_t lease = 0;
  /// End of a delete's range; empty: the one key.
  std::string range_end;
};

/// A transaction: if every compare holds, the `then` writes, else the
/// `otherwise` writes, atomically.
class txn {
public:
  /// Adds a compare on `key`'s create revision.
  txn& if_create_revision(std::string key, compare_result r, int64_t rev);

  /// Adds a compare on `key`'s last-change revision.
  txn& if_mod_revision(std::string key, compare_result r, int64_t rev);

  /// Adds a compare on `key`'s value.
  txn& if_value(std::string key, compare_result r, std::string value);

  /// Adds a put to the success branch.
  txn& then_put(std::string key, std::string value, int64_t lease = 0);

  /// Adds a delete of `key` (or of `[key, range_end)`) to the success
  /// branch.
  txn& then_delete(std::string key, std::string range_end = {});

  /// Adds a put to the failure branch.
  txn& else_put(std::string key, std::string value, int64_t lease = 0);

  /// The compares.
  const std::vector<compare>& compares() const {
    return compares_;
  }

  /// The success branch.
  const std::vector<txn_op>& success() const {
    return success_;
  }

  /// The failure branch.
  const std::vector<txn_op>& failure() const {
    return failure_;
  }

  /// Bytes of keys and values (an estimate of the request's size).
  size_t payload_bytes() const {
    return payload_bytes_;
  }

private:
  std::vector<compare> compares_;
  std::vector<txn_op> success_;
  std::vector<txn_op> failure_;
  size_t payload_bytes_ = 0;
};

/// What a transaction did.
struct txn_result {
  /// True when every compare held (the success branch ran).
  bool succeeded = false;
  /// Revision of the store after the transaction.
  int64_t revision = 0;
};

/// A lease etcd granted.
struct lease {
  /// The lease's id, for keys and renewals.
  int64_t id = 0;
  /// Seconds etcd gave it.
  int64_t ttl_s = 0;
};

/// One change seen by a watch.
struct watch_event {
  /// True for a delete (the key's lease expired, or it was deleted).
  bool is_delete = false;
  /// The key after the change (of a delete: its key and revision only).
  key_value kv;
};

class client;

/// A running watch of a key range: a thread reads etcd's stream and calls
/// the handlers. Survives a member's loss by resuming on another member from
/// the revision after the last one it delivered. Stops on destruction.
class watcher {
public:
  /// Called with each batch of events, in revision order.
  using event_handler = std::function<void(std::vector<watch_event>)>;
  /// Called once when the watch ends for good: history it needed was
  /// compacted (`errc::history_purged`; the message names the compact
  /// revision), or no member could be reached within the failover budget.
  using error_handler = std::function<void(caf::error)>;

  ~watcher();
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;

  /// Stops the watch and waits for its thread; no handler runs after it.
  void stop();

  /// True once etcd confirmed the watch (its first events may follow).
  bool created() const;

private:
  friend class client;
  struct impl;
  watcher() = default;
  // Shared with the thread, which may outlive a watcher stopped from one
  // of its own handlers.
  std::shared_ptr<impl> impl_;
  std::thread thread_;
};

/// The client. Holds one channel per member and remembers the last member
/// that answered; a call that finds a member UNAVAILABLE (down, or without a
/// leader) tries the next, with a short backoff, until the failover budget
/// is spent. Thread-safe: several threads may call it at once.
class client : public std::enable_shared_from_this<client> {
public:
  /// Makes a client (no connection is attempted yet).
  [[nodiscard]] static caf::expected<std::shared_ptr<client>>
  make(client_options opts);

  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Reads `[key, range_end)` (or the one key), at most `limit` keys (0:
  /// all), in key order, linearizably.
  [[nodiscard]] caf::expected<range_result>
  range(const key_range& r, int64_t limit = 0);

  /// Reads one key; none when absent.
  [[nodiscard]] caf::expected<std::optional<key_value>>
  get(const std::string& key);

  /// Puts one key.
  [[nodiscard]] caf::expected<int64_t>
  put(const std::string& key, const std::string& value, int64_t lease = 0);

  /// Runs a transaction. A transaction whose outcome is unknown (the member
  /// went away after receiving it) may be retried on another member, so
  /// transactions must be safe to apply twice: puts of the same values, or
  /// guarded by compares.
  [[nodiscard]] caf::expected<txn_result> commit(const txn& t);

  /// Grants a lease of `ttl_s` seconds.
  [[nodiscard]] caf::expected<lease> grant(int64_t ttl_s);

  /// Renews a lease once; returns its new TTL in seconds, 0 when it had
  /// already expired (or was revoked). Tries the members for at most
  /// `budget` (capped by the failover budget): a renewal that comes too
  /// late is no renewal.
  [[nodiscard]] caf::expected<int64_t>
  keep_alive(int64_t lease_id, std::chrono::milliseconds budget
                               = std::chrono::milliseconds::max());

  /// Revokes a lease, deleting its keys. Revoking an expired lease is not
  /// an error.
  [[nodiscard]] caf::error revoke(int64_t lease_id);

  /// Watches `r` from `start_revision` (0: from now) on a thread of its own.
  /// `on_error` is called at most once, and then the watch has ended.
  [[nodiscard]] caf::expected<std::unique_ptr<watcher>>
  watch(const key_range& r, int64_t start_revision,
        watcher::event_handler on_events, watcher::error_handler on_error);

  /// Compacts the history up to `revision` (testing and retention).
  [[nodiscard]] caf::error compact(int64_t revision);

  /// The options it was made with.
  const client_options& options() const {
    return opts_;
  }

  /// How many times a call moved on to another member.
  uint64_t failovers() const {
    return failovers_.load();
  }

private:
  friend class watcher;
  struct impl;
  explicit client(client_options opts);

  client_options opts_;
  std::unique_ptr<impl> impl_;
  std::atomic<uint64_t> failovers_{0};
};

} // namespace recoverd::storage::etcd
