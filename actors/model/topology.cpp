#include "actors/model/topology.hpp"

#include <optional>

namespace recoverd {

namespace {

// Marks a slot of `by_number_` that holds no rank.
constexpr uint32_t no_pod = UINT32_MAX;

// `rank` as a number when it is one written the canonical way (digits, no
// leading zero) below `limit`.
std::optional<size_t> small_number(const std::string& rank, size_t limit) {
  if (rank.empty() || rank.size() > 9 || (rank[0] == '0' && rank.size() > 1))
    return std::nullopt;
  size_t n = 0;
  for (auto c : rank) {
    if (c < '0' || c > '9')
      return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  if (n >= limit)
    return std::nullopt;
  return n;
}

} // namespace

rank_index::rank_index(const job_spec& spec) {
  size_t devices = 0;
  for (const auto& p : spec.pods)
    devices += p.devices.size();
  // Room for the numbers a job's ranks use, and a bound on what odd ids
  // may cost: twice the ranks.
  limit_ = 2 * devices;
  for (uint32_t i = 0; i < spec.pods.size(); ++i) {
    const auto& p = spec.pods[i];
    by_pod_rank_.emplace(p.pod_rank, i);
    by_node_[p.node_name].push_back(i);
    for (uint32_t j = 0; j < p.devices.size(); ++j) {
      const auto& id = p.devices[j].rank_id;
      rank_place place{i, j, p.pod_rank};
      // The first place of a rank id counts, wherever it is kept.
      if (auto n = small_number(id, limit_)) {
        if (*n >= by_number_.size())
          by_number_.resize(*n + 1, rank_place{no_pod, 0, 0});
        if (by_number_[*n].pod_index == no_pod) {
          by_number_[*n] = place;
          ++size_;
        }
      } else if (by_rank_.emplace(id, place).second) {
        ++size_;
      }
    }
  }
}

const rank_place* rank_index::find(const std::string& rank) const {
  if (auto n = small_number(rank, limit_)) {
    if (*n < by_number_.size() && by_number_[*n].pod_index != no_pod)
      return &by_number_[*n];
    return nullptr;
  }
  auto i = by_rank_.find(rank);
  return i == by_rank_.end() ? nullptr : &i->second;
}

const pod* rank_index::find_pod(const job_spec& spec, int32_t pod_rank) const {
  auto i = by_pod_rank_.find(pod_rank);
  if (i == by_pod_rank_.end() || i->second >= spec.pods.size())
    return nullptr;
  return &spec.pods[i->second];
}

const std::vector<uint32_t>&
rank_index::pods_on(const std::string& node) const {
  static const std::vector<uint32_t> none;
  auto i = by_node_.find(node);
  return i == by_node_.end() ? none : i->second;
}

rank_index_ptr make_rank_index(const job_spec& spec) {
  return std::make_shared<const rank_index>(spec);
}

std::string device_key(const std::string& node, const std::string& device_id) {
  std::string result;
  result.reserve(node.size() + device_id.size() + 1);
  result += node;
  result += '\0';
  result += device_id;
  return result;
}

} // namespace recoverd
