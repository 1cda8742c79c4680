#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "actors/actors.hpp"
#include "actors/config.hpp"
#include "storage/event_log.hpp"

namespace recoverd {

/// State of the JOURNAL actor.
struct journal_state {
  /// One append waiting for the next write.
  struct pending_append {
    std::vector<log_record> events;
    std::vector<snapshot_record> snapshots;
    caf::typed_response_promise<uint64_t> promise;
    /// Records of fleet streams (the node registry's).
    fleet_records fleet = {};
  };

  /// One purge of old history, prepared and scanned in steps.
  struct pending_purge {
    /// Deleted jobs whose whole history goes.
    std::vector<purge_target> deleted;
    /// Live jobs whose old events may go (see `storage::plan_live_cut`),
    /// examined from `next_live` on while the purge is prepared.
    std::vector<std::string> live;
    size_t next_live = 0;
    /// Only events decided before this (Unix ms) are removed of live jobs.
    int64_t older_than_ms = 0;
    /// What the live jobs examined so far give up and keep.
    std::vector<purge_target> live_targets;
    std::vector<snapshot_record> bases;
    std::vector<incident_record> incidents;
    /// Set once every live job is examined and `plan` is made.
    bool planned = false;
    storage::purge_plan plan;
    caf::typed_response_promise<purge_stats> promise;
  };

  storage::event_log* log = nullptr;
  journal_config cfg;
  std::vector<pending_append> pending;
  bool commit_scheduled = false;
  /// The scheduled commit already gave later appends one more turn.
  bool commit_deferred = false;
  /// Set when a write failed: appends are refused with it until the log
  /// resumes (tried at most every `cfg.retry_interval`).
  caf::error failure;
  /// When the journal next asks the log to resume.
  std::chrono::steady_clock::time_point retry_at;
  journal_stats stats;
  /// Where durable events go for live watchers; may be unset.
  event_hub_actor hub;
  /// The hub's watchers; null: publish always.
  watcher_gauge watching;
  /// Purges in arrival order; the front one is in progress.
  std::deque<pending_purge> purges;

  static inline const char* name = "journal";
};

/// The JOURNAL behaviour. Run it detached: it blocks in fsync.
/// @param log The event log; outlives the actor.
journal_actor::behavior_type
journal(journal_actor::stateful_pointer<journal_state> self,
        storage::event_log* log, journal_config cfg);

} // namespace recoverd
