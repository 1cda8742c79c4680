#include "services/inspect_service.hpp"

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "services/bridge.hpp"
#include "services/guard.hpp"
#include "services/inspect_convert.hpp"
#include "services/stream.hpp"

namespace recoverd {

namespace pi = recoverd::inspection::v1;

namespace {

// The status of a bad job id, or OK.
grpc::Status check_job_id(const std::string& id) {
  return to_grpc_status(to_error(validate_job_id(id)));
}

// A done function that finishes a unary reactor.
inspect_api::done_fn finish(grpc::ServerUnaryReactor* reactor) {
  return [reactor](const grpc::Status& st) { reactor->Finish(st); };
}

} // namespace

inspect_api::inspect_api(caf::actor_system& sys, inspector_actor inspector,
                         historian_actor historian, status_desk_actor desk,
                         event_hub_actor hub, node_registry_actor nodes)
  : sys_(sys),
    inspector_(std::move(inspector)),
    historian_(std::move(historian)),
    desk_(std::move(desk)),
    hub_(std::move(hub)),
    nodes_(std::move(nodes)) {
  // nop
}

void inspect_api::list_jobs(const pi::ListJobsRequest& req,
                            pi::ListJobsResponse* resp, done_fn done) const {
  ask_then<std::vector<job_view>>(
    sys_, inspector_,
    [resp](const std::vector<job_view>& xs) {
      for (const auto& x : xs)
        convert::to_proto(x, *resp->add_jobs());
      return grpc::Status::OK;
    },
    std::move(done), list_atom::value, req.namespace_());
}

void inspect_api::get_job(const pi::GetJobRequest& req, pi::JobDetail* resp,
                          done_fn done) const {
  if (auto st = check_job_id(req.jobid()); !st.ok())
    return done(st);
  ask_then<job_view>(
    sys_, inspector_,
    [resp](const job_view& x) {
      convert::to_proto(x, *resp);
      return grpc::Status::OK;
    },
    std::move(done), get_atom::value, req.jobid());
}

void inspect_api::list_events(const pi::ListEventsRequest& req,
                              pi::ListEventsResponse* resp,
                              done_fn done) const {
  if (auto st = check_job_id(req.jobid()); !st.ok())
    return done(st);
  ask_then<event_page>(
    sys_, historian_,
    [resp](const event_page& x) {
      for (const auto& ev : x.events)
        convert::to_proto(ev, *resp->add_events());
      resp->set_nextseq(x.next_seq);
      resp->set_lastseq(x.last_seq);
      resp->set_firstseq(x.first_seq);
      return grpc::Status::OK;
    },
    std::move(done), events_atom::value, req.jobid(), req.fromseq(),
    req.limit());
}

void inspect_api::list_incidents(const pi::ListIncidentsRequest& req,
                                 pi::ListIncidentsResponse* resp,
                                 done_fn done) const {
  if (auto st = check_job_id(req.jobid()); !st.ok())
    return done(st);
  ask_then<incident_list>(
    sys_, historian_,
    [resp](const incident_list& x) {
      for (const auto& i : x.incidents)
        convert::to_proto(i, *resp->add_incidents());
      resp->set_lastseq(x.last_seq);
      return grpc::Status::OK;
    },
    std::move(done), incidents_atom::value, req.jobid());
}

void inspect_api::get_stats(const pi::GetStatsRequest& req,
                            pi::StatsResponse* resp, done_fn done) const {
  if (!req.jobid().empty())
    if (auto st = check_job_id(req.jobid()); !st.ok())
      return done(st);
  ask_then<goodput_report>(
    sys_, inspector_,
    [resp](const goodput_report& x) {
      convert::to_proto(x, *resp);
      return grpc::Status::OK;
    },
    std::move(done), goodput_atom::value, req.jobid());
}

void inspect_api::get_job_at(const pi::GetJobAtRequest& req, pi::JobAt* resp,
                             done_fn done) const {
  if (auto st = check_job_id(req.jobid()); !st.ok())
    return done(st);
  history_point at;
  switch (req.point_case()) {
    case pi::GetJobAtRequest::kSeq:
      at.seq = req.seq();
      break;
    case pi::GetJobAtRequest::kTimeMs:
      at.by_time = true;
      at.time_ms = req.timems();
      break;
    default:
      return done({grpc::StatusCode::INVALID_ARGUMENT,
                   "seq or timeMs: one of them is required"});
  }
  ask_then<job_at>(
    sys_, historian_,
    [resp](const job_at& x) {
      convert::to_proto(x, *resp);
      return grpc::Status::OK;
    },
    std::move(done), at_atom::value, req.jobid(), at);
}

void inspect_api::get_status(const pi::GetStatusRequest& req,
                             pi::StatusResponse* resp, done_fn done) const {
  if (!req.jobid().empty())
    if (auto st = check_job_id(req.jobid()); !st.ok())
      return done(st);
  status_query q;
  q.job_id = req.jobid();
  q.every_job = req.detailed();
  q.verbosity = req.detailed() ? status_verbosity::detailed
                               : status_verbosity::info;
  ask_then<std::vector<component_status>>(
    sys_, desk_,
    [resp](const std::vector<component_status>& xs) {
      convert::to_proto(xs, *resp);
      return grpc::Status::OK;
    },
    std::move(done), status_atom::value, std::move(q));
}

void inspect_api::list_nodes(const pi::ListNodesRequest& req,
                             pi::ListNodesResponse* resp, done_fn done) const {
  if (!nodes_)
    return done({grpc::StatusCode::UNAVAILABLE, "no node registry"});
  ask_then<node_listing>(
    sys_, nodes_,
    [resp](const node_listing& x) {
      convert::to_proto(x, *resp);
      return grpc::Status::OK;
    },
    std::move(done), list_atom::value, req.quarantinedonly());
}

void inspect_api::watch_events(const pi::WatchEventsRequest& req,
                               event_sink_ptr sink, done_fn done) const {
  if (!req.jobid().empty()) {
    if (auto err = to_error(validate_job_id(req.jobid()))) {
      sink->finish(err);
      if (done)
        done(to_grpc_status(err));
      return;
    }
  }
  if (!done)
    done = [](const grpc::Status&) {};
  ask_then<ok_atom>(
    sys_, hub_, [](ok_atom) { return grpc::Status::OK; },
    [sink, done](const grpc::Status& st) {
      if (!st.ok())
        sink->finish(make_error(errc::shutting_down, st.error_message()));
      done(st);
    },
    watch_atom::value, req.jobid(), sink);
}

void inspect_api::cluster(
  std::function<void(caf::expected<cluster_stats>)> done) const {
  spawn_at_edge(
    sys_,
    [](caf::event_based_actor* self, inspector_actor inspector,
       node_registry_actor nodes,
       std::function<void(caf::expected<cluster_stats>)> done) {
      self->request(inspector, edge_timeout, metrics_atom::value)
        .then(
          [=](cluster_stats& x) {
            if (!nodes)
              return done(std::move(x));
            // The node gauges come from the node registry, in a second hop.
            auto stats = std::make_shared<cluster_stats>(std::move(x));
            self->request(nodes, edge_timeout, status_atom::value)
              .then(
                [=](node_counts& n) {
                  stats->nodes_tracked = n.tracked;
                  stats->nodes_quarantined = n.quarantined;
                  done(std::move(*stats));
                },
                [=](caf::error& err) { done(std::move(err)); });
          },
          [=](caf::error& err) { done(std::move(err)); });
    },
    inspector_, nodes_, std::move(done));
}

inspect_service::inspect_service(const inspect_api& api, size_t stream_buffer,
                                 access_settings access)
  : api_(api), stream_buffer_(stream_buffer), access_(std::move(access)) {
  // nop
}

grpc::ServerUnaryReactor*
inspect_service::ListJobs(grpc::CallbackServerContext* ctx,
                          const pi::ListJobsRequest* req,
                          pi::ListJobsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/ListJobs"))
    return reactor;
  api_.list_jobs(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerUnaryReactor*
inspect_service::GetJob(grpc::CallbackServerContext* ctx,
                        const pi::GetJobRequest* req, pi::JobDetail* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/GetJob"))
    return reactor;
  api_.get_job(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerUnaryReactor*
inspect_service::ListEvents(grpc::CallbackServerContext* ctx,
                            const pi::ListEventsRequest* req,
                            pi::ListEventsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/ListEvents"))
    return reactor;
  api_.list_events(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerWriteReactor<pi::EventRecord>*
inspect_service::WatchEvents(grpc::CallbackServerContext* ctx,
                             const pi::WatchEventsRequest* req) {
  using stream_type = grpc_stream<pi::EventRecord, published_event>;
  auto* stream = new stream_type(
    ctx, stream_buffer_, [](const published_event& x, pi::EventRecord& out) {
      convert::to_proto(x, out);
    });
  event_sink_ptr sink = stream->sink();
  if (!admit_stream(access_, ctx, sink, "/recoverd.inspection.v1.Inspect/WatchEvents"))
    return stream;
  api_.watch_events(*req, std::move(sink));
  return stream;
}

grpc::ServerUnaryReactor*
inspect_service::ListIncidents(grpc::CallbackServerContext* ctx,
                               const pi::ListIncidentsRequest* req,
                               pi::ListIncidentsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/ListIncidents"))
    return reactor;
  api_.list_incidents(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerUnaryReactor*
inspect_service::GetJobAt(grpc::CallbackServerContext* ctx,
                          const pi::GetJobAtRequest* req, pi::JobAt* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/GetJobAt"))
    return reactor;
  api_.get_job_at(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerUnaryReactor*
inspect_service::GetStatus(grpc::CallbackServerContext* ctx,
                           const pi::GetStatusRequest* req,
                           pi::StatusResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/GetStatus"))
    return reactor;
  api_.get_status(*req, resp, finish(reactor));
  return reactor;
}

grpc::ServerUnaryReactor*
inspect_service::GetStats(grpc::CallbackServerContext* ctx,
                          const pi::GetStatsRequest* req,
                          pi::StatsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.inspection.v1.Inspect/GetStats"))
    return reactor;
  api_.get_stats(*req, resp, finish(reactor));
  return reactor;
}

} // namespace recoverd

namespace recoverd {

grpc::ServerUnaryReactor*
inspect_service::ListNodes(grpc::CallbackServerContext* ctx,
                           const pi::ListNodesRequest* req,
                           pi::ListNodesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor,
             "/recoverd.inspection.v1.Inspect/ListNodes"))
    return reactor;
  api_.list_nodes(*req, resp, finish(reactor));
  return reactor;
}

} // namespace recoverd
