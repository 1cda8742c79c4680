#include "actors/job_inspect.hpp"

#include <algorithm>

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

} // namespace recoverd
