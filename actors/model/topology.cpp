#include "actors/model/topology.hpp"

namespace recoverd {

rank_index::rank_index(const job_spec& spec) {
  by_rank_.reserve(spec.pods.size() * 8);
  for (uint32_t i = 0; i < spec.pods.size(); ++i) {
    const auto& p = spec.pods[i];
    by_pod_rank_.emplace(p.pod_rank, i);
    by_node_[p.node_name].push_back(i);
    for (uint32_t j = 0; j < p.devices.size(); ++j)
      by_rank_.emplace(p.devices[j].rank_id, rank_place{i, j, p.pod_rank});
  }
}

const rank_place* rank_index::find(const std::string& rank) const {
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
