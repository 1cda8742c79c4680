#pragma once

/// Leader election and fencing on an etcd lease (issue #14).
///
/// A replica campaigns by creating the leader key, attached to its lease,
/// only while the key is absent (`CreateRevision == 0`); the key's value is
/// the replica's advertised address. The key's create revision is the
/// leader's *epoch*: it is unique to one term, grows from term to term, and
/// every append the leader makes is fenced by it
/// (`CreateRevision(leader key) == epoch`), so a replica that lost its term
/// without noticing (paused past its TTL) writes nothing.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "storage/etcd_client.hpp"

namespace recoverd::storage::etcd {

/// How a replica campaigns.
struct election_options {
  /// The leader key, e.g. `/recoverd/<cluster>/leader`.
  std::string key;
  /// What the leader key holds: the replica's advertised agent address.
  std::string value;
  /// Lease TTL; whole seconds, at least 2 s (etcd's shortest lease with its
  /// default timing). The lease is renewed every TTL/3.
  std::chrono::milliseconds ttl{std::chrono::seconds(5)};
};

/// Checks election options: a key, a value, a TTL etcd accepts.
[[nodiscard]] caf::error validate(const election_options& opts);

/// One replica's side of the election. Campaigning blocks the calling
/// thread (run it on a thread of its own); renewing the lease and watching
/// the leader key run on threads this object owns.
class leader_election {
public:
  /// Called once per lost term, from an internal thread, with an
  /// `errc::deposed` error naming why: the lease expired or could not be
  /// renewed in time, the leader key was deleted or taken over, or a fenced
  /// transaction found another term.
  using loss_handler = std::function<void(caf::error)>;

  /// An election over `c` (not started: see `campaign`).
  leader_election(std::shared_ptr<client> c, election_options opts,
                  loss_handler on_loss = {});

  /// Stops the internal threads; does not resign (the lease runs out).
  ~leader_election();

  leader_election(const leader_election&) = delete;
  leader_election& operator=(const leader_election&) = delete;

  /// One attempt: true when this replica became (or already is) the
  /// leader, false when another holds the key.
  [[nodiscard]] caf::expected<bool> try_campaign();

  /// Campaigns until this replica leads or `timeout` passes (then
  /// `errc::storage_failure`, "still a standby"): tries, and while another
  /// holds the key waits for the key's deletion (watched) before it tries
  /// again. `stop` (when set) ends the wait early when it returns true.
  [[nodiscard]] caf::error
  campaign(std::chrono::milliseconds timeout,
           const std::function<bool()>& stop = {});

  /// True while this replica leads: it won, and its lease has not run out
  /// by the local clock.
  bool leading() const;

  /// The current term's epoch (the leader key's create revision), 0 when
  /// not leading.
  int64_t epoch() const;

  /// Who leads now, as etcd says: the leader key, none when vacant.
  [[nodiscard]] caf::expected<std::optional<key_value>> leader();

  /// Runs `t` only if this replica's term still holds: adds
  /// `Compare(CreateRevision(key) == epoch)`. Fails with `errc::deposed`
  /// (and steps down) when the term is over; then nothing of `t` was
  /// written. With compares of its own, a `t` whose compares fail while the
  /// term holds returns `succeeded == false`.
  [[nodiscard]] caf::expected<txn_result> fenced(txn t);

  /// Ends this replica's term: revokes its lease, deleting the leader key.
  [[nodiscard]] caf::error resign();

  /// Ends this replica's term because it can no longer vouch for what it
  /// wrote (an append whose outcome is unknown): reports `why` as a lost
  /// term (`loss_handler`), then resigns as far as etcd can be reached.
  void give_up(caf::error why);

  /// The options.
  const election_options& options() const {
    return opts_;
  }

private:
  /// Starts renewing `lease_id` and watching the key for `epoch`.
  void start_term(int64_t lease_id, int64_t epoch,
                  std::chrono::steady_clock::time_point expires);

  /// Ends the term `epoch` (if still current) and reports `why`.
  void step_down(int64_t epoch, caf::error why);

  /// Stops and joins the threads of a finished term.
  void reap();

  void renew_loop(int64_t lease_id, int64_t epoch);

  std::shared_ptr<client> client_;
  election_options opts_;
  loss_handler on_loss_;

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  int64_t lease_ = 0;
  int64_t epoch_ = 0;
  bool leading_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point expires_;
  std::thread renewer_;
  std::unique_ptr<watcher> key_watch_;
};

} // namespace recoverd::storage::etcd
