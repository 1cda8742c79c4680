#pragma once

/// The registry's job table, published read-only for the gRPC edge, so that
/// a report goes straight to its job instead of through the registry.

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "actors/actors.hpp"

namespace recoverd {

/// Job id -> job actor, written by the JOB REGISTRY only and read by any
/// thread. A miss is no verdict: callers ask the registry then, which
/// knows every job (the directory may lag behind it by a message).
class job_directory {
public:
  /// The job actor of `job_id`, or an invalid handle when not listed.
  job_actor find(const std::string& job_id) const {
    std::shared_lock<std::shared_mutex> guard{mtx_};
    auto i = jobs_.find(job_id);
    return i == jobs_.end() ? job_actor{} : i->second;
  }

  /// Lists `hdl` as the actor of `job_id`.
  void put(const std::string& job_id, job_actor hdl) {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    jobs_[job_id] = std::move(hdl);
  }

  /// Forgets `job_id` if `hdl` is still its actor.
  void erase(const std::string& job_id, const job_actor& hdl) {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    auto i = jobs_.find(job_id);
    if (i != jobs_.end() && i->second == hdl)
      jobs_.erase(i);
  }

  /// Forgets every job (shutdown: no handle may outlive the actor system).
  void clear() {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    jobs_.clear();
  }

private:
  mutable std::shared_mutex mtx_;
  std::unordered_map<std::string, job_actor> jobs_;
};

} // namespace recoverd
