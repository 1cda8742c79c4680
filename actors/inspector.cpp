#include "actors/inspector.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "actors/config.hpp"
#include "actors/error.hpp"
#include "actors/log.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/history_fold.hpp"
#include "storage/incident_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = inspector_actor::stateful_pointer<inspector_state>;

// How long the inspector waits for the registry, the journal or the hub.
constexpr auto ask_timeout = std::chrono::seconds(30);

// Events read from the global order at a time.
constexpr size_t tail_chunk = 4096;

// How often the inspector folds what was appended since its last fold.
// Lazily, only before an answer, an idle dashboard let the backlog grow
// without bound, and the first question after a busy day read all of it
// (from disk, no longer cached) while every other question waited.
constexpr auto fold_interval = std::chrono::seconds(1);

// Most folds stored at a time: a store is one write on the journal's
// thread, between appends.
constexpr size_t max_stored_per_round = 1024;

// Folds every event appended since the last call into the histories.
caf::error catch_up(self_ptr self) {
  auto& st = self->state;
  if (st.position == 0 && st.histories.empty()) {
    // The first fold reads the whole log: job by job, on every core, not
    // in the global order on this thread (that took 1.8 s for 400,000
    // events, while /metrics and every dashboard waited). Events appended
    // meanwhile come again below; each history skips what it holds. After
    // a clean stop each job takes up the fold it stored then.
    auto all = storage::fold_histories(*st.log, 1);
    if (!all)
      return all.error();
    st.histories = std::move(all->histories);
    st.position = all->position;
    st.restored = all->restored;
    st.first_fold_events = all->events;
    st.unsaved.insert(all->unsaved.begin(), all->unsaved.end());
  }
  for (;;) {
    auto xs = st.log->tail(st.position + 1, tail_chunk);
    if (!xs)
      return xs.error();
    for (const auto& x : *xs) {
      auto ev = storage::decode_stored_event(x.job_id, x.seq, x.bytes);
      if (!ev)
        return ev.error();
      auto [i, added] = st.histories.try_emplace(x.job_id, size_t{1});
      if (added && x.seq > 1)
        if (auto err = storage::seed_history(*st.log, x.job_id, x.seq,
                                             i->second))
          return err;
      // A job put again after the retention removed its deleted history
      // starts over at seq 1. Its old life is gone from the log, so it goes
      // from the fold too, as after a restart; kept, it hid the new life's
      // events below its last seq (/metrics counted one job too few).
      if (!added && ev->seq == 1 && i->second.seq() > 0)
        i->second = job_history{size_t{1}};
      if (ev->seq > i->second.seq()) {
        i->second.add(*ev);
        st.unsaved.insert(x.job_id);
      }
      st.position = x.position;
    }
    if (xs->size() < tail_chunk)
      return caf::none;
  }
}

job_view make_view(self_ptr self, job_inspection x) {
  job_view result;
  auto i = self->state.histories.find(x.model.spec.job_id);
  if (i != self->state.histories.end()) {
    const auto& h = i->second;
    result.subscription = h.subscription();
    if (h.active())
      result.active = *h.active();
    if (const auto* last = h.last_finished())
      result.last = *last;
  }
  result.job = std::move(x);
  return result;
}

// The inspector's answer to the shared status request.
component_status status_of(const inspector_state& st, status_verbosity v) {
  component_status result;
  result.name = inspector_state::name;
  result.kind = inspector_state::name;
  result.counters["histories"] = st.histories.size();
  result.counters["position"] = st.position;
  result.counters["restored"] = st.restored;
  result.counters["first_fold_events"] = st.first_fold_events;
  result.counters["unsaved"] = st.unsaved.size();
  result.counters["stored"] = st.stored;
  result.counters["store_failures"] = st.store_failures;
  // The histories are caught up lazily, before the next answer that needs
  // them: events appended since then are not folded yet.
  if (v == status_verbosity::detailed) {
    auto last = st.log->last_position();
    result.counters["unfolded"] = last > st.position ? last - st.position : 0;
  }
  return result;
}

// The stored form of job `id`'s fold `h`.
digest_record record_of(const std::string& id, const job_history& h) {
  return {id, h.seq(), storage::encode_history(h.state())};
}

} // namespace

inspector_actor::behavior_type
inspector(inspector_actor::stateful_pointer<inspector_state> self,
          const storage::event_log* log, job_registry_actor registry,
          journal_actor journal, event_hub_actor hub,
          std::chrono::milliseconds store_interval) {
  if (log == nullptr) {
    self->quit(make_error(errc::invalid_argument, "inspector has no log"));
    return inspector_actor::behavior_type::make_empty_behavior();
  }
  auto& st = self->state;
  st.log = log;
  st.registry = std::move(registry);
  st.journal = std::move(journal);
  st.hub = std::move(hub);
  st.store_interval = store_interval;
  self->delayed_send(self, fold_interval, sweep_atom::value);
  if (store_interval.count() > 0)
    self->delayed_send(self, store_interval, history_atom::value);
  return {
    [=](list_atom, std::string& ns) -> caf::result<std::vector<job_view>> {
      auto rp = self->make_response_promise<std::vector<job_view>>();
      self
        ->request(self->state.registry, ask_timeout, inspect_atom::value,
                  list_atom::value)
        .then(
          [=](std::vector<job_inspection>& xs) mutable {
            // After the registry answered, so the histories are at least as
            // new as the states.
            if (auto err = catch_up(self)) {
              rp.deliver(err);
              return;
            }
            std::vector<job_view> result;
            for (auto& x : xs)
              if (ns.empty() || x.model.spec.ns == ns)
                result.push_back(make_view(self, std::move(x)));
            std::sort(result.begin(), result.end(),
                      [](const auto& a, const auto& b) {
                        return a.job.model.spec.job_id
                               < b.job.model.spec.job_id;
                      });
            rp.deliver(std::move(result));
          },
          [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](get_atom, std::string& id) -> caf::result<job_view> {
      if (auto err = validate_job_id(id))
        return to_error(err);
      auto rp = self->make_response_promise<job_view>();
      self
        ->request(self->state.registry, ask_timeout, inspect_atom::value, id)
        .then(
          [=](job_inspection& x) mutable {
            if (auto err = catch_up(self)) {
              rp.deliver(err);
              return;
            }
            rp.deliver(make_view(self, std::move(x)));
          },
          [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](status_atom, status_verbosity v) -> component_status {
      return status_of(self->state, v);
    },
    [=](sweep_atom) {
      // A failed read is retried at the next fold; an answer that needs
      // the histories reports it.
      auto err = catch_up(self);
      auto what = err ? message_of(err) : std::string{};
      if (!what.empty() && what != self->state.fold_error)
        ES_WARN("inspector could not fold the log: {}", what);
      self->state.fold_error = std::move(what);
      self->delayed_send(self, fold_interval, sweep_atom::value);
    },
    [=](history_atom) {
      // Stores some of the folds that changed, so that the first fold after
      // a crash reads only the events after them. One store at a time; a
      // job that moves on is marked again when its next event is folded.
      auto& st = self->state;
      self->delayed_send(self, st.store_interval, history_atom::value);
      // Caught up first: what changed since the last sweep is stored too.
      if (st.storing || catch_up(self) || st.unsaved.empty())
        return;
      std::vector<std::string> ids;
      for (auto i = st.unsaved.begin();
           i != st.unsaved.end() && ids.size() < max_stored_per_round;)
        ids.push_back(std::move(st.unsaved.extract(i++).value()));
      std::vector<digest_record> xs;
      for (const auto& id : ids)
        if (auto i = st.histories.find(id);
            i != st.histories.end() && i->second.seq() > 0)
          xs.push_back(record_of(id, i->second));
      st.storing = true;
      self
        ->request(st.journal, ask_timeout, digest_atom::value,
                  history_atom::value, std::move(xs))
        .then(
          [=](uint64_t n) {
            self->state.storing = false;
            self->state.stored += n;
          },
          [=](caf::error& err) {
            auto& st = self->state;
            st.storing = false;
            if (st.store_failures++ == 0)
              ES_WARN("inspector could not store the jobs' folds (a start "
                      "after a crash folds their events again): {}",
                      message_of(err));
            st.unsaved.insert(ids.begin(), ids.end());
          });
    },
    [=](digest_atom, history_atom) -> caf::result<uint64_t> {
      if (auto err = catch_up(self))
        return err;
      std::vector<digest_record> xs;
      xs.reserve(self->state.histories.size());
      for (const auto& [id, h] : self->state.histories)
        if (h.seq() > 0)
          xs.push_back(record_of(id, h));
      self->state.unsaved.clear();
      auto rp = self->make_response_promise<uint64_t>();
      self
        ->request(self->state.journal, ask_timeout, digest_atom::value,
                  history_atom::value, std::move(xs))
        .then([=](uint64_t n) mutable { rp.deliver(n); },
              [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](goodput_atom, std::string& id) -> caf::result<goodput_report> {
      if (!id.empty())
        if (auto err = validate_job_id(id))
          return to_error(err);
      if (auto err = catch_up(self))
        return err;
      goodput_report result;
      result.now_ms = system_clock_ms();
      for (const auto& [job, h] : self->state.histories) {
        auto x = h.figures(result.now_ms);
        result.fleet.merge(x);
        if (h.exists() && (id.empty() || id == job))
          result.jobs.push_back({job, std::move(x)});
      }
      result.fleet.finish();
      if (!id.empty() && result.jobs.empty())
        return make_error(errc::unknown_job, "job " + id + " is not known");
      std::sort(result.jobs.begin(), result.jobs.end(),
                [](const auto& a, const auto& b) { return a.job_id < b.job_id; });
      return result;
    },
    [=](metrics_atom) -> caf::result<cluster_stats> {
      if (auto err = catch_up(self))
        return err;
      auto stats = std::make_shared<cluster_stats>();
      auto now = system_clock_ms();
      for (const auto& [id, h] : self->state.histories) {
        if (h.exists()) {
          ++stats->jobs;
          if (h.registered())
            ++stats->registered;
        }
        if (h.active())
          ++stats->active_flows[{h.active()->kind, h.active()->state}];
        for (const auto& [key, n] : h.counts())
          stats->finished[key] += n;
        stats->goodput.merge(h.tally());
        stats->fleet.merge(h.figures(now));
      }
      stats->fleet.finish();
      stats->events = self->state.position;
      auto rp = self->make_response_promise<cluster_stats>();
      self->request(self->state.journal, ask_timeout, status_atom::value)
        .then(
          [=](journal_stats& js) mutable {
            stats->journal_batches = js.batches;
            stats->journal_records = js.records;
            stats->journal_write_micros = js.write_micros;
            stats->journal_failed = !js.failure.empty();
            stats->journal_hist = js.hist;
            stats->purged_events = js.purged_events;
            stats->purged_live_events = js.purged_live_events;
            stats->kept_incidents = js.kept_incidents;
            self->request(self->state.hub, ask_timeout, status_atom::value)
              .then(
                [=](hub_stats& hs) mutable {
                  stats->hub = hs;
                  rp.deliver(std::move(*stats));
                },
                [=](caf::error& err) mutable { rp.deliver(err); });
          },
          [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
  };
}

} // namespace recoverd
