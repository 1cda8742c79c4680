#include "actors/journal.hpp"

#include <chrono>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "storage/authority.hpp"
#include "storage/event_log.hpp"
#include "storage/retention.hpp"

namespace recoverd {

namespace {

using self_ptr = journal_actor::stateful_pointer<journal_state>;

// Index entries a purge examines per step: a few milliseconds, so appends
// queued meanwhile wait that long at most.
constexpr size_t purge_step_entries = 16'384;

// Most events of one live job a purge examines: a longer backlog (a job
// that ran long before the retention of live jobs existed) goes over a few
// sweeps instead of stalling appends for one long step.
constexpr uint64_t live_backlog_events = 65'536;

// Live jobs a purge examines per step: each costs a snapshot read and a
// seek even when none of its events is old enough (10,000 jobs took ~0.45 s
// in one step, holding appends back that long).
constexpr size_t purge_step_jobs = 512;

// Examines live jobs of `p` for up to a step's worth of events and jobs;
// makes the plan once every live job is examined.
caf::error prepare_step(self_ptr self, journal_state::pending_purge& p) {
  auto& st = self->state;
  uint64_t examined = 0;
  storage::event_log::reader reader{*st.log};
  for (size_t jobs = 0; p.next_live < p.live.size()
                        && examined < purge_step_entries
                        && jobs < purge_step_jobs;
       ++jobs) {
    const auto& id = p.live[p.next_live++];
    auto cut = storage::plan_live_cut(reader, *st.log, id, p.older_than_ms,
                                      live_backlog_events, examined);
    if (!cut)
      return cut.error();
    if (!*cut)
      continue;
    p.live_targets.push_back(std::move((*cut)->target));
    p.bases.push_back(std::move((*cut)->base));
    std::move((*cut)->incidents.begin(), (*cut)->incidents.end(),
              std::back_inserter(p.incidents));
  }
  if (p.next_live < p.live.size())
    return caf::none;
  auto targets = std::move(p.deleted);
  std::move(p.live_targets.begin(), p.live_targets.end(),
            std::back_inserter(targets));
  p.plan = st.log->plan_purge(std::move(targets), std::move(p.bases),
                              std::move(p.incidents));
  p.planned = true;
  return caf::none;
}

// Records a failed write: later appends are refused until `writable`.
void fail(self_ptr self, caf::error err) {
  auto& st = self->state;
  if (!st.failure) {
    if (st.cfg.on_health)
      st.cfg.on_health(false);
    self->delayed_send(self, st.cfg.retry_interval, resume_atom::value);
  }
  st.failure = std::move(err);
  st.stats.failure = message_of(st.failure);
  st.retry_at = std::chrono::steady_clock::now() + st.cfg.retry_interval;
  ES_ERROR("journal refuses appends until the log resumes: {}",
           st.stats.failure);
}

// False while a write failure lasts. RocksDB stays in its error state after
// a failed write; once the cause is gone (space freed, descriptors back) it
// resumes and the journal writes again. A refused append changed nothing:
// its job did not apply it.
bool writable(self_ptr self) {
  auto& st = self->state;
  if (!st.failure)
    return true;
  auto now = std::chrono::steady_clock::now();
  if (now < st.retry_at)
    return false;
  if (auto err = st.log->resume()) {
    st.failure = err;
    st.stats.failure = message_of(err);
    st.retry_at = now + st.cfg.retry_interval;
    return false;
  }
  ES_INFO("journal writes again (the failure was: {})", st.stats.failure);
  if (st.cfg.on_health)
    st.cfg.on_health(true);
  st.failure = caf::none;
  st.stats.failure.clear();
  st.stats.resumed += 1;
  return true;
}

// Writes every pending append as one batch and answers each of them.
void commit(self_ptr self) {
  auto& st = self->state;
  st.commit_scheduled = false;
  st.commit_deferred = false;
  if (st.pending.empty())
    return;
  auto batch = std::move(st.pending);
  st.pending.clear();
  if (!writable(self)) {
    for (auto& p : batch)
      p.promise.deliver(st.failure);
    return;
  }
  std::vector<log_record> events;
  std::vector<snapshot_record> snapshots;
  fleet_records fleet;
  for (auto& p : batch) {
    std::move(p.events.begin(), p.events.end(), std::back_inserter(events));
    std::move(p.snapshots.begin(), p.snapshots.end(),
              std::back_inserter(snapshots));
    std::move(p.fleet.events.begin(), p.fleet.events.end(),
              std::back_inserter(fleet.events));
    std::move(p.fleet.snapshots.begin(), p.fleet.snapshots.end(),
              std::back_inserter(fleet.snapshots));
  }
  auto start = std::chrono::steady_clock::now();
  // The authority first: a batch it refused is in no log, and its jobs do
  // not apply it.
  caf::error err;
  if (st.cfg.authority)
    err = st.cfg.authority->commit(events, snapshots, fleet);
  if (!err)
    err = st.log->append(events, snapshots, fleet);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  if (err) {
    fail(self, err);
    for (auto& p : batch)
      p.promise.deliver(err);
    return;
  }
  st.stats.batches += 1;
  st.stats.records += events.size();
  st.stats.max_batch = std::max<uint64_t>(st.stats.max_batch, events.size());
  st.stats.write_micros += static_cast<uint64_t>(micros);
  st.stats.hist.observe(events.size(), static_cast<uint64_t>(micros));
  st.stats.last_position = st.log->last_position();
  for (auto& p : batch)
    p.promise.deliver(st.stats.last_position);
  // Live watchers get the events once they are durable; the bytes are not
  // needed here any more. With nobody watching the hub is not woken at all.
  bool watched = !st.watching || st.watching->load() > 0;
  if (st.hub && watched && !events.empty()) {
    std::vector<published_event> xs;
    xs.reserve(events.size());
    auto position = st.stats.last_position - events.size();
    for (auto& e : events)
      xs.push_back({++position, std::move(e.job_id), e.seq, std::move(e.bytes)});
    self->send(st.hub, publish_atom::value, std::move(xs));
  }
}

// Stores digests or folds with `put` after what is pending: each is stored
// only while it was taken at its job's last event.
template <class Put>
caf::result<uint64_t> store_cached(self_ptr self, Put put) {
  commit(self);
  if (self->state.failure)
    return self->state.failure;
  auto stored = put(*self->state.log);
  if (!stored)
    return stored.error();
  return static_cast<uint64_t>(*stored);
}

// Under the batch policy, makes the written appends durable.
void sync(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.sync != sync_policy::batch || !writable(self))
    return;
  if (auto err = st.log->sync_wal())
    fail(self, std::move(err));
}

// Runs one step of the oldest purge; commits it once its scan is complete.
void purge_step(self_ptr self) {
  auto& st = self->state;
  if (st.purges.empty())
    return;
  auto& p = st.purges.front();
  auto finish = [&](auto&& result) {
    p.promise.deliver(std::forward<decltype(result)>(result));
    st.purges.pop_front();
  };
  if (!writable(self)) {
    finish(st.failure);
  } else if (!p.planned) {
    // Reading the live jobs' old events is a step of its own; the scan of
    // the order starts in the next one.
    if (auto err = prepare_step(self, p))
      finish(err);
  } else if (auto err = st.log->scan_purge(p.plan, purge_step_entries)) {
    finish(err);
  } else if (p.plan.scanned()) {
    // Appends accepted before this one go first, in their own write.
    commit(self);
    auto stats = st.log->commit_purge(p.plan);
    if (stats) {
      st.stats.purged_events += stats->events;
      st.stats.purged_live_events += stats->live_events;
      st.stats.kept_incidents += stats->incidents;
      finish(*stats);
    } else {
      finish(stats.error());
    }
  }
  if (!st.purges.empty())
    self->send(self, purgestep_atom::value);
}

// Queues an append for the next group commit.
caf::result<uint64_t> enqueue_append(self_ptr self,
                                     journal_state::pending_append p) {
  auto& st = self->state;
  if (!writable(self))
    return st.failure;
  auto rp = self->make_response_promise<uint64_t>();
  p.promise = rp;
  st.pending.push_back(std::move(p));
  // Group commit: the commit message queues behind every append already
  // in the mailbox, so they all go into one write.
  if (!st.commit_scheduled) {
    st.commit_scheduled = true;
    self->send(self, commit_atom::value);
  }
  return rp;
}

caf::result<purge_stats> enqueue_purge(self_ptr self,
                                       std::vector<purge_target> deleted,
                                       std::vector<std::string> live,
                                       int64_t older_than_ms) {
  auto& st = self->state;
  if (!writable(self))
    return st.failure;
  auto rp = self->make_response_promise<purge_stats>();
  journal_state::pending_purge p;
  p.deleted = std::move(deleted);
  p.live = std::move(live);
  p.older_than_ms = older_than_ms;
  p.promise = rp;
  st.purges.push_back(std::move(p));
  if (st.purges.size() == 1)
    self->send(self, purgestep_atom::value);
  return rp;
}

// The journal's answer to the shared status request.
component_status status_of(const journal_state& st, status_verbosity v) {
  component_status result;
  result.name = journal_state::name;
  result.kind = journal_state::name;
  const auto& x = st.stats;
  if (!x.failure.empty())
    result.problem = "appends are refused: " + x.failure;
  result.counters["batches"] = x.batches;
  result.counters["records"] = x.records;
  result.counters["lastPosition"] = x.last_position;
  result.counters["pendingAppends"] = st.pending.size();
  result.counters["pendingPurges"] = st.purges.size();
  result.facts["sync"] = st.cfg.sync == sync_policy::always ? "always"
                                                            : "batch";
  if (v == status_verbosity::detailed) {
    result.counters["maxBatch"] = x.max_batch;
    result.counters["writeMicros"] = x.write_micros;
    result.counters["purgedEvents"] = x.purged_events;
    result.counters["purgedLiveEvents"] = x.purged_live_events;
    result.counters["keptIncidents"] = x.kept_incidents;
    // What the log holds in memory, against the bounds it was opened with.
    auto m = st.log->memory();
    result.counters["blockCacheBytes"] = m.block_cache;
    result.counters["blockCacheCapacity"] = m.block_cache_capacity;
    result.counters["tableReaderBytes"] = m.table_readers;
    result.counters["memtableBytes"] = m.memtables;
  }
  return result;
}

} // namespace

journal_actor::behavior_type
journal(journal_actor::stateful_pointer<journal_state> self,
        storage::event_log* log, journal_config cfg) {
  if (auto err = validate(cfg); err || log == nullptr) {
    self->quit(err ? err
                   : make_error(errc::invalid_argument, "journal has no log"));
    return journal_actor::behavior_type::make_empty_behavior();
  }
  self->state.log = log;
  self->state.cfg = cfg;
  self->state.stats.last_position = log->last_position();
  if (cfg.sync == sync_policy::batch)
    self->delayed_send(self, cfg.sync_interval, sync_atom::value);
  return {
    [=](append_atom, std::vector<log_record>& events,
        std::vector<snapshot_record>& snapshots) -> caf::result<uint64_t> {
      journal_state::pending_append p;
      p.events = std::move(events);
      p.snapshots = std::move(snapshots);
      return enqueue_append(self, std::move(p));
    },
    [=](append_atom, fleet_atom, std::vector<log_record>& events,
        std::vector<snapshot_record>& snapshots) -> caf::result<uint64_t> {
      journal_state::pending_append p;
      p.fleet.events = std::move(events);
      p.fleet.snapshots = std::move(snapshots);
      return enqueue_append(self, std::move(p));
    },
    [=](commit_atom) {
      auto& st = self->state;
      // Group commit, second chance: appends that arrived while the last
      // write ran are still in the mailbox behind this message; one more
      // turn takes them into this write instead of the next fsync.
      if (!st.commit_deferred && !self->mailbox().empty()) {
        st.commit_deferred = true;
        self->send(self, commit_atom::value);
        return;
      }
      commit(self);
    },
    [=](flush_atom) -> caf::result<ok_atom> {
      commit(self);
      sync(self);
      if (self->state.failure)
        return self->state.failure;
      return ok_atom::value;
    },
    [=](digest_atom, std::vector<digest_record>& xs) -> caf::result<uint64_t> {
      return store_cached(
        self, [&](storage::event_log& log) { return log.put_digests(xs); });
    },
    [=](digest_atom, history_atom,
        std::vector<digest_record>& xs) -> caf::result<uint64_t> {
      return store_cached(
        self, [&](storage::event_log& log) { return log.put_histories(xs); });
    },
    [=](sync_atom) {
      commit(self);
      sync(self);
      self->delayed_send(self, self->state.cfg.sync_interval,
                         sync_atom::value);
    },
    [=](purge_atom,
        std::vector<purge_target>& targets) -> caf::result<purge_stats> {
      return enqueue_purge(self, std::move(targets), {}, 0);
    },
    [=](purge_atom, std::vector<purge_target>& deleted,
        std::vector<std::string>& live,
        int64_t older_than_ms) -> caf::result<purge_stats> {
      return enqueue_purge(self, std::move(deleted), std::move(live),
                           older_than_ms);
    },
    [=](purgestep_atom) { purge_step(self); },
    [=](resume_atom) {
      auto& st = self->state;
      if (st.failure && !writable(self))
        self->delayed_send(self, st.cfg.retry_interval, resume_atom::value);
    },
    [=](status_atom) { return self->state.stats; },
    [=](status_atom, status_verbosity v) { return status_of(self->state, v); },
    [=](watch_atom, event_hub_actor& hub, watcher_gauge& watching) {
      self->state.hub = std::move(hub);
      self->state.watching = std::move(watching);
      return ok_atom::value;
    },
  };
}

} // namespace recoverd
