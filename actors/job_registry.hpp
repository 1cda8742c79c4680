#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/actors.hpp"
#include "actors/config.hpp"
#include "actors/model/job_model.hpp"

namespace recoverd {

namespace storage {
class event_log;
} // namespace storage

/// State of the JOB REGISTRY actor.
struct job_registry_state {
  registry_config cfg;
  journal_actor journal;
  /// For the sequence number a re-created job continues from (read only).
  const storage::event_log* log = nullptr;
  /// Every live job with an actor.
  std::unordered_map<std::string, job_actor> jobs;
  /// Live jobs start-up left undecoded, by id: each gets its actor, replayed
  /// from the log, when it is first asked for.
  std::map<std::string, job_digest> dormant;
  /// Dormant jobs whose log failed to replay when asked for, with why: their
  /// requests are refused, and the registry's status names them.
  std::map<std::string, std::string> unreplayable;
  /// Jobs registered for recovery (counted against the cap).
  std::set<std::string> registered;
  /// Registrations on their way to a job (reserved against the cap).
  size_t pending_registrations = 0;
  /// Jobs that existed and were deleted (Register answers 402 for them),
  /// as long as their history is retained.
  std::map<std::string, deleted_job> deleted;
  /// Jobs whose history a purge is removing right now; PutJob for them is
  /// refused until it is done.
  std::set<std::string> purging;
  /// A retention sweep is running (the next one waits for it).
  bool sweeping = false;
  /// Who created each job, for the jobs created by an identity.
  std::unordered_map<std::string, std::string> owner_of;
  /// Jobs owned per identity (a PutJob's `put_origin::max_jobs` caps it).
  std::map<std::string, size_t> owned;
  /// Where the edge looks jobs up; kept equal to `jobs` when set.
  job_directory_ptr directory;

  static inline const char* name = "job_registry";
};

/// The JOB REGISTRY behaviour.
/// @param initial Jobs replayed from the log at start-up.
/// @param dormant Jobs start-up left undecoded (requires `log`).
/// @param deleted Deleted jobs found in the log.
/// @param log Read-only access for re-created jobs; may be null in tests.
job_registry_actor::behavior_type
job_registry(job_registry_actor::stateful_pointer<job_registry_state> self,
             registry_config cfg, journal_actor journal,
             std::vector<initial_job> initial, std::vector<job_digest> dormant,
             std::vector<deleted_job> deleted, const storage::event_log* log);

} // namespace recoverd
