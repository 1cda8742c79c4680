#include "services/recover_service.hpp"

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "convert.hpp"
#include "services/bridge.hpp"
#include "services/stream.hpp"

namespace recoverd {

namespace {

client_info to_client(grpc::CallbackServerContext* ctx,
                      const ::ClientInfo& req) {
  return {req.jobid(), req.role(), ctx->peer()};
}

grpc::Status empty_job_id() {
  return {grpc::StatusCode::INVALID_ARGUMENT, "jobId: must not be empty"};
}

// Answers a business status into `Status{code, info}` with gRPC OK.
auto fill(::Status* resp) {
  return [resp](const biz_status& x) {
    resp->set_code(x.code);
    resp->set_info(x.info);
    return grpc::Status::OK;
  };
}

} // namespace

recover_service::recover_service(caf::actor_system& sys,
                                 job_registry_actor registry,
                                 size_t stream_buffer)
  : sys_(sys), registry_(std::move(registry)), stream_buffer_(stream_buffer) {
  // nop
}

grpc::ServerUnaryReactor* recover_service::Init(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (req->jobid().empty()) {
    reactor->Finish(empty_job_id());
    return reactor;
  }
  ask<biz_status>(sys_, registry_, reactor, fill(resp), init_atom::value,
                  to_client(ctx, *req));
  return reactor;
}

grpc::ServerUnaryReactor* recover_service::Register(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (req->jobid().empty()) {
    reactor->Finish(empty_job_id());
    return reactor;
  }
  ask<biz_status>(sys_, registry_, reactor, fill(resp), register_atom::value,
                  to_client(ctx, *req));
  return reactor;
}

grpc::ServerWriteReactor<::ProcessManageSignal>*
recover_service::SubscribeProcessManageSignal(grpc::CallbackServerContext* ctx,
                                              const ::ClientInfo* req) {
  using stream_type = grpc_stream<::ProcessManageSignal, process_signal>;
  auto* stream = new stream_type(
    stream_buffer_, [](const process_signal& x, ::ProcessManageSignal& out) {
      convert::to_proto(x, out);
    });
  signal_sink_ptr sink = stream->sink();
  if (req->jobid().empty()) {
    sink->finish(make_error(errc::invalid_argument, "jobId: must not be empty"));
    return stream;
  }
  open_stream<ok_atom>(sys_, registry_, sink, subscribe_atom::value,
                       to_client(ctx, *req));
  return stream;
}

grpc::ServerUnaryReactor* recover_service::HealthCheck(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  // Stateless, as in the reference: no actor involved.
  resp->set_code(0);
  resp->set_info("jobId=" + req->jobid() + ", receive HeathCheck");
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

} // namespace recoverd
