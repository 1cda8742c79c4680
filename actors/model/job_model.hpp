#pragma once

/// The pure core of a job: its state as a fold of its events (`apply`) and
/// what an input causes (`decide`). No I/O, no clock, no randomness: the job
/// actor stamps time and sequence numbers on the events `decide` returns.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/model/error.hpp"

#include "actors/model/fault_center.hpp"
#include "actors/model/recovery.hpp"
#include "actors/model/recovery_delta.hpp"
#include "actors/model/snapshot_policy.hpp"
#include "actors/model/topology.hpp"
#include "actors/model/types.hpp"

namespace recoverd {

/// One step of the recovery machine, as an event: its input, what it
/// wrote, and what it changed in the machine's state (not the whole state:
/// snapshots hold that).
struct flow_stepped : step_output {
  /// The input the step received.
  flow_input input;
  /// What the step changed.
  recovery_delta change;
};

/// What an event says happened.
using event_body
  = std::variant<job_put, job_deleted, annotations_changed, job_inited,
                 job_registered, subscriber_attached, subscriber_detached,
                 device_faults_reported, flow_stepped>;

/// One event of one job: its sequence number, when it was decided, and what
/// happened.
struct event {
  uint64_t seq = 0;
  int64_t time_ms = 0;
  event_body body;
  /// Who caused it (an authenticated identity); empty for the daemon's own
  /// decisions and for callers without an identity.
  std::string by = {};
};

/// Short name of an event's kind, e.g. "job_put".
const char* kind_name(const event_body& body);

/// The recovery state of a job with no flow running.
constexpr const char* idle_state = "INIT";

/// A job's state: the fold of its events.
struct job_model {
  bool exists = false; ///< Put and not deleted.
  job_spec spec;       ///< Current spec, annotations included.
  bool inited = false;
  init_config init;
  bool registered = false;
  recovery rec; ///< The recovery machine (state, uuid, label, caches).
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  /// The identity that created the job (its job cap counts it); empty when
  /// none was authenticated.
  std::string owner;
  std::string health_state = "Healthy";
  std::vector<device_fault> device_faults;
  uint64_t subscriber_generation = 0; ///< Subscriptions so far.
  uint64_t seq = 0;                   ///< Sequence number of the last event.
  /// Where each rank lives; rebuilt from `spec` by every job_put (derived,
  /// never stored). Null in a model built by hand or decoded from a
  /// snapshot (users index then; a job actor builds it when it starts).
  rank_index_ptr ranks;
};

/// A job as start-up rebuilt it from the log.
struct initial_job {
  job_model state;
  /// What it wrote after its latest snapshot; the next snapshot counts it,
  /// so restarts do not let the replayed tail grow.
  snapshot_tail tail;
};

/// Returns the state after `ev`. Pure.
job_model apply(job_model state, const event& ev);

/// Returns the state after `ev`, taking its large parts instead of copying
/// them (replay). Pure.
job_model apply(job_model state, event&& ev);

/// `apply` on `state` in place: a job model is large, and a replay or a
/// commit that folds many events need not move it in and out each time.
void apply_to(job_model& state, const event& ev);

/// `apply` on `state` in place, taking the large parts of `ev`.
void apply_to(job_model& state, event&& ev);

/// Folds `evs` into `state`. Pure.
job_model fold(job_model state, const std::vector<event>& evs);

/// Whether applying `body` can change a model's spec (annotations
/// included); when not, the spec after it is the spec before it.
bool touches_spec(const event_body& body);

// -- inputs -------------------------------------------------------------------

/// Platform.PutJob.
struct put_cmd {
  job_spec spec;
};

/// Platform.DeleteJob. `live_generation` is the open agent stream, 0 if none.
struct delete_cmd {
  uint64_t live_generation = 0;
};

/// Platform.SetAnnotations (or recoverd itself, with `by` = "recoverd").
struct annotate_cmd {
  string_map set;
  std::vector<std::string> remove;
  std::string by = "platform";
  /// When not 0: the change is made only if the job's last sequence number
  /// is this one (optimistic concurrency between writers).
  uint64_t expected_seq = 0;
};

/// Platform.ReportDeviceFaults for this job.
struct faults_cmd {
  job_device_faults faults;
  /// When set (a registered job): the stamps (time, fresh uuid) of the
  /// flow step the new snapshot causes (reference §4.1: start, join or
  /// pre-empt a flow), decided with it so that both events go into one
  /// append; unset: the snapshot alone.
  std::optional<flow_input> then = std::nullopt;
  /// The waits of that flow step.
  timeouts waits = {};
};

/// Recover.Init.
struct init_cmd {
  client_info client;
};

/// Recover.Register. `cap_reached` is the registry's verdict on its cap of
/// registered jobs.
struct register_cmd {
  client_info client;
  bool cap_reached = false;
};

/// Recover.SubscribeProcessManageSignal. `live_generation` is the stream it
/// takes over, 0 if none.
struct subscribe_cmd {
  client_info client;
  uint64_t live_generation = 0;
};

/// An agent stream of `generation` ended. `live_generation` is the stream
/// open now, 0 if none.
struct detach_cmd {
  uint64_t generation = 0;
  uint64_t live_generation = 0;
  std::string reason;
};

/// An input of the recovery machine (a report, a fault, a delivered signal,
/// a timer). `waits` are the configured waits.
struct flow_cmd {
  flow_input in;
  timeouts waits;
};

/// Everything a job can be asked to do.
using command
  = std::variant<put_cmd, delete_cmd, annotate_cmd, faults_cmd, init_cmd,
                 register_cmd, subscribe_cmd, detach_cmd, flow_cmd>;

/// What an input causes: the events to append (maybe none) and, for Recover
/// calls, the business status to answer once they are durable.
struct decision {
  std::vector<event_body> events;
  biz_status status;
  /// Parts of the input that were skipped without refusing it (the entries
  /// of a fault-center snapshot, see `check_snapshot`), one line each.
  std::vector<std::string> ignored = {};
};

/// Decides what `cmd` causes in `state`. Pure. An error means the input is
/// rejected and nothing changes.
expected<decision> decide(const job_model& state, const command& cmd);

// -- validation and derived values -------------------------------------------

/// The most device-fault entries one ReportDeviceFaults request may carry,
/// summed over its jobs (a fault center reports one entry per faulty
/// device; 65,536 covers 4,096 nodes of 16 devices all faulty at once).
/// Beyond it the whole request is refused.
constexpr size_t max_device_faults_per_request = 65536;

/// Refuses a ReportDeviceFaults request of `entries` device faults when
/// that is more than `max_device_faults_per_request`.
failure check_device_fault_count(size_t entries);

/// Checks a job spec as a whole; the error message names the offending field
/// in proto3 JSON spelling (e.g. `pods[1].devices[0].rankId`).
failure validate(const job_spec& spec);

/// Checks a job id a client sent: non-empty, at most 256 bytes, no control
/// characters, no '/' (one segment of /api/v1/jobs/{id}). Every entry that
/// takes a job id from a client uses this one check; the message names
/// `field` (the request's spelling, "jobId" or "jobID").
failure validate_job_id(const std::string& job_id,
                        const std::string& field = "jobId");

/// The strategies recoverd may use for `spec`, in priority order
/// (reference §0): configured ones filtered to the known names, plus
/// job-rescheduling / pod-rescheduling as configured, plus exit.
std::vector<std::string> effective_strategies(const job_spec& spec);

/// The recovery configuration captured at Init.
init_config make_init_config(const job_spec& spec);

/// The status view of a model.
job_status to_status(const job_model& state, bool subscribed);

/// The summary line of a model.
job_summary to_summary(const job_model& state, bool subscribed);

/// The ranks (devices over all pods) of `spec`.
int32_t ranks_of(const job_spec& spec);

/// The digest of a job that may stay dormant until it is next asked for:
/// one that exists and has no flow wait to time (a job actor does nothing
/// of its own accord then). None otherwise.
std::optional<job_digest> to_digest(const job_model& state);

/// The annotations view of a model.
annotations_view to_annotations_view(const job_model& state);

} // namespace recoverd
