#pragma once

#include <functional>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "services/access.hpp"
#include "actors/actors.hpp"
#include "inspect.grpc.pb.h"

namespace recoverd {

/// The Inspect operations, once for gRPC and HTTP alike. Each validates its
/// request, asks the inspector (the fleet), the historian (one job's past)
/// or the status desk without blocking, fills `resp` and calls `done`
/// exactly once with the status to answer with (at once on bad input,
/// otherwise from an actor thread). `resp` must stay valid until then.
class inspect_api {
public:
  /// Receives the outcome of an operation.
  using done_fn = std::function<void(const grpc::Status&)>;

  /// @param nodes The fleet's node registry; without one (null) ListNodes
  ///        is UNAVAILABLE and /metrics counts no nodes.
  inspect_api(caf::actor_system& sys, inspector_actor inspector,
              historian_actor historian, status_desk_actor desk,
              event_hub_actor hub, node_registry_actor nodes = {});

  /// ListJobs.
  void list_jobs(const recoverd::inspection::v1::ListJobsRequest& req,
                 recoverd::inspection::v1::ListJobsResponse* resp,
                 done_fn done) const;

  /// GetJob.
  void get_job(const recoverd::inspection::v1::GetJobRequest& req,
               recoverd::inspection::v1::JobDetail* resp, done_fn done) const;

  /// ListEvents.
  void list_events(const recoverd::inspection::v1::ListEventsRequest& req,
                   recoverd::inspection::v1::ListEventsResponse* resp,
                   done_fn done) const;

  /// ListIncidents.
  void list_incidents(const recoverd::inspection::v1::ListIncidentsRequest& req,
                      recoverd::inspection::v1::ListIncidentsResponse* resp,
                      done_fn done) const;

  /// GetJobAt.
  void get_job_at(const recoverd::inspection::v1::GetJobAtRequest& req,
                  recoverd::inspection::v1::JobAt* resp, done_fn done) const;

  /// GetStatus: every component's status, each asked with a timeout.
  void get_status(const recoverd::inspection::v1::GetStatusRequest& req,
                  recoverd::inspection::v1::StatusResponse* resp,
                  done_fn done) const;

  /// GetStats: the fleet's goodput and the live jobs'.
  void get_stats(const recoverd::inspection::v1::GetStatsRequest& req,
                 recoverd::inspection::v1::StatsResponse* resp,
                 done_fn done) const;

  /// ListNodes: the fleet's node registry.
  void list_nodes(const recoverd::inspection::v1::ListNodesRequest& req,
                  recoverd::inspection::v1::ListNodesResponse* resp,
                  done_fn done) const;

  /// WatchEvents: adds `sink` as a watcher; `done` says whether it was
  /// accepted (on refusal the sink is also ended with that status).
  void watch_events(const recoverd::inspection::v1::WatchEventsRequest& req,
                    event_sink_ptr sink, done_fn done = nullptr) const;

  /// The figures of /metrics, or why they are not available.
  void cluster(std::function<void(caf::expected<cluster_stats>)> done) const;

private:
  caf::actor_system& sys_;
  inspector_actor inspector_;
  historian_actor historian_;
  status_desk_actor desk_;
  event_hub_actor hub_;
  node_registry_actor nodes_;
};

/// The `Inspect` gRPC service over `inspect_api`.
class inspect_service final
  : public recoverd::inspection::v1::Inspect::CallbackService {
public:
  /// @param stream_buffer Events a watcher may have queued.
  /// @param access Who may call what on the listener this instance serves.
  inspect_service(const inspect_api& api, size_t stream_buffer,
                  access_settings access = {});

  grpc::ServerUnaryReactor*
  ListJobs(grpc::CallbackServerContext* ctx,
           const recoverd::inspection::v1::ListJobsRequest* req,
           recoverd::inspection::v1::ListJobsResponse* resp) override;

  grpc::ServerUnaryReactor*
  GetJob(grpc::CallbackServerContext* ctx,
         const recoverd::inspection::v1::GetJobRequest* req,
         recoverd::inspection::v1::JobDetail* resp) override;

  grpc::ServerUnaryReactor*
  ListEvents(grpc::CallbackServerContext* ctx,
             const recoverd::inspection::v1::ListEventsRequest* req,
             recoverd::inspection::v1::ListEventsResponse* resp) override;

  grpc::ServerWriteReactor<recoverd::inspection::v1::EventRecord>*
  WatchEvents(grpc::CallbackServerContext* ctx,
              const recoverd::inspection::v1::WatchEventsRequest* req) override;

  grpc::ServerUnaryReactor*
  ListIncidents(grpc::CallbackServerContext* ctx,
                const recoverd::inspection::v1::ListIncidentsRequest* req,
                recoverd::inspection::v1::ListIncidentsResponse* resp) override;

  grpc::ServerUnaryReactor*
  GetJobAt(grpc::CallbackServerContext* ctx,
           const recoverd::inspection::v1::GetJobAtRequest* req,
           recoverd::inspection::v1::JobAt* resp) override;

  grpc::ServerUnaryReactor*
  GetStatus(grpc::CallbackServerContext* ctx,
            const recoverd::inspection::v1::GetStatusRequest* req,
            recoverd::inspection::v1::StatusResponse* resp) override;

  grpc::ServerUnaryReactor*
  GetStats(grpc::CallbackServerContext* ctx,
           const recoverd::inspection::v1::GetStatsRequest* req,
           recoverd::inspection::v1::StatsResponse* resp) override;

  grpc::ServerUnaryReactor*
  ListNodes(grpc::CallbackServerContext* ctx,
            const recoverd::inspection::v1::ListNodesRequest* req,
            recoverd::inspection::v1::ListNodesResponse* resp) override;

private:
  const inspect_api& api_;
  size_t stream_buffer_;
  access_settings access_;
};

} // namespace recoverd
