#pragma once

/// The actor graph of recoverd: every typed actor interface in one place.
///
///   services ──► job_registry ──► job (one per job) ──► journal ──► event_log
///                                                          │ durable events
///   services ──► inspector (reads the log, asks the registry)  ▼
///   services ──► event_hub (live watchers) ◄─────────────── journal

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/atoms.hpp"
#include "actors/inspection.hpp"
#include "actors/model/node_registry.hpp"
#include "actors/model/recovery.hpp"
#include "actors/sink.hpp"
#include "actors/status.hpp"
#include "actors/model/types.hpp"
#include "actors/type_ids.hpp"
#include "storage/records.hpp"

namespace recoverd {

class job_directory;

/// How many live watchers the event hub has, kept by the hub and read by the
/// journal, which hands the hub nothing while it is 0.
using watcher_gauge = std::shared_ptr<std::atomic<size_t>>;

/// The registry's job table for the edge (see `actors/job_directory.hpp`).
using job_directory_ptr = std::shared_ptr<job_directory>;

/// Counters of the journal.
struct journal_stats {
  uint64_t batches = 0;        ///< Writes (each one WriteBatch).
  uint64_t records = 0;        ///< Events written.
  uint64_t max_batch = 0;      ///< Largest batch, in events.
  uint64_t write_micros = 0;   ///< Total time in writes (incl. sync).
  uint64_t last_position = 0;  ///< Global position of the last event.
  std::string failure;         ///< Why appends are refused; empty if healthy.
  journal_histograms hist;     ///< Batch sizes and write latencies.
  uint64_t purged_events = 0;      ///< Events of deleted jobs purged.
  uint64_t purged_live_events = 0; ///< Old events of live jobs purged.
  uint64_t kept_incidents = 0;     ///< Incidents stored for purged events.
  uint64_t resumed = 0; ///< Times writing resumed after a failure.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_stats& x) {
  return f(caf::meta::type_name("journal_stats"), x.batches, x.records,
           x.max_batch, x.write_micros, x.last_position, x.failure, x.hist,
           x.purged_events, x.purged_live_events, x.kept_incidents,
           x.resumed);
}

/// The EVENT HUB: hands every durable event to the live watchers
/// (Inspect.WatchEvents) of its job or of every job. A watcher whose buffer
/// overflows is dropped (its stream ends with RESOURCE_EXHAUSTED). Answers
/// the shared status request (STATUS CLIENT).
using event_hub_actor = caf::typed_actor<
  // Events just made durable, in global order (from the journal).
  caf::reacts_to<publish_atom, std::vector<published_event>>,
  // Adds a watcher of one job ("" = every job).
  caf::replies_to<watch_atom, std::string, event_sink_ptr>::with<ok_atom>,
  // Reports counters.
  caf::replies_to<status_atom>::with<hub_stats>,
  // Ends every watcher (daemon shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>>
  ::extend_with<status_client_actor>;

/// The JOURNAL: the only writer of the event log. Batches appends from all
/// jobs into one write (group commit) and replies once they are durable.
/// Answers the shared status request (STATUS CLIENT).
using journal_actor = caf::typed_actor<
  // Appends events (and snapshots); replies with the global position of the
  // last event once durable, or with a storage_failure error.
  caf::replies_to<append_atom, std::vector<log_record>,
                  std::vector<snapshot_record>>::with<uint64_t>,
  // Appends records of fleet streams (see `fleet_records`), in the same
  // group commit as jobs' appends; replies like an append.
  caf::replies_to<append_atom, fleet_atom, std::vector<log_record>,
                  std::vector<snapshot_record>>::with<uint64_t>,
  // Makes everything accepted so far durable.
  caf::replies_to<flush_atom>::with<ok_atom>,
  // Stores jobs' digests (see `event_log::put_digests`); replies with how
  // many were still current and stored.
  caf::replies_to<digest_atom, std::vector<digest_record>>::with<uint64_t>,
  // Stores the inspector's folds of jobs' histories (see
  // `event_log::put_histories`); replies with how many were still current
  // and stored.
  caf::replies_to<digest_atom, history_atom,
                  std::vector<digest_record>>::with<uint64_t>,
  // Removes the history of deleted jobs; replies once it is removed. The
  // order is examined in steps between appends, so appends do not wait for
  // the whole scan.
  caf::replies_to<purge_atom, std::vector<purge_target>>::with<purge_stats>,
  // The same, plus the old events of these live jobs (examined in steps too)
  // decided before the time (Unix ms), keeping their incidents.
  caf::replies_to<purge_atom, std::vector<purge_target>,
                  std::vector<std::string>, int64_t>::with<purge_stats>,
  // Reports counters.
  caf::replies_to<status_atom>::with<journal_stats>,
  // From now on, hands every durable event to this hub while the gauge of
  // its watchers is above 0 (always when the gauge is null).
  caf::replies_to<watch_atom, event_hub_actor, watcher_gauge>::with<ok_atom>,
  // Writes what is pending (self-sent).
  caf::reacts_to<commit_atom>,
  // Periodic WAL sync under the batch policy (self-sent).
  caf::reacts_to<sync_atom>,
  // The next step of the oldest purge (self-sent).
  caf::reacts_to<purgestep_atom>,
  // After a failed write: try the log again (self-sent until it works, so
  // that health recovers without waiting for an append).
  caf::reacts_to<resume_atom>>
  ::extend_with<status_client_actor>;

/// A JOB: one per job. Owns the job's state (the fold of its events), its
/// agent stream, its annotation watchers and its timers. Answers the shared
/// status request (STATUS CLIENT).
using job_actor = caf::typed_actor<
  // PutJob (without an identity / by an identity, for the audit).
  caf::replies_to<put_atom, job_spec>::with<put_result>,
  caf::replies_to<put_atom, job_spec, std::string>::with<put_result>,
  // DeleteJob; replies with the seq of the deletion event.
  caf::replies_to<delete_atom>::with<uint64_t>,
  caf::replies_to<delete_atom, std::string>::with<uint64_t>,
  // GetJob.
  caf::replies_to<get_atom>::with<job_status>,
  // One line of ListJobs.
  caf::replies_to<get_atom, summary_atom>::with<job_summary>,
  // The job's encoded digest at its last event, or an empty record when
  // the job may not stay dormant (a flow wait is timed).
  caf::replies_to<get_atom, digest_atom>::with<digest_record>,
  // Inspect: the folded state and the open streams.
  caf::replies_to<get_atom, inspect_atom>::with<job_inspection>,
  // SetAnnotations (set, remove, by), and with the sequence number the
  // caller expects the job at (0: any).
  caf::replies_to<annotate_atom, string_map, std::vector<std::string>,
                  std::string>::with<annotations_view>,
  caf::replies_to<annotate_atom, string_map, std::vector<std::string>,
                  std::string, uint64_t>::with<annotations_view>,
  // GetAnnotations.
  caf::replies_to<get_atom, annots_atom>::with<annotations_view>,
  // WatchAnnotations: pushes the current view, then every change.
  caf::replies_to<watch_atom, annotations_sink_ptr>::with<ok_atom>,
  // ReportDeviceFaults for this job; names the entries it skipped.
  caf::replies_to<faults_atom, job_device_faults>::with<device_faults_outcome>,
  // The same, answered through `reply` (the edge's path: one message per
  // job of a fault storm, no actor or timer of its own).
  caf::reacts_to<faults_atom, job_device_faults, faults_reply_ptr>,
  // Recover.Init.
  caf::replies_to<init_atom, client_info>::with<biz_status>,
  // Recover.Register; the flag says whether the registry's cap is reached.
  caf::replies_to<register_atom, client_info, bool>::with<biz_status>,
  // Recover.SubscribeProcessManageSignal.
  caf::replies_to<subscribe_atom, client_info, signal_sink_ptr>::with<ok_atom>,
  // Recover reports and ReportProcessFault: the RPC's name and the input.
  caf::replies_to<report_atom, flow_input>::with<biz_status>,
  // The same, answered through `reply` instead of a response message (the
  // edge's path, which needs no actor of its own).
  caf::reacts_to<report_atom, flow_input, report_reply_ptr>,
  // SwitchNicTrack: the operations and who asked.
  caf::replies_to<switch_atom, std::vector<nic_op>, std::string>::with<biz_status>,
  // SubscribeNotifySwitch: a worker stream.
  caf::replies_to<worker_atom, switch_sink_ptr>::with<ok_atom>,
  // SubscribeNotifyExecStressTest: a worker stream.
  caf::replies_to<worker_atom, stress_sink_ptr>::with<ok_atom>,
  // StressTest: the request and who asked.
  caf::replies_to<stress_atom, stress_request, std::string>::with<biz_status>,
  // SubscribeSwitchNicSignal ("switch") / SubscribeStressTestResponse
  // ("stress"): an operator stream.
  caf::replies_to<om_atom, om_kind, om_sink_ptr>::with<ok_atom>,
  // An operator clears a node's recorded health (node, who); replies with
  // the job id when this job had it recorded, else "".
  caf::replies_to<nodeclear_atom, std::string, std::string>::with<std::string>,
  // Ends every stream of the job (daemon shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>,
  // A recovery deadline armed for (deadline, event) (self-sent).
  caf::reacts_to<flowtimer_atom, int64_t, flow_event>,
  // Keep-alive timer of a subscription generation (self-sent).
  caf::reacts_to<keepalive_atom, uint64_t>,
  // The agent stream of a generation ended (from the stream's close hook).
  caf::reacts_to<detach_atom, uint64_t>>
  ::extend_with<status_client_actor>;

/// The NODE REGISTRY: the fleet's record of every node's faults and stress
/// verdicts across all jobs, its fault score and the quarantine list. Jobs
/// tell it what they made durable; it records that as events of its own
/// stream in the journal (replayed at start-up, untouched by job
/// deletions). Answers the shared status request (STATUS CLIENT).
using node_registry_actor = caf::typed_actor<
  // Faults and stress verdicts a job just made durable (fire and forget).
  caf::reacts_to<observe_atom, std::vector<node_observation>>,
  // ListNodes: every node, or only the quarantined ones (flag).
  caf::replies_to<list_atom, bool>::with<node_listing>,
  // An operator clears a node (node, who); replies whether the registry
  // had a record of it (and so cleared it, durably).
  caf::replies_to<nodeclear_atom, std::string, std::string>::with<bool>,
  // Nodes tracked and quarantined (/metrics).
  caf::replies_to<status_atom>::with<node_counts>>
  ::extend_with<status_client_actor>;

/// The JOB REGISTRY: job id -> job actor. Spawns jobs (at start-up from the
/// log, later on PutJob), enforces the job cap and routes every request.
/// Its answer to the shared status request (STATUS CLIENT) counts the jobs
/// by state.
using job_registry_actor = caf::typed_actor<
  caf::replies_to<put_atom, job_spec>::with<put_result>,
  // PutJob by an identity, with its cap of owned jobs.
  caf::replies_to<put_atom, job_spec, put_origin>::with<put_result>,
  caf::replies_to<delete_atom, std::string>::with<uint64_t>,
  // DeleteJob (job id, by).
  caf::replies_to<delete_atom, std::string, std::string>::with<uint64_t>,
  caf::replies_to<get_atom, std::string>::with<job_status>,
  // ListJobs, filtered by namespace ("" = all), ordered by job id.
  caf::replies_to<list_atom, std::string>::with<std::vector<job_summary>>,
  // Inspect: one live job, or every live job (unordered).
  caf::replies_to<inspect_atom, std::string>::with<job_inspection>,
  caf::replies_to<inspect_atom, list_atom>::with<std::vector<job_inspection>>,
  caf::replies_to<annotate_atom, std::string, string_map,
                  std::vector<std::string>, std::string>::with<annotations_view>,
  caf::replies_to<annotate_atom, std::string, string_map,
                  std::vector<std::string>, std::string,
                  uint64_t>::with<annotations_view>,
  caf::replies_to<get_atom, annots_atom, std::string>::with<annotations_view>,
  caf::replies_to<watch_atom, std::string, annotations_sink_ptr>::with<ok_atom>,
  caf::replies_to<faults_atom, job_device_faults>::with<device_faults_outcome>,
  // The same, answered through the reply sink (forwarded to the job).
  caf::reacts_to<faults_atom, job_device_faults, faults_reply_ptr>,
  caf::replies_to<init_atom, client_info>::with<biz_status>,
  caf::replies_to<register_atom, client_info>::with<biz_status>,
  caf::replies_to<subscribe_atom, client_info, signal_sink_ptr>::with<ok_atom>,
  // Recover reports for a job (client.job_id): the RPC's name and the input.
  caf::replies_to<report_atom, client_info, flow_input>::with<biz_status>,
  // The same, answered through the reply sink (forwarded to the job).
  caf::reacts_to<report_atom, client_info, flow_input, report_reply_ptr>,
  // From now on, lists every live job in this directory.
  caf::replies_to<watch_atom, job_directory_ptr>::with<ok_atom>,
  caf::replies_to<switch_atom, std::string, std::vector<nic_op>,
                  std::string>::with<biz_status>,
  caf::replies_to<worker_atom, std::string, switch_sink_ptr>::with<ok_atom>,
  caf::replies_to<worker_atom, std::string, stress_sink_ptr>::with<ok_atom>,
  caf::replies_to<stress_atom, std::string, stress_request,
                  std::string>::with<biz_status>,
  // Operator stream of a job's O&M action: job, kind ("switch", "stress").
  caf::replies_to<om_atom, std::string, om_kind, om_sink_ptr>::with<ok_atom>,
  // Clears a node's recorded health in one job, or in every job when the
  // job id is empty (node, job, who); replies with the jobs that had it.
  caf::replies_to<nodeclear_atom, std::string, std::string,
                  std::string>::with<std::vector<std::string>>,
  // Ends every stream of every job (daemon shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>,
  // Stores the digest of every job that may stay dormant across the next
  // start-up (a clean stop); replies with how many were stored.
  caf::replies_to<digest_atom>::with<uint64_t>,
  // Removes the history of jobs deleted longer ago than the retention, and
  // the events of live jobs older than the retention before their latest
  // snapshot, now; replies with what was removed.
  caf::replies_to<purge_atom>::with<purge_stats>,
  // The same, at start-up and then every retention sweep interval
  // (self-sent).
  caf::reacts_to<sweep_atom>,
  // The status of one live job.
  caf::replies_to<status_atom, status_verbosity,
                  std::string>::with<component_status>,
  // The status of every live job, ordered by job id; a job that does not
  // answer in time is listed as unanswered.
  caf::replies_to<status_atom, status_verbosity,
                  list_atom>::with<std::vector<component_status>>>
  ::extend_with<status_client_actor>;

/// The HISTORIAN: one job's past, read from the event log on demand (run it
/// detached: reads block, and a long job's history takes a while). Apart
/// from the inspector, so that a post-mortem of a long job never holds up
/// the dashboards' and /metrics' questions. Never changes a job.
using historian_actor = caf::typed_actor<
  // ListEvents: job, first seq, most events.
  caf::replies_to<events_atom, std::string, uint64_t,
                  uint32_t>::with<event_page>,
  // ListIncidents.
  caf::replies_to<incidents_atom, std::string>::with<incident_list>,
  // GetJobAt.
  caf::replies_to<at_atom, std::string, history_point>::with<job_at>>
  ::extend_with<status_client_actor>;

/// The INSPECTOR: read-only views of the fleet for Inspect, HTTP and
/// /metrics. Reads the event log (run it detached: reads block) and asks the
/// registry for what only live jobs know. Never changes a job. Answers the
/// shared status request (STATUS CLIENT).
using inspector_actor = caf::typed_actor<
  // ListJobs, filtered by namespace ("" = all), ordered by job id.
  caf::replies_to<list_atom, std::string>::with<std::vector<job_view>>,
  // GetJob.
  caf::replies_to<get_atom, std::string>::with<job_view>,
  // The figures of /metrics.
  caf::replies_to<metrics_atom>::with<cluster_stats>,
  // GetStats: the fleet's goodput and every existing job's ("" = all), or
  // one job's.
  caf::replies_to<goodput_atom, std::string>::with<goodput_report>,
  // At a clean stop: folds what is left and stores every job's fold through
  // the journal, for the next start-up to take up; replies with how many
  // were stored.
  caf::replies_to<digest_atom, history_atom>::with<uint64_t>,
  // Stores the folds that changed since they were last stored (self-sent
  // at the store interval).
  caf::reacts_to<history_atom>,
  // Folds what was appended since the last fold, every second (self-sent).
  caf::reacts_to<sweep_atom>>
  ::extend_with<status_client_actor>;

/// The STATUS DESK: collects every long-lived component's status for
/// GetStatus. It only asks, each with a timeout, so a component that is
/// stuck (the inspector in a long fold, say) is listed as unanswered
/// instead of holding the answer up. Answers the shared status request.
using status_desk_actor = caf::typed_actor<
  // The status of every component (registry, journal, hub, inspector,
  // historian, and the jobs asked for), each asked with the query's
  // timeout: one that does not answer in time is listed as unanswered.
  caf::replies_to<status_atom,
                  status_query>::with<std::vector<component_status>>>
  ::extend_with<status_client_actor>;

} // namespace recoverd

// Local messages only; its optional member has no CAF 0.17 inspector.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<recoverd::node_observation>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::node_listing)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::node_counts)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::flow_input)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::put_origin)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::flow_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::om_kind)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::job_directory_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::watcher_gauge)
