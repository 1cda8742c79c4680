#pragma once

/// The actor graph of recoverd: every typed actor interface in one place.
///
///   services ──► job_registry ──► job (one per job) ──► journal ──► event_log

#include <cstdint>
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
#include "actors/recovery.hpp"
#include "actors/sink.hpp"
#include "actors/types.hpp"

namespace recoverd {

/// Counters of the journal.
struct journal_stats {
  uint64_t batches = 0;        ///< Writes (each one WriteBatch).
  uint64_t records = 0;        ///< Events written.
  uint64_t max_batch = 0;      ///< Largest batch, in events.
  uint64_t write_micros = 0;   ///< Total time in writes (incl. sync).
  uint64_t last_position = 0;  ///< Global position of the last event.
  std::string failure;         ///< Why appends are refused; empty if healthy.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_stats& x) {
  return f(caf::meta::type_name("journal_stats"), x.batches, x.records,
           x.max_batch, x.write_micros, x.last_position, x.failure);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_rank& x) {
  return f(caf::meta::type_name("fault_rank"), x.rank_id, x.fault_type);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_signal& x) {
  return f(caf::meta::type_name("process_signal"), x.uuid, x.job_id,
           x.signal_type, x.actions, x.fault_ranks, x.change_strategy,
           x.timeout, x.node_rank_ids, x.extra_params);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_report& x) {
  return f(caf::meta::type_name("recover_report"), x.code, x.strategy,
           x.isolate_ranks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, nic_op& x) {
  return f(caf::meta::type_name("nic_op"), x.node, x.device, x.to_backup);
}

/// The JOURNAL: the only writer of the event log. Batches appends from all
/// jobs into one write (group commit) and replies once they are durable.
using journal_actor = caf::typed_actor<
  // Appends events (and snapshots); replies with the global position of the
  // last event once durable, or with a storage_failure error.
  caf::replies_to<append_atom, std::vector<log_record>,
                  std::vector<snapshot_record>>::with<uint64_t>,
  // Makes everything accepted so far durable.
  caf::replies_to<flush_atom>::with<ok_atom>,
  // Removes the history of deleted jobs; replies once it is removed. The
  // order is examined in steps between appends, so appends do not wait for
  // the whole scan.
  caf::replies_to<purge_atom, std::vector<purge_target>>::with<purge_stats>,
  // Reports counters.
  caf::replies_to<status_atom>::with<journal_stats>,
  // Writes what is pending (self-sent).
  caf::reacts_to<commit_atom>,
  // Periodic WAL sync under the batch policy (self-sent).
  caf::reacts_to<sync_atom>,
  // The next step of the oldest purge (self-sent).
  caf::reacts_to<purgestep_atom>>;

/// A JOB: one per job. Owns the job's state (the fold of its events), its
/// agent stream, its annotation watchers and its timers.
using job_actor = caf::typed_actor<
  // PutJob.
  caf::replies_to<put_atom, job_spec>::with<put_result>,
  // DeleteJob; replies with the seq of the deletion event.
  caf::replies_to<delete_atom>::with<uint64_t>,
  // GetJob.
  caf::replies_to<get_atom>::with<job_status>,
  // One line of ListJobs.
  caf::replies_to<get_atom, summary_atom>::with<job_summary>,
  // SetAnnotations (set, remove, by).
  caf::replies_to<annotate_atom, string_map, std::vector<std::string>,
                  std::string>::with<annotations_view>,
  // GetAnnotations.
  caf::replies_to<get_atom, annots_atom>::with<annotations_view>,
  // WatchAnnotations: pushes the current view, then every change.
  caf::replies_to<watch_atom, annotations_sink_ptr>::with<ok_atom>,
  // ReportDeviceFaults for this job.
  caf::replies_to<faults_atom, job_device_faults>::with<ok_atom>,
  // Recover.Init.
  caf::replies_to<init_atom, client_info>::with<biz_status>,
  // Recover.Register; the flag says whether the registry's cap is reached.
  caf::replies_to<register_atom, client_info, bool>::with<biz_status>,
  // Recover.SubscribeProcessManageSignal.
  caf::replies_to<subscribe_atom, client_info, signal_sink_ptr>::with<ok_atom>,
  // Recover reports and ReportProcessFault: the RPC's name and the input.
  caf::replies_to<report_atom, std::string, flow_input>::with<biz_status>,
  // SwitchNicTrack: the operations and who asked.
  caf::replies_to<switch_atom, std::vector<nic_op>, std::string>::with<biz_status>,
  // SubscribeNotifySwitch: a worker stream.
  caf::replies_to<worker_atom, switch_sink_ptr>::with<ok_atom>,
  // SubscribeSwitchNicSignal: an operator stream.
  caf::replies_to<om_atom, om_sink_ptr>::with<ok_atom>,
  // Ends every stream of the job (daemon shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>,
  // A recovery deadline armed for (deadline, event) (self-sent).
  caf::reacts_to<flowtimer_atom, int64_t, std::string>,
  // Keep-alive timer of a subscription generation (self-sent).
  caf::reacts_to<keepalive_atom, uint64_t>,
  // The agent stream of a generation ended (from the stream's close hook).
  caf::reacts_to<detach_atom, uint64_t>>;

/// The JOB REGISTRY: job id -> job actor. Spawns jobs (at start-up from the
/// log, later on PutJob), enforces the job cap and routes every request.
using job_registry_actor = caf::typed_actor<
  caf::replies_to<put_atom, job_spec>::with<put_result>,
  caf::replies_to<delete_atom, std::string>::with<uint64_t>,
  caf::replies_to<get_atom, std::string>::with<job_status>,
  // ListJobs, filtered by namespace ("" = all), ordered by job id.
  caf::replies_to<list_atom, std::string>::with<std::vector<job_summary>>,
  caf::replies_to<annotate_atom, std::string, string_map,
                  std::vector<std::string>, std::string>::with<annotations_view>,
  caf::replies_to<get_atom, annots_atom, std::string>::with<annotations_view>,
  caf::replies_to<watch_atom, std::string, annotations_sink_ptr>::with<ok_atom>,
  caf::replies_to<faults_atom, job_device_faults>::with<ok_atom>,
  caf::replies_to<init_atom, client_info>::with<biz_status>,
  caf::replies_to<register_atom, client_info>::with<biz_status>,
  caf::replies_to<subscribe_atom, client_info, signal_sink_ptr>::with<ok_atom>,
  // Recover reports for a job (client.job_id): the RPC's name and the input.
  caf::replies_to<report_atom, client_info, std::string,
                  flow_input>::with<biz_status>,
  caf::replies_to<switch_atom, std::string, std::vector<nic_op>,
                  std::string>::with<biz_status>,
  caf::replies_to<worker_atom, std::string, switch_sink_ptr>::with<ok_atom>,
  caf::replies_to<om_atom, std::string, om_sink_ptr>::with<ok_atom>,
  // Ends every stream of every job (daemon shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>,
  // Removes the history of jobs deleted longer ago than the retention now;
  // replies with what was removed.
  caf::replies_to<purge_atom>::with<purge_stats>,
  // The same, at start-up and then every retention sweep interval
  // (self-sent).
  caf::reacts_to<sweep_atom>>;

} // namespace recoverd

// Local messages only; its optional member has no CAF 0.17 inspector.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::flow_input)
