#pragma once

/// Every atom of the actor graph, in one place. Atoms are verbs (at most 10
/// characters in CAF 0.17).

#include <caf/atom.hpp>

namespace recoverd {

using caf::get_atom;
using caf::ok_atom;
using caf::put_atom;

/// Append records to the journal.
using append_atom = caf::atom_constant<caf::atom("append")>;
/// Journal: write what is pending (self-sent continuation).
using commit_atom = caf::atom_constant<caf::atom("commit")>;
/// Journal: make everything accepted so far durable.
using flush_atom = caf::atom_constant<caf::atom("flush")>;
/// Journal: periodic WAL sync under the batch policy (self-sent).
using sync_atom = caf::atom_constant<caf::atom("sync")>;
/// Delete a job.
using delete_atom = caf::atom_constant<caf::atom("delete")>;
/// List jobs.
using list_atom = caf::atom_constant<caf::atom("list")>;
/// A job's summary line.
using summary_atom = caf::atom_constant<caf::atom("summary")>;
/// Inspection: a job's full view, or every job's.
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;
/// Inspection: a page of a job's events.
using events_atom = caf::atom_constant<caf::atom("events")>;
/// Inspection: a job's incidents.
using incidents_atom = caf::atom_constant<caf::atom("incidents")>;
/// Inspection: a job's state at a past point.
using at_atom = caf::atom_constant<caf::atom("at")>;
/// Hand durable events to the event hub.
using publish_atom = caf::atom_constant<caf::atom("publish")>;
/// Inspection: the figures /metrics reports.
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
/// Change annotations.
using annotate_atom = caf::atom_constant<caf::atom("annotate")>;
/// A job's annotations.
using annots_atom = caf::atom_constant<caf::atom("annots")>;
/// Watch a job's annotations.
using watch_atom = caf::atom_constant<caf::atom("watch")>;
/// A fault-center snapshot.
using faults_atom = caf::atom_constant<caf::atom("faults")>;
/// Recover.Init.
using init_atom = caf::atom_constant<caf::atom("init")>;
/// Recover.Register.
using register_atom = caf::atom_constant<caf::atom("register")>;
/// Recover.SubscribeProcessManageSignal.
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
/// An agent stream ended (self-sent by the stream's close callback).
using detach_atom = caf::atom_constant<caf::atom("detach")>;
/// Keep-alive timer (self-sent).
using keepalive_atom = caf::atom_constant<caf::atom("keepalive")>;
/// Close every stream before the server stops.
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
/// An input for the recovery machine (a report, a fault).
using report_atom = caf::atom_constant<caf::atom("report")>;
/// A recovery-machine deadline (self-sent).
using flowtimer_atom = caf::atom_constant<caf::atom("flowtimer")>;
/// SwitchNicTrack.
using switch_atom = caf::atom_constant<caf::atom("switchnic")>;
/// A worker stream (SwitchRankList or StressTestRankParams).
using worker_atom = caf::atom_constant<caf::atom("worker")>;
/// An operator stream for O&M messages.
using om_atom = caf::atom_constant<caf::atom("omwatch")>;
/// StressTest: start an online stress test.
using stress_atom = caf::atom_constant<caf::atom("stress")>;
/// An operator clears a node's recorded health.
using nodeclear_atom = caf::atom_constant<caf::atom("nodeclear")>;
/// Node registry: what jobs saw on their nodes, made durable.
using observe_atom = caf::atom_constant<caf::atom("observe")>;
/// Journal: records of a fleet stream (not of a job).
using fleet_atom = caf::atom_constant<caf::atom("fleet")>;
/// Remove the history of deleted jobs (journal).
using purge_atom = caf::atom_constant<caf::atom("purge")>;
/// Journal: examine the next part of the order for a purge (self-sent).
using purgestep_atom = caf::atom_constant<caf::atom("purgestep")>;
/// Registry: look for deleted jobs past their retention (self-sent timer).
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
/// Journal: try the log again after a failed write (self-sent timer).
using resume_atom = caf::atom_constant<caf::atom("resume")>;
/// Component status (introspection).
using status_atom = caf::atom_constant<caf::atom("status")>;
/// A job's digest, taken at a clean stop so that the next start-up can
/// leave the job dormant (registry, job, journal).
using digest_atom = caf::atom_constant<caf::atom("digest")>;
/// With `digest_atom`: the inspector's folds of jobs' histories, stored at
/// a clean stop so that the next start-up folds only what follows them.
using history_atom = caf::atom_constant<caf::atom("history")>;
/// Inspection: goodput figures of the fleet and its jobs.
using goodput_atom = caf::atom_constant<caf::atom("goodput")>;

} // namespace recoverd
