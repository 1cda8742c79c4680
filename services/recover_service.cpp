#include "services/recover_service.hpp"

#include <map>

#include "actors/error.hpp"
#include "actors/job_directory.hpp"
#include "actors/log.hpp"
#include "convert.hpp"
#include "services/bridge.hpp"
#include "services/guard.hpp"
#include "services/stream.hpp"

namespace recoverd {

namespace {

client_info to_client(grpc::CallbackServerContext* ctx,
                      const ::ClientInfo& req, const principal& who) {
  return {req.jobid(), req.role(), ctx->peer(), who.name};
}

// Finishes `reactor` with INVALID_ARGUMENT when `job_id` is not a valid id
// (the model's one check: empty, too long, control characters, '/').
bool reject_bad_id(grpc::ServerUnaryReactor* reactor, const std::string& job_id,
                   const std::string& field = "jobId") {
  if (auto err = to_error(validate_job_id(job_id, field))) {
    reactor->Finish(to_grpc_status(err));
    return true;
  }
  return false;
}

// Finishes `sink` with INVALID_ARGUMENT when `job_id` is not a valid id.
template <class Sink>
bool reject_bad_id(Sink& sink, const std::string& job_id,
                   const std::string& field = "jobId") {
  if (auto err = to_error(validate_job_id(job_id, field))) {
    sink->finish(err);
    return true;
  }
  return false;
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
                                 size_t stream_buffer,
                                 job_directory_ptr directory,
                                 access_settings access,
                                 std::shared_ptr<report_gate> gate)
  : sys_(sys), registry_(std::move(registry)), stream_buffer_(stream_buffer),
    directory_(std::move(directory)), access_(std::move(access)),
    gate_(std::move(gate)) {
  // nop
}

grpc::ServerUnaryReactor* recover_service::Init(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor, "/Recover/Init", req->jobid());
  if (!who || reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<biz_status>(sys_, registry_, reactor, fill(resp), init_atom::value,
                  to_client(ctx, *req, *who));
  return reactor;
}

grpc::ServerUnaryReactor* recover_service::Register(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor, "/Recover/Register", req->jobid());
  if (!who || reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<biz_status>(sys_, registry_, reactor, fill(resp), register_atom::value,
                  to_client(ctx, *req, *who));
  return reactor;
}

grpc::ServerWriteReactor<::ProcessManageSignal>*
recover_service::SubscribeProcessManageSignal(grpc::CallbackServerContext* ctx,
                                              const ::ClientInfo* req) {
  using stream_type = grpc_stream<::ProcessManageSignal, process_signal>;
  auto* stream = new stream_type(
    ctx, stream_buffer_, [](const process_signal& x, ::ProcessManageSignal& out) {
      convert::to_proto(x, out);
    });
  // The gate opens after a fault once the stops it sent are written.
  stream->sink()->count_writes(gate_);
  signal_sink_ptr sink = stream->sink();
  auto who = admit_stream(access_, ctx, sink,
                          "/Recover/SubscribeProcessManageSignal",
                          req->jobid());
  if (!who || reject_bad_id(sink, req->jobid()))
    return stream;
  open_stream<ok_atom>(sys_, registry_, sink, subscribe_atom::value,
                       to_client(ctx, *req, *who));
  return stream;
}

template <class Send>
void recover_service::dispatch(report_kind kind, Send send) {
  // An answer to a stop, a strategy or a switch may wait while a fault is
  // still stopping other jobs; a new fault never does. The common case
  // (no fault stopping jobs) wraps nothing.
  if (gate_ && kind != report_kind::process && !gate_->quiet())
    gate_->admit(std::function<void()>{std::move(send)});
  else
    send();
}

grpc::ServerUnaryReactor*
recover_service::report(grpc::CallbackServerContext* ctx,
                        std::string_view method, const std::string& job_id,
                        report_kind kind, flow_input in, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor, method, job_id);
  if (!who || reject_bad_id(reactor, job_id))
    return reactor;
  in.kind = kind;
  in.by = who->name;
  // The hot path: straight to the job, which answers through the reply sink
  // on its own thread; no actor of the edge in between. A job the directory
  // does not list (yet) is the registry's to find or refuse.
  if (directory_)
    if (auto x = directory_->lookup(job_id); x.hdl) {
      // The job's mailbox stays bounded: past the cap the report is
      // refused here, before it costs the job anything.
      if (x.in_flight->fetch_add(1) >= max_reports_in_flight) {
        x.in_flight->fetch_sub(1);
        ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "100");
        reactor->Finish({grpc::StatusCode::RESOURCE_EXHAUSTED,
                         "job " + job_id + " has "
                           + std::to_string(max_reports_in_flight)
                           + " reports waiting for it; retry in 100 ms"});
        return reactor;
      }
      // Released when the reply is gone: answered, or dropped with the
      // message.
      std::shared_ptr<void> release{nullptr, [c = x.in_flight](void*) {
                                      c->fetch_sub(1);
                                    }};
      auto reply = make_unary_reply<biz_status>(
        reactor, [f = fill(resp), release](const biz_status& s) {
          return f(s);
        });
      dispatch(kind, [hdl = x.hdl, in = std::move(in), reply]() mutable {
        caf::anon_send(hdl, report_atom::value, std::move(in),
                       std::move(reply));
      });
      return reactor;
    }
  auto reply = make_unary_reply<biz_status>(reactor, fill(resp));
  dispatch(kind,
           [reg = registry_, client = client_info{job_id, "", ctx->peer()},
            in = std::move(in), reply]() mutable {
             caf::anon_send(reg, report_atom::value, std::move(client),
                            std::move(in), std::move(reply));
           });
  return reactor;
}

namespace {

grpc::ServerUnaryReactor* missing_status(grpc::CallbackServerContext* ctx) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT,
                   "status: required (the agent's result code)"});
  return reactor;
}

} // namespace

grpc::ServerUnaryReactor* recover_service::ReportStopComplete(
  grpc::CallbackServerContext* ctx, const ::StopCompleteRequest* req,
  ::Status* resp) {
  if (!req->has_status() && !req->jobid().empty())
    return missing_status(ctx);
  flow_input in;
  in.report.code = req->status().code();
  for (const auto& f : req->faultranks())
    in.faults.push_back({f.rankid(), f.faulttype()});
  return report(ctx, "/Recover/ReportStopComplete", req->jobid(),
                report_kind::stop, std::move(in), resp);
}

grpc::ServerUnaryReactor* recover_service::ReportRecoverStrategy(
  grpc::CallbackServerContext* ctx, const ::RecoverStrategyRequest* req,
  ::Status* resp) {
  flow_input in;
  in.strategies = convert::to_vector(req->strategies());
  return report(ctx, "/Recover/ReportRecoverStrategy", req->jobid(),
                report_kind::strategy, std::move(in),
                resp);
}

grpc::ServerUnaryReactor* recover_service::ReportRecoverStatus(
  grpc::CallbackServerContext* ctx, const ::RecoverStatusRequest* req,
  ::Status* resp) {
  if (!req->has_status() && !req->jobid().empty())
    return missing_status(ctx);
  flow_input in;
  in.report.code = req->status().code();
  in.report.strategy = req->strategy();
  in.report.isolate_ranks = convert::to_vector(req->isolaterankids());
  return report(ctx, "/Recover/ReportRecoverStatus", req->jobid(),
                report_kind::status, std::move(in), resp);
}

grpc::ServerUnaryReactor* recover_service::ReportProcessFault(
  grpc::CallbackServerContext* ctx, const ::ProcessFaultRequest* req,
  ::Status* resp) {
  flow_input in;
  for (const auto& f : req->faultranks())
    in.faults.push_back({f.rankid(), f.faulttype()});
  return report(ctx, "/Recover/ReportProcessFault", req->jobid(),
                report_kind::process, std::move(in), resp);
}

grpc::ServerUnaryReactor* recover_service::SwitchNicTrack(
  grpc::CallbackServerContext* ctx, const ::SwitchNics* req, ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor, "/Recover/SwitchNicTrack");
  if (!who || reject_bad_id(reactor, req->jobid(), "jobID"))
    return reactor;
  auto refuse = [&](const std::string& info) {
    resp->set_code(413);
    resp->set_info(info);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  };
  // Nodes in name order, so rank lists do not depend on map iteration.
  std::map<std::string, const ::DeviceList*> nodes;
  for (const auto& [node, list] : req->nicops())
    nodes.emplace(node, &list);
  std::vector<nic_op> ops;
  for (const auto& [node, list] : nodes) {
    if (list->dev_size() != list->op_size())
      return refuse("dev and op length is not equal");
    if (list->dev_size() == 0)
      return refuse("dev or op is empty");
    for (int i = 0; i < list->dev_size(); ++i)
      ops.push_back({node, list->dev(i), list->op(i)});
  }
  ask<biz_status>(sys_, registry_, reactor, fill(resp), switch_atom::value,
                  req->jobid(), std::move(ops),
                  audit_name(*who, ctx->peer(), true));
  return reactor;
}

template <class Response>
grpc::ServerWriteReactor<Response>*
recover_service::operator_stream(grpc::CallbackServerContext* ctx,
                                 const std::string& job_id, om_kind kind,
                                 std::string_view method) {
  using stream_type = grpc_stream<Response, om_message>;
  auto* stream = new stream_type(ctx, stream_buffer_,
                                 [](const om_message& x, Response& out) {
                                   out.set_jobid(x.job_id);
                                   out.set_msg(x.msg);
                                 });
  om_sink_ptr sink = stream->sink();
  auto who = admit_stream(access_, ctx, sink, method);
  if (!who || reject_bad_id(sink, job_id, "jobID"))
    return stream;
  open_stream<ok_atom>(sys_, registry_, sink, om_atom::value, job_id, kind);
  return stream;
}

grpc::ServerWriteReactor<::SwitchNicResponse>*
recover_service::SubscribeSwitchNicSignal(grpc::CallbackServerContext* ctx,
                                          const ::SwitchNicRequest* req) {
  return operator_stream<::SwitchNicResponse>(
    ctx, req->jobid(), om_kind::switch_nic,
    "/Recover/SubscribeSwitchNicSignal");
}

grpc::ServerWriteReactor<::SwitchRankList>*
recover_service::SubscribeNotifySwitch(grpc::CallbackServerContext* ctx,
                                       const ::ClientInfo* req) {
  using stream_type = grpc_stream<::SwitchRankList, switch_rank_list>;
  auto* stream = new stream_type(
    ctx, stream_buffer_, [](const switch_rank_list& x, ::SwitchRankList& out) {
      for (const auto& r : x.ranks)
        out.add_rankid(r);
      for (bool op : x.to_backup)
        out.add_op(op);
      out.set_jobid(x.job_id);
    });
  switch_sink_ptr sink = stream->sink();
  auto who = admit_stream(access_, ctx, sink, "/Recover/SubscribeNotifySwitch",
                          req->jobid());
  if (!who || reject_bad_id(sink, req->jobid()))
    return stream;
  open_stream<ok_atom>(sys_, registry_, sink, worker_atom::value, req->jobid());
  return stream;
}

grpc::ServerUnaryReactor* recover_service::ReplySwitchNicResult(
  grpc::CallbackServerContext* ctx, const ::SwitchResult* req, ::Status* resp) {
  flow_input in;
  in.report.code = req->result() ? 0 : 1;
  return report(ctx, "/Recover/ReplySwitchNicResult", req->jobid(),
                report_kind::switch_nic, std::move(in), resp);
}

grpc::ServerUnaryReactor* recover_service::StressTest(
  grpc::CallbackServerContext* ctx, const ::StressTestParam* req,
  ::Status* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor, "/Recover/StressTest");
  if (!who || reject_bad_id(reactor, req->jobid(), "jobID"))
    return reactor;
  stress_request x;
  x.all_nodes_ops = {req->allnodesops().begin(), req->allnodesops().end()};
  for (const auto& [node, list] : req->stressparam())
    x.node_ops[node] = {list.ops().begin(), list.ops().end()};
  ask<biz_status>(sys_, registry_, reactor, fill(resp), stress_atom::value,
                  req->jobid(), std::move(x),
                  audit_name(*who, ctx->peer(), true));
  return reactor;
}

grpc::ServerWriteReactor<::StressTestResponse>*
recover_service::SubscribeStressTestResponse(grpc::CallbackServerContext* ctx,
                                             const ::StressTestRequest* req) {
  return operator_stream<::StressTestResponse>(
    ctx, req->jobid(), om_kind::stress, "/Recover/SubscribeStressTestResponse");
}

grpc::ServerWriteReactor<::StressTestRankParams>*
recover_service::SubscribeNotifyExecStressTest(grpc::CallbackServerContext* ctx,
                                               const ::ClientInfo* req) {
  using stream_type = grpc_stream<::StressTestRankParams, stress_rank_params>;
  auto* stream = new stream_type(
    ctx, stream_buffer_, [](const stress_rank_params& x, ::StressTestRankParams& out) {
      for (const auto& [rank, ops] : x.params) {
        auto& list = (*out.mutable_stressparam())[rank];
        for (auto op : ops)
          list.add_ops(op);
      }
      out.set_jobid(x.job_id);
    });
  stress_sink_ptr sink = stream->sink();
  auto who = admit_stream(access_, ctx, sink,
                          "/Recover/SubscribeNotifyExecStressTest",
                          req->jobid());
  if (!who || reject_bad_id(sink, req->jobid()))
    return stream;
  open_stream<ok_atom>(sys_, registry_, sink, worker_atom::value, req->jobid());
  return stream;
}

grpc::ServerUnaryReactor* recover_service::ReplyStressTestResult(
  grpc::CallbackServerContext* ctx, const ::StressTestResult* req,
  ::Status* resp) {
  flow_input in;
  for (const auto& [rank, r] : req->stressresult())
    for (const auto& [op, res] : r.rankresult())
      in.stress_result[rank][op] = {res.code(), res.result()};
  return report(ctx, "/Recover/ReplyStressTestResult", req->jobid(),
                report_kind::stress, std::move(in), resp);
}

grpc::ServerUnaryReactor* recover_service::HealthCheck(
  grpc::CallbackServerContext* ctx, const ::ClientInfo* req, ::Status* resp) {
  // Stateless, as in the reference: no actor involved.
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/Recover/HealthCheck"))
    return reactor;
  resp->set_code(0);
  resp->set_info("jobId=" + req->jobid() + ", receive HeathCheck");
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

} // namespace recoverd
