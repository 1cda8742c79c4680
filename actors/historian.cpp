#include "actors/historian.hpp"

#include <algorithm>

#include "actors/error.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"
#include "storage/retention.hpp"

namespace recoverd {

namespace {

using self_ptr = historian_actor::stateful_pointer<historian_state>;

// Jobs whose full histories the historian keeps for ListIncidents.
constexpr size_t cached_histories = 8;

// ListEvents page sizes.
constexpr uint32_t default_page = 100;
constexpr uint32_t max_page = 1000;

caf::error bad(const std::string& field, const std::string& what) {
  return make_error(errc::invalid_argument, field + ": " + what);
}

inspected_event render(const std::string& job_id, const event& ev,
                       std::string bytes) {
  return {job_id,   ev.seq, ev.time_ms, kind_name(ev.body), describe(ev),
          std::move(bytes)};
}

// The first and last seqs of a job's stored events.
struct stored_range {
  uint64_t first = 0;
  uint64_t last = 0;
};

// The job's stored seqs; unknown_job when it has no events at all.
caf::expected<stored_range> known_range(self_ptr self, const std::string& id) {
  if (auto err = validate_job_id(id))
    return to_error(err);
  const auto& log = *self->state.log;
  auto last = log.last_seq(id);
  if (!last)
    return last.error();
  if (*last == 0)
    return make_error(errc::unknown_job, "job " + id + " has no events");
  auto first = log.first_seq(id);
  if (!first)
    return first.error();
  return stored_range{std::max<uint64_t>(*first, 1), *last};
}

caf::error purged_before(const std::string& id, uint64_t first,
                         const std::string& what) {
  return make_error(errc::history_purged,
                    "job " + id + ": " + what
                      + " was removed by the retention (--retention); the "
                        "job's first kept event is seq "
                      + std::to_string(first));
}

// Whether the job's stored events are those of `c` plus appends: the same
// first seq, and the same event still at the last seq folded.
bool still_valid(self_ptr self, const std::string& id, uint64_t first,
                 const cached_history& c) {
  if (c.first_seq != first || c.history.seq() == 0)
    return false;
  auto xs = self->state.log->read(id, c.history.seq(), 1);
  return xs && !xs->empty() && xs->front().seq == c.history.seq()
         && xs->front().bytes == c.last_bytes;
}

// The full history of job `id`, whose first stored seq is `first`: from the
// cache, with the events appended since folded in; folded from the start
// when it is not cached or its events changed otherwise (a purge, a job
// deleted and put again): each ask used to fold the job's whole log.
caf::expected<const job_history*>
incident_history(self_ptr self, const std::string& id, uint64_t first) {
  auto& st = self->state;
  auto& cache = st.incident_cache;
  auto i = cache.find(id);
  if (i != cache.end() && !still_valid(self, id, first, i->second)) {
    cache.erase(i);
    i = cache.end();
  }
  if (i == cache.end()) {
    if (cache.size() >= cached_histories)
      cache.erase(std::min_element(cache.begin(), cache.end(),
                                   [](const auto& x, const auto& y) {
                                     return x.second.used < y.second.used;
                                   }));
    i = cache.try_emplace(id).first;
    i->second.first_seq = first;
  }
  auto& c = i->second;
  c.used = ++st.incident_asks;
  std::string last_bytes;
  auto err = st.log->for_each(
    id, c.history.seq() + 1,
    [&](uint64_t seq, std::string_view bytes) -> caf::error {
      auto ev = storage::decode_stored_event(id, seq, bytes);
      if (!ev)
        return ev.error();
      ++st.incident_events_read;
      c.history.add(*ev);
      last_bytes.assign(bytes);
      return caf::none;
    });
  if (err) {
    cache.erase(i);
    return err;
  }
  if (!last_bytes.empty())
    c.last_bytes = std::move(last_bytes);
  return &c.history;
}

// The historian's answer to the shared status request.
component_status status_of(const historian_state& st) {
  component_status result;
  result.name = historian_state::name;
  result.kind = historian_state::name;
  result.counters["asked"] = st.asked;
  result.counters["incident_histories"] = st.incident_cache.size();
  result.counters["incident_events_read"] = st.incident_events_read;
  result.counters["at_events_read"] = st.at_events_read;
  return result;
}

} // namespace

historian_actor::behavior_type
historian(historian_actor::stateful_pointer<historian_state> self,
          const storage::event_log* log) {
  if (log == nullptr) {
    self->quit(make_error(errc::invalid_argument, "historian has no log"));
    return historian_actor::behavior_type::make_empty_behavior();
  }
  self->state.log = log;
  return {
    [=](events_atom, std::string& id, uint64_t from,
        uint32_t limit) -> caf::result<event_page> {
      ++self->state.asked;
      auto range = known_range(self, id);
      if (!range)
        return range.error();
      if (limit == 0)
        limit = default_page;
      limit = std::min(limit, max_page);
      // Events the retention removed are not an error: the page starts at
      // the first kept one, and says so.
      from = std::max<uint64_t>(from, 1);
      auto xs = self->state.log->read(id, from, limit);
      if (!xs)
        return xs.error();
      event_page page;
      page.first_seq = range->first;
      for (auto& x : *xs) {
        auto ev = storage::decode_stored_event(id, x.seq, x.bytes);
        if (!ev)
          return ev.error();
        page.events.push_back(render(id, *ev, std::move(x.bytes)));
      }
      page.last_seq = range->last;
      if (!page.events.empty()) {
        auto back = page.events.back().seq;
        page.last_seq = std::max(page.last_seq, back);
        if (back < page.last_seq)
          page.next_seq = back + 1;
      }
      return page;
    },
    [=](incidents_atom, std::string& id) -> caf::result<incident_list> {
      ++self->state.asked;
      auto range = known_range(self, id);
      if (!range)
        return range.error();
      // What the retention kept of removed events, then the incidents of
      // the stored ones (which start between two flows).
      auto kept = storage::kept_incidents(*self->state.log, id);
      if (!kept)
        return kept.error();
      auto h = incident_history(self, id, range->first);
      if (!h)
        return h.error();
      auto xs = std::move(*kept);
      for (auto& x : (*h)->all())
        xs.push_back(std::move(x));
      return incident_list{std::move(xs), (*h)->seq()};
    },
    [=](at_atom, std::string& id, history_point& at) -> caf::result<job_at> {
      ++self->state.asked;
      auto range = known_range(self, id);
      if (!range)
        return range.error();
      if (!at.by_time && at.seq == 0)
        return bad("seq", "must be >= 1");
      if (!at.by_time && at.seq > range->last)
        return bad("seq", std::to_string(at.seq) + " is after the job's last "
                            "event " + std::to_string(range->last));
      if (!at.by_time && at.seq < range->first)
        return purged_before(id, range->first,
                             "the state at seq " + std::to_string(at.seq));
      // One pass for the point (a time needs every event's time) and the
      // flow running there; the state itself comes from replay.
      job_history h;
      uint64_t target = 0;
      auto done = make_error(errc::overloaded, "done");
      auto err = self->state.log->for_each(
        id, 1, [&](uint64_t seq, std::string_view bytes) -> caf::error {
          auto ev = storage::decode_stored_event(id, seq, bytes);
          if (!ev)
            return ev.error();
          if (at.by_time ? ev->time_ms > at.time_ms : seq > at.seq)
            return done;
          ++self->state.at_events_read;
          h.add(*ev);
          target = seq;
          return caf::none;
        });
      if (err && err != done)
        return err;
      if (target == 0 && range->first > 1)
        return purged_before(id, range->first,
                             "the state at time "
                               + std::to_string(at.time_ms));
      if (target == 0)
        return bad("timeMs", "job " + id + " has no event at or before "
                               + std::to_string(at.time_ms));
      auto replayed = storage::replay_job(*self->state.log, id, target);
      if (!replayed)
        return replayed.error();
      auto xs = self->state.log->read(id, target, 1);
      if (!xs)
        return xs.error();
      if (xs->empty())
        return make_error(errc::corrupt_record, "job " + id + " event "
                                                  + std::to_string(target)
                                                  + " vanished");
      auto ev = storage::decode_stored_event(id, target, xs->front().bytes);
      if (!ev)
        return ev.error();
      job_at result;
      result.state = std::move(replayed->state);
      result.event = render(id, *ev, std::move(xs->front().bytes));
      if (h.active())
        result.active = *h.active();
      return result;
    },
    [=](status_atom, status_verbosity) -> component_status {
      return status_of(self->state);
    },
  };
}

} // namespace recoverd
