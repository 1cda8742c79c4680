#include "actors/inspection.hpp"

#include <algorithm>

namespace recoverd {

void journal_histograms::observe(uint64_t events, uint64_t micros) {
  auto bucket = [](const auto& bounds, uint64_t x) {
    auto i = std::lower_bound(std::begin(bounds), std::end(bounds), x);
    return static_cast<size_t>(i - std::begin(bounds));
  };
  ++batches[bucket(batch_bounds, events)];
  ++writes[bucket(write_bounds, micros)];
}

} // namespace recoverd
