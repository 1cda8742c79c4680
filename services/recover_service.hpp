#pragma once

#include <caf/actor_system.hpp>

#include "actors/actors.hpp"
#include <functional>
#include <memory>

#include "recover.grpc.pb.h"
#include "services/access.hpp"
#include "services/report_gate.hpp"

namespace recoverd {

/// The `Recover` service: proto <-> domain and on to the job registry. RPCs
/// of later milestones are left to the generated base (UNIMPLEMENTED).
class recover_service final : public ::Recover::CallbackService {
public:
  /// Reports one job may have on their way or in its hands; more are
  /// refused with RESOURCE_EXHAUSTED (a job's mailbox stays bounded).
  static constexpr size_t max_reports_in_flight = 1024;

  /// @param stream_buffer Messages an agent stream may queue.
  /// @param directory Where reports find their job without asking the
  ///        registry; may be null (then every report goes through it).
  /// @param access Who may call what on the listener this instance serves.
  /// @param gate Where agents' answers wait while a fault is still stopping
  ///        other jobs; may be null (then they never wait).
  recover_service(caf::actor_system& sys, job_registry_actor registry,
                  size_t stream_buffer, job_directory_ptr directory = nullptr,
                  access_settings access = {},
                  std::shared_ptr<report_gate> gate = nullptr);

  grpc::ServerUnaryReactor* Init(grpc::CallbackServerContext* ctx,
                                 const ::ClientInfo* req,
                                 ::Status* resp) override;

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const ::ClientInfo* req,
                                     ::Status* resp) override;

  grpc::ServerWriteReactor<::ProcessManageSignal>*
  SubscribeProcessManageSignal(grpc::CallbackServerContext* ctx,
                               const ::ClientInfo* req) override;

  grpc::ServerUnaryReactor* ReportStopComplete(
    grpc::CallbackServerContext* ctx, const ::StopCompleteRequest* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* ReportRecoverStrategy(
    grpc::CallbackServerContext* ctx, const ::RecoverStrategyRequest* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* ReportRecoverStatus(
    grpc::CallbackServerContext* ctx, const ::RecoverStatusRequest* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* ReportProcessFault(
    grpc::CallbackServerContext* ctx, const ::ProcessFaultRequest* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* SwitchNicTrack(grpc::CallbackServerContext* ctx,
                                           const ::SwitchNics* req,
                                           ::Status* resp) override;

  grpc::ServerWriteReactor<::SwitchNicResponse>*
  SubscribeSwitchNicSignal(grpc::CallbackServerContext* ctx,
                           const ::SwitchNicRequest* req) override;

  grpc::ServerWriteReactor<::SwitchRankList>*
  SubscribeNotifySwitch(grpc::CallbackServerContext* ctx,
                        const ::ClientInfo* req) override;

  grpc::ServerUnaryReactor* ReplySwitchNicResult(
    grpc::CallbackServerContext* ctx, const ::SwitchResult* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* StressTest(grpc::CallbackServerContext* ctx,
                                       const ::StressTestParam* req,
                                       ::Status* resp) override;

  grpc::ServerWriteReactor<::StressTestResponse>*
  SubscribeStressTestResponse(grpc::CallbackServerContext* ctx,
                              const ::StressTestRequest* req) override;

  grpc::ServerWriteReactor<::StressTestRankParams>*
  SubscribeNotifyExecStressTest(grpc::CallbackServerContext* ctx,
                                const ::ClientInfo* req) override;

  grpc::ServerUnaryReactor* ReplyStressTestResult(
    grpc::CallbackServerContext* ctx, const ::StressTestResult* req,
    ::Status* resp) override;

  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* ctx,
                                        const ::ClientInfo* req,
                                        ::Status* resp) override;

private:
  // Opens an operator stream of `kind`.
  template <class Response>
  grpc::ServerWriteReactor<Response>*
  operator_stream(grpc::CallbackServerContext* ctx, const std::string& job_id,
                  om_kind kind, std::string_view method);

  // Hands a report to the job's recovery machine.
  grpc::ServerUnaryReactor* report(grpc::CallbackServerContext* ctx,
                                   std::string_view method,
                                   const std::string& job_id, report_kind kind,
                                   flow_input in, ::Status* resp);

  // Runs `send` (the report on its way to the job) now, or through the gate.
  template <class Send>
  void dispatch(report_kind kind, Send send);

  caf::actor_system& sys_;
  job_registry_actor registry_;
  size_t stream_buffer_;
  job_directory_ptr directory_;
  access_settings access_;
  std::shared_ptr<report_gate> gate_;
};

} // namespace recoverd
