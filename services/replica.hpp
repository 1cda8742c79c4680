#pragma once

/// One replica of `--store etcd` (issue #14): a standby that archives the
/// etcd log and campaigns, then the leader that serves with etcd as the
/// authority of its journal, until a signal or the loss of its term.

#include <chrono>
#include <csignal>
#include <string>

#include "services/app.hpp"
#include "storage/etcd_client.hpp"

namespace recoverd {

/// How a replica reaches etcd and campaigns.
struct replica_options {
  /// The etcd members and TLS files.
  storage::etcd::client_options etcd;
  /// The key prefix: `/recoverd/<cluster>/`.
  std::string cluster = "recoverd";
  /// The leader lease's TTL (whole seconds, at least 2 s).
  std::chrono::milliseconds lease_ttl{std::chrono::seconds(5)};
  /// The agent address the leader key holds; empty: the agent listener's.
  std::string advertise;
};

/// How a replica's run ended.
enum class replica_end {
  stopped, ///< By SIGINT or SIGTERM (a leader resigned its term).
  deposed, ///< Its term was lost while it led: re-join as a standby.
  failed,  ///< It could not start (the message was printed).
};

/// Checks replica options before anything starts.
[[nodiscard]] caf::error validate(const replica_options& opts);

/// Runs one replica with the app options `opts` until one of `signals`
/// arrives or its term is lost. Prints the listeners' addresses as the
/// single-node daemon does ("recoverd: listening on ...") once the standby
/// serves, and "recoverd: leading on ..." once it leads.
replica_end run_replica(app_options opts, const replica_options& replica,
                        const sigset_t& signals);

} // namespace recoverd
