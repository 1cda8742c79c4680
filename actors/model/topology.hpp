#pragma once

/// Where each global rank of a job lives: its pod, device and node. Built
/// once per spec (PutJob), so a machine step looks ranks up in O(1) instead
/// of rebuilding a map from the whole topology.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/model/types.hpp"

namespace recoverd {

/// The place of one global rank.
struct rank_place {
  /// Index into `job_spec::pods`.
  uint32_t pod_index = 0;
  /// Index into that pod's `devices`.
  uint32_t device_index = 0;
  /// The pod's rank within the job.
  int32_t pod_rank = 0;
};

/// A job's topology, indexed. Holds indices, not pointers, so it stays
/// valid for every copy of the spec it was built from.
class rank_index {
public:
  rank_index() = default;

  /// Indexes `spec`.
  explicit rank_index(const job_spec& spec);

  /// The place of `rank`, or null when the job has no such rank.
  const rank_place* find(const std::string& rank) const;

  /// The pod of `pod_rank`, or null when the job has no such pod.
  const pod* find_pod(const job_spec& spec, int32_t pod_rank) const;

  /// Indices of the pods on `node` (empty when none).
  const std::vector<uint32_t>& pods_on(const std::string& node) const;

  /// Number of ranks indexed.
  size_t size() const noexcept {
    return size_;
  }

private:
  // Ranks are decimal numbers 0..n-1 in every job seen: those are found in
  // a vector, one cache line away (256 ranks: the hashed lookup was 0.7%
  // of a report's CPU, mostly misses); any other id in the map.
  std::vector<rank_place> by_number_;
  std::unordered_map<std::string, rank_place> by_rank_;
  size_t limit_ = 0; // numbers from here on are kept in the map
  size_t size_ = 0;
  std::unordered_map<int32_t, uint32_t> by_pod_rank_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_node_;
};

/// A shared, immutable index: copies of a job model share it.
using rank_index_ptr = std::shared_ptr<const rank_index>;

/// Builds the shared index of `spec`.
rank_index_ptr make_rank_index(const job_spec& spec);

/// The key of a device in a job: its node and its id on that node, joined
/// by a NUL (neither a node name nor a device id holds one).
std::string device_key(const std::string& node, const std::string& device_id);

} // namespace recoverd
