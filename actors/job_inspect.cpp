#include "actors/job_inspect.hpp"

#include <algorithm>

#include "actors/model/vocabulary.hpp"

namespace recoverd {

namespace {

template <class Sinks>
uint32_t open_count(const Sinks& xs) {
  return static_cast<uint32_t>(
    std::count_if(xs.begin(), xs.end(),
                  [](const auto& x) { return x && !x->closed(); }));
}

} // namespace

job_inspection inspect_job(const job_state& st) {
  job_inspection result;
  result.model = st.model;
  auto& live = result.live;
  live.subscribed = st.subscriber != nullptr && !st.subscriber->closed();
  live.generation = live.subscribed ? st.live_generation : 0;
  live.annotation_watchers = open_count(st.watchers);
  live.switch_workers = open_count(st.switch_workers);
  live.operators = open_count(st.operators);
  return result;
}

component_status job_status_of(const job_state& st, status_verbosity v) {
  const auto& m = st.model;
  auto live = inspect_job(st).live;
  component_status result;
  result.name = std::string{"job/"} + m.spec.job_id;
  result.kind = job_state::name;
  if (!m.exists)
    result.problem = "not put (or deleted)";
  result.facts["recoveryState"] = to_string(m.rec.flow.state);
  result.facts["healthState"] = m.health_state;
  result.counters["seq"] = m.seq;
  result.counters["registered"] = m.registered ? 1 : 0;
  result.counters["subscribed"] = live.subscribed ? 1 : 0;
  if (v == status_verbosity::detailed) {
    result.facts["namespace"] = m.spec.ns;
    result.facts["uuid"] = m.rec.flow.uuid;
    result.counters["pods"] = m.spec.pods.size();
    result.counters["generation"] = live.generation;
    result.counters["annotationWatchers"] = live.annotation_watchers;
    // Held sinks, ended ones included: shows that ended streams go.
    result.counters["annotationWatcherSlots"] = st.watchers.size();
    result.counters["switchWorkers"] = live.switch_workers;
    result.counters["stressWorkers"] = open_count(st.stress_workers);
    result.counters["operators"] = live.operators;
    result.counters["eventsSinceSnapshot"] = st.tail.events;
    result.counters["bytesSinceSnapshot"] = st.tail.bytes;
    result.counters["snapshotBytes"] = st.tail.snapshot_bytes;
  }
  return result;
}

} // namespace recoverd
