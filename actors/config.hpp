#pragma once

/// Configuration structs of the actors, one per component, with the
/// reference's defaults (spec §1.5). Read once in `main` and passed down.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/error.hpp>

#include <vector>

#include "actors/model/node_registry.hpp"
#include "actors/model/timeouts.hpp"

namespace recoverd {

namespace storage {
class authority;
} // namespace storage

/// Configuration of one job actor.
struct job_config {
  /// The protocol's waits.
  timeouts waits;
  /// Write a snapshot of the job's state every this many events (0: never);
  /// a large one waits longer (see `snapshot_due`).
  uint64_t snapshot_every = 20;
  /// Messages a stream may have queued before it is closed with
  /// RESOURCE_EXHAUSTED (enforced by the stream implementation).
  size_t stream_buffer = 1'024;
  /// Wall clock in Unix milliseconds; tests pin it.
  std::function<int64_t()> clock;
  /// Makes the uuid of a new flow or signal; when empty, the reference's
  /// form from the clock and a random source. The simulator pins it, so
  /// that a seed replays the same run.
  std::function<std::string()> uuid;
  /// Told the faults and stress verdicts of the job's events once they are
  /// durable (the fleet's node registry); none when empty.
  std::function<void(std::vector<node_observation>)> observe_nodes = nullptr;
};

/// Configuration of the node registry.
struct nodes_config {
  /// Scoring and quarantine.
  node_registry_config scoring;
  /// Write a snapshot of the registry (and remove the events it folds)
  /// every this many events (> 0), so the stream stays bounded; a large one
  /// waits longer (see `snapshot_due`).
  uint64_t snapshot_every = 256;
  /// Wall clock in Unix milliseconds; tests pin it.
  std::function<int64_t()> clock = nullptr;
};

/// Configuration of the job registry.
struct registry_config {
  /// Most jobs known at once and most jobs registered for recovery.
  size_t max_jobs = 10'000;
  /// How long history is kept: a deleted job's whole history (and Register
  /// answers 402 for it meanwhile), and a live job's events before its
  /// latest snapshot; then they are removed. Incidents are kept.
  millis retention{std::chrono::hours{24 * 30}};
  /// How often history is checked against the retention (also once at
  /// start-up).
  millis retention_sweep{std::chrono::hours{1}};
  /// Passed to every job actor.
  job_config job;
};

/// When the journal makes appends durable.
enum class sync_policy {
  /// Sync every batch before replying (durable against power loss).
  always,
  /// Reply after the write, sync the WAL every `sync_interval` (durable
  /// against a process crash; up to one interval lost on power loss).
  batch,
};

/// Configuration of the journal.
struct journal_config {
  sync_policy sync = sync_policy::always;
  millis sync_interval{100};
  /// After a failed write, how long the journal refuses before it asks the
  /// log to resume (a transient failure must not stop it for good).
  millis retry_interval{500};
  /// Told `false` when writes start failing and `true` when they work
  /// again (readiness, gRPC health); called on the journal's thread.
  std::function<void(bool)> on_health = nullptr;
  /// Where each group commit is made durable before the local log takes it
  /// (etcd with `--store etcd`); none: the local log is the authority.
  std::shared_ptr<storage::authority> authority = nullptr;
};

/// Wall clock in Unix milliseconds.
int64_t system_clock_ms();

/// Checks a job configuration.
caf::error validate(const job_config& cfg);

/// Checks a registry configuration.
caf::error validate(const registry_config& cfg);

/// Checks a node registry configuration.
caf::error validate(const nodes_config& cfg);

/// Checks a journal configuration.
caf::error validate(const journal_config& cfg);

/// Parses "sync" policy names: "always" or "batch".
bool parse_sync_policy(const std::string& text, sync_policy& out);

} // namespace recoverd
