#pragma once

/// The registry's job table, published read-only for the gRPC edge, so that
/// a report goes straight to its job instead of through the registry.

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/actors.hpp"

namespace recoverd {

/// Job id -> job actor, written by the JOB REGISTRY only and read by any
/// thread. A miss is no verdict: callers ask the registry then, which
/// knows every job (the directory may lag behind it by a message).
class job_directory {
public:
  /// Counts the requests of one job on their way to it or in its hands.
  using counter_ptr = std::shared_ptr<std::atomic<size_t>>;

  /// A listed job: its actor and its counter of requests in flight.
  struct entry {
    /// The job actor; invalid when not listed.
    job_actor hdl;
    /// Requests sent to it and not yet answered (the edge keeps it, so that
    /// a job's mailbox stays bounded).
    counter_ptr in_flight;
  };

  /// The job actor of `job_id`, or an invalid handle when not listed.
  job_actor find(const std::string& job_id) const {
    return lookup(job_id).hdl;
  }

  /// The entry of `job_id`; an invalid handle when not listed.
  entry lookup(const std::string& job_id) const {
    std::shared_lock<std::shared_mutex> guard{mtx_};
    auto i = jobs_.find(job_id);
    return i == jobs_.end() ? entry{} : i->second;
  }

  /// Lists `hdl` as the actor of `job_id`.
  void put(const std::string& job_id, job_actor hdl) {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    jobs_[job_id] = entry{std::move(hdl),
                          std::make_shared<std::atomic<size_t>>(0)};
  }

  /// Forgets `job_id` if `hdl` is still its actor.
  void erase(const std::string& job_id, const job_actor& hdl) {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    auto i = jobs_.find(job_id);
    if (i != jobs_.end() && i->second.hdl == hdl)
      jobs_.erase(i);
  }

  /// Forgets every job (shutdown: no handle may outlive the actor system).
  void clear() {
    take_all();
  }

  /// Forgets every job and returns their actors.
  std::vector<job_actor> take_all() {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    std::vector<job_actor> result;
    result.reserve(jobs_.size());
    for (auto& kv : jobs_)
      result.push_back(std::move(kv.second.hdl));
    jobs_.clear();
    return result;
  }

private:
  mutable std::shared_mutex mtx_;
  std::unordered_map<std::string, entry> jobs_;
};

} // namespace recoverd
