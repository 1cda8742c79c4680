#pragma once

#include <caf/actor_system.hpp>

#include "actors/actors.hpp"
#include <memory>

#include "platform.grpc.pb.h"
#include "services/access.hpp"
#include "services/report_gate.hpp"

namespace recoverd {

/// The `Platform` service: proto <-> domain and on to the job registry.
class platform_service final
  : public recoverd::platform::v1::Platform::CallbackService {
public:
  /// @param stream_buffer Messages a watch stream may queue.
  /// @param nodes The fleet's node registry; without one (null) the node
  ///        health RPCs see the jobs' records only.
  /// @param directory The registry's job table: ReportDeviceFaults reaches
  ///        the jobs it lists directly; without one (null), or for a job
  ///        it does not list, through the registry.
  /// @param gate Closed while ReportDeviceFaults is stopping many jobs, so
  ///        that the agents' answers wait; may be null.
  platform_service(caf::actor_system& sys, job_registry_actor registry,
                   size_t stream_buffer, access_settings access = {},
                   node_registry_actor nodes = {},
                   job_directory_ptr directory = {},
                   std::shared_ptr<report_gate> gate = nullptr);

  grpc::ServerUnaryReactor*
  PutJob(grpc::CallbackServerContext* ctx,
         const recoverd::platform::v1::PutJobRequest* req,
         recoverd::platform::v1::PutJobResponse* resp) override;

  grpc::ServerUnaryReactor*
  DeleteJob(grpc::CallbackServerContext* ctx,
            const recoverd::platform::v1::JobRef* req,
            recoverd::platform::v1::DeleteJobResponse* resp) override;

  grpc::ServerUnaryReactor*
  GetJob(grpc::CallbackServerContext* ctx,
         const recoverd::platform::v1::JobRef* req,
         recoverd::platform::v1::JobStatus* resp) override;

  grpc::ServerUnaryReactor*
  ListJobs(grpc::CallbackServerContext* ctx,
           const recoverd::platform::v1::ListJobsRequest* req,
           recoverd::platform::v1::ListJobsResponse* resp) override;

  grpc::ServerUnaryReactor*
  SetAnnotations(grpc::CallbackServerContext* ctx,
                 const recoverd::platform::v1::SetAnnotationsRequest* req,
                 recoverd::platform::v1::Annotations* resp) override;

  grpc::ServerUnaryReactor*
  GetAnnotations(grpc::CallbackServerContext* ctx,
                 const recoverd::platform::v1::JobRef* req,
                 recoverd::platform::v1::Annotations* resp) override;

  grpc::ServerWriteReactor<recoverd::platform::v1::Annotations>*
  WatchAnnotations(grpc::CallbackServerContext* ctx,
                   const recoverd::platform::v1::JobRef* req) override;

  grpc::ServerUnaryReactor*
  ListNodeHealth(grpc::CallbackServerContext* ctx,
                 const recoverd::platform::v1::ListNodeHealthRequest* req,
                 recoverd::platform::v1::ListNodeHealthResponse* resp) override;

  grpc::ServerUnaryReactor*
  ClearNodeHealth(grpc::CallbackServerContext* ctx,
                  const recoverd::platform::v1::ClearNodeHealthRequest* req,
                  recoverd::platform::v1::ClearNodeHealthResponse* resp) override;

  grpc::ServerUnaryReactor* ReportDeviceFaults(
    grpc::CallbackServerContext* ctx,
    const recoverd::platform::v1::ReportDeviceFaultsRequest* req,
    recoverd::platform::v1::ReportDeviceFaultsResponse* resp) override;

private:
  caf::actor_system& sys_;
  job_registry_actor registry_;
  size_t stream_buffer_;
  access_settings access_;
  node_registry_actor nodes_;
  job_directory_ptr directory_;
  std::shared_ptr<report_gate> gate_;
};

} // namespace recoverd
