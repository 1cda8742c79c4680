#include "storage/job_runs.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace recoverd::storage {

caf::error
for_each_job(const event_log& log, size_t n, size_t threads, size_t run,
             const std::function<caf::error(event_log::reader&, size_t)>& f) {
  run = std::max<size_t>(run, 1);
  std::vector<caf::error> errors(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    event_log::reader reader{log};
    for (;;) {
      auto first = next.fetch_add(run);
      if (first >= n)
        return;
      for (auto i = first; i < std::min(first + run, n); ++i) {
        if (failed.load(std::memory_order_relaxed))
          return;
        if (auto err = f(reader, i)) {
          errors[i] = std::move(err);
          failed = true;
          return;
        }
      }
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t)
    workers.emplace_back(work);
  work();
  for (auto& w : workers)
    w.join();
  for (auto& err : errors)
    if (err)
      return std::move(err);
  return caf::none;
}

} // namespace recoverd::storage
