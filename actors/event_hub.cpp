#include "actors/event_hub.hpp"

#include <algorithm>

#include "actors/error.hpp"
#include "actors/log.hpp"

namespace recoverd {

namespace {

// Publishes the number of watchers (stats and the journal's gauge).
void count_watchers(event_hub_state& st) {
  st.stats.watchers = st.watchers.size();
  if (st.watching)
    st.watching->store(st.watchers.size());
}

// Forgets watchers that went away since the last event.
void forget_closed(event_hub_state& st) {
  auto& ws = st.watchers;
  ws.erase(std::remove_if(ws.begin(), ws.end(),
                          [](const auto& w) { return w.sink->closed(); }),
           ws.end());
  count_watchers(st);
}

} // namespace

event_hub_actor::behavior_type
event_hub(event_hub_actor::stateful_pointer<event_hub_state> self,
          watcher_gauge watching) {
  self->state.watching = std::move(watching);
  return {
    [=](publish_atom, std::vector<published_event>& xs) {
      auto& st = self->state;
      st.stats.published += xs.size();
      if (st.watchers.empty())
        return;
      auto& ws = st.watchers;
      for (const auto& x : xs)
        for (auto& w : ws) {
          if (!w.sink || (!w.job_id.empty() && w.job_id != x.job_id))
            continue;
          bool was_open = !w.sink->closed();
          // A sink queues without blocking; when its buffer is full it ends
          // its stream with RESOURCE_EXHAUSTED and refuses.
          if (!w.sink->push(x)) {
            if (was_open) {
              ++st.stats.dropped;
              ES_WARN("event_hub dropped a watcher of {} that fell behind",
                      w.job_id.empty() ? std::string{"every job"} : w.job_id);
            }
            w.sink = nullptr;
          }
        }
      ws.erase(std::remove_if(ws.begin(), ws.end(),
                              [](const auto& w) { return !w.sink; }),
               ws.end());
      count_watchers(st);
    },
    [=](watch_atom, std::string& job_id, event_sink_ptr& sink) {
      auto& st = self->state;
      // Forget watchers that went away since the last event.
      auto& ws = st.watchers;
      ws.erase(std::remove_if(ws.begin(), ws.end(),
                              [](const auto& w) { return w.sink->closed(); }),
               ws.end());
      ws.push_back({std::move(job_id), std::move(sink)});
      count_watchers(st);
      return ok_atom::value;
    },
    [=](status_atom) {
      auto& st = self->state;
      forget_closed(st);
      return st.stats;
    },
    [=](status_atom, status_verbosity) {
      auto& st = self->state;
      forget_closed(st);
      component_status result;
      result.name = event_hub_state::name;
      result.kind = event_hub_state::name;
      result.counters["watchers"] = st.stats.watchers;
      result.counters["published"] = st.stats.published;
      result.counters["dropped"] = st.stats.dropped;
      return result;
    },
    [=](shutdown_atom) {
      auto& st = self->state;
      auto bye = make_error(errc::shutting_down, "recoverd is shutting down");
      for (auto& w : st.watchers)
        w.sink->finish(bye);
      st.watchers.clear();
      count_watchers(st);
      return ok_atom::value;
    },
  };
}

} // namespace recoverd
