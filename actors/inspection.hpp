#pragma once

/// Domain types of the inspection side of the actor graph (design §6): what
/// the journal publishes, what the event hub streams, and the read-only views
/// the inspector answers with. Local messages only (they hold `job_model`).

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/model/incidents.hpp"
#include "actors/model/job_model.hpp"
#include "actors/sink.hpp"

namespace recoverd {

/// What only the running job actor knows: its open streams.
struct live_streams {
  /// An agent stream is open.
  bool subscribed = false;
  /// Generation of the open agent stream; 0 when none.
  uint64_t generation = 0;
  /// Open WatchAnnotations streams.
  uint32_t annotation_watchers = 0;
  /// Open worker streams (SubscribeNotifySwitch).
  uint32_t switch_workers = 0;
  /// Open operator streams.
  uint32_t operators = 0;
};

/// A live job as its actor sees it: the fold of its events plus its streams.
struct job_inspection {
  /// The fold of the job's events.
  job_model model;
  /// Its open streams.
  live_streams live;
};

/// A live job with what its history adds (ListJobs and GetJob of Inspect).
struct job_view {
  job_inspection job;
  /// The latest agent subscription in the log.
  subscription_record subscription;
  /// The running flow, if any.
  std::optional<incident> active;
  /// The last finished flow, if any.
  std::optional<incident> last;
};

/// One durable event as the journal hands it to the event hub.
struct published_event {
  /// Position in the cluster-wide order.
  uint64_t position = 0;
  std::string job_id;
  uint64_t seq = 0;
  /// The `Event` record as stored.
  std::string bytes;
};

/// Where the event hub sends events to one watcher.
using event_sink_ptr = std::shared_ptr<stream_sink<published_event>>;

/// Counters of the event hub.
struct hub_stats {
  /// Watchers now.
  uint64_t watchers = 0;
  /// Events published by the journal.
  uint64_t published = 0;
  /// Watchers dropped because their buffer overflowed.
  uint64_t dropped = 0;
};

/// One stored event with its rendering (ListEvents).
struct inspected_event {
  std::string job_id;
  uint64_t seq = 0;
  int64_t time_ms = 0;
  /// Kind name, e.g. "flow_stepped".
  std::string kind;
  /// One readable line (see `describe`).
  std::string summary;
  /// The `Event` record as stored.
  std::string bytes;
};

/// One page of a job's events.
struct event_page {
  std::vector<inspected_event> events;
  /// First seq of the next page; 0 when this page reached the end.
  uint64_t next_seq = 0;
  /// The job's last seq now.
  uint64_t last_seq = 0;
  /// The job's first stored seq now: above 1 once the retention removed
  /// older events.
  uint64_t first_seq = 0;
};

/// A job's incidents (ListIncidents).
struct incident_list {
  std::vector<incident> incidents;
  uint64_t last_seq = 0;
};

/// A point in a job's history: after event `seq`, or after the last event
/// decided at or before `time_ms`.
struct history_point {
  bool by_time = false;
  uint64_t seq = 0;
  int64_t time_ms = 0;
};

/// A job's state at a past point (GetJobAt).
struct job_at {
  job_model state;
  /// The event at `state.seq`.
  inspected_event event;
  /// The flow running at that point, if any.
  std::optional<incident> active;
};

/// Counters of the journal, with fixed-bucket histograms.
struct journal_histograms {
  /// Upper bounds of the batch-size buckets, in events.
  static constexpr uint64_t batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128,
                                              256, 512, 1024};
  /// Upper bounds of the write (incl. sync) latency buckets, in µs.
  static constexpr uint64_t write_bounds[] = {100,   250,    500,   1000,
                                              2500,  5000,   10000, 25000,
                                              50000, 100000, 250000, 1000000};
  /// Batches per bucket (not cumulative); one extra bucket for +Inf.
  std::vector<uint64_t> batches
    = std::vector<uint64_t>(std::size(batch_bounds) + 1);
  /// Writes per latency bucket (not cumulative); one extra for +Inf.
  std::vector<uint64_t> writes
    = std::vector<uint64_t>(std::size(write_bounds) + 1);

  /// Counts one write of `events` that took `micros`.
  void observe(uint64_t events, uint64_t micros);
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_histograms& x) {
  return f(caf::meta::type_name("journal_histograms"), x.batches, x.writes);
}

/// One job's goodput (GetStats).
struct job_goodput {
  std::string job_id;
  goodput_figures figures;
};

/// The fleet's goodput and its jobs' (GetStats).
struct goodput_report {
  /// The time the figures were computed for, Unix ms.
  int64_t now_ms = 0;
  /// Every job of the log, deleted ones included.
  goodput_figures fleet;
  /// The existing jobs asked for, ordered by job id.
  std::vector<job_goodput> jobs;
};

/// What /metrics reports about the cluster, from the log and the actors.
struct cluster_stats {
  /// Jobs that exist (put and not deleted), per the log.
  uint64_t jobs = 0;
  /// Of those, registered for recovery.
  uint64_t registered = 0;
  /// Running flows by (kind, state).
  std::map<std::pair<std::string, std::string>, uint64_t> active_flows;
  /// Finished flows by (kind, strategy, outcome), over the whole log.
  incident_counts finished;
  /// Events in the log (last global position).
  uint64_t events = 0;
  /// Journal counters.
  uint64_t journal_batches = 0;
  uint64_t journal_records = 0;
  uint64_t journal_write_micros = 0;
  bool journal_failed = false;
  journal_histograms journal_hist;
  /// Events the retention removed since start-up, of deleted and of live
  /// jobs, and incidents it stored for live jobs' removed events.
  uint64_t purged_events = 0;
  uint64_t purged_live_events = 0;
  uint64_t kept_incidents = 0;
  /// Event hub counters.
  hub_stats hub;
  /// Goodput sums over every finished incident of the log.
  goodput_tally goodput;
  /// The fleet's goodput now.
  goodput_figures fleet;
  /// Nodes the fleet's node registry tracks, and of those quarantined.
  uint64_t nodes_tracked = 0;
  uint64_t nodes_quarantined = 0;
};

} // namespace recoverd

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::job_inspection)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<recoverd::job_inspection>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::job_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<recoverd::job_view>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::published_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<recoverd::published_event>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::event_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::hub_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::event_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::incident_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::history_point)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::job_at)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::cluster_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::goodput_report)
