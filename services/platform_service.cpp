#include "services/platform_service.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <tuple>

#include "actors/error.hpp"
#include "actors/job_directory.hpp"
#include "actors/model/job_model.hpp"
#include "convert.hpp"
#include "services/bridge.hpp"
#include "services/guard.hpp"
#include "services/stream.hpp"

namespace recoverd {

namespace pb = recoverd::platform::v1;

namespace {

// Finishes `reactor` with INVALID_ARGUMENT when `job_id` is not a valid id.
bool reject_bad_id(grpc::ServerUnaryReactor* reactor,
                   const std::string& job_id) {
  if (auto err = to_error(validate_job_id(job_id))) {
    reactor->Finish(to_grpc_status(err));
    return true;
  }
  return false;
}

// A reply handler that converts the actor's answer into `resp`.
template <class Resp>
auto fill(Resp* resp) {
  return [resp](const auto& x) {
    convert::to_proto(x, *resp);
    return grpc::Status::OK;
  };
}

// Adds the nodes the fleet's node registry quarantines that no job's record
// lists, attributed to the last job that saw a fault there.
void add_fleet_quarantine(std::vector<node_health>& nodes,
                          const node_listing& q) {
  for (const auto& v : q.nodes) {
    auto listed = std::any_of(nodes.begin(), nodes.end(),
                              [&](const auto& n) { return n.node == v.node; });
    if (listed)
      continue;
    node_health h;
    h.node = v.node;
    h.job_id = v.last_job_id;
    h.status = "UnHealthy";
    char score[32];
    std::snprintf(score, sizeof(score), "%.2f", v.score);
    h.reason = v.reason == quarantine_reason::stress_test
                 ? std::string{"quarantined by the node registry: isolated "
                               "by a stress test"}
                 : std::string{"quarantined by the node registry: its fault "
                               "score reached the threshold (now "}
                     + score + ")";
    h.since_ms = v.since_ms;
    nodes.push_back(std::move(h));
  }
}

} // namespace

platform_service::platform_service(caf::actor_system& sys,
                                   job_registry_actor registry,
                                   size_t stream_buffer, access_settings access,
                                   node_registry_actor nodes,
                                   job_directory_ptr directory,
                                   std::shared_ptr<report_gate> gate)
  : sys_(sys), registry_(std::move(registry)), stream_buffer_(stream_buffer),
    access_(std::move(access)), nodes_(std::move(nodes)),
    directory_(std::move(directory)), gate_(std::move(gate)) {
  // nop
}

grpc::ServerUnaryReactor*
platform_service::PutJob(grpc::CallbackServerContext* ctx,
                         const pb::PutJobRequest* req,
                         pb::PutJobResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor,
                   "/recoverd.platform.v1.Platform/PutJob");
  if (!who)
    return reactor;
  if (!req->has_spec()) {
    reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT,
                     "spec: required, the job to put"});
    return reactor;
  }
  ask<put_result>(
    sys_, registry_, reactor,
    [resp](const put_result& x) {
      resp->set_created(x.created);
      convert::to_proto(x.job, *resp->mutable_job());
      return grpc::Status::OK;
    },
    put_atom::value, convert::from_proto(req->spec()),
    put_origin{who->name, who->max_jobs});
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::DeleteJob(grpc::CallbackServerContext* ctx,
                            const pb::JobRef* req,
                            pb::DeleteJobResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor,
                   "/recoverd.platform.v1.Platform/DeleteJob");
  if (!who || reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<uint64_t>(
    sys_, registry_, reactor,
    [resp](uint64_t seq) {
      resp->set_lastseq(seq);
      return grpc::Status::OK;
    },
    delete_atom::value, req->jobid(), who->name);
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::GetJob(grpc::CallbackServerContext* ctx,
                         const pb::JobRef* req, pb::JobStatus* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.platform.v1.Platform/GetJob"))
    return reactor;
  if (reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<job_status>(
    sys_, registry_, reactor,
    fill(resp),
    get_atom::value, req->jobid());
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::ListJobs(grpc::CallbackServerContext* ctx,
                           const pb::ListJobsRequest* req,
                           pb::ListJobsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.platform.v1.Platform/ListJobs"))
    return reactor;
  ask<std::vector<job_summary>>(
    sys_, registry_, reactor,
    [resp](const std::vector<job_summary>& xs) {
      for (const auto& x : xs)
        convert::to_proto(x, *resp->add_jobs());
      return grpc::Status::OK;
    },
    list_atom::value, req->namespace_());
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::ListNodeHealth(grpc::CallbackServerContext* ctx,
                                 const pb::ListNodeHealthRequest* req,
                                 pb::ListNodeHealthResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.platform.v1.Platform/ListNodeHealth"))
    return reactor;
  // The jobs' records, then the fleet's quarantine (one hop each, without
  // blocking the gRPC thread).
  spawn_at_edge(
    sys_,
    [](caf::event_based_actor* self, job_registry_actor registry,
       node_registry_actor fleet, grpc::ServerUnaryReactor* reactor,
       pb::ListNodeHealthResponse* resp, std::string ns) {
      auto fail = [reactor](caf::error& err) {
        reactor->Finish(to_grpc_status(err));
      };
      self->request(registry, edge_timeout, list_atom::value, std::move(ns))
        .then(
          [=](std::vector<job_summary>& xs) {
            auto nodes = std::make_shared<std::vector<node_health>>();
            for (auto& x : xs)
              nodes->insert(nodes->end(), x.unhealthy_nodes.begin(),
                            x.unhealthy_nodes.end());
            auto finish = [reactor, resp, nodes] {
              std::sort(nodes->begin(), nodes->end(),
                        [](const auto& a, const auto& b) {
                          return std::tie(a.node, a.job_id)
                                 < std::tie(b.node, b.job_id);
                        });
              for (const auto& n : *nodes)
                convert::to_proto(n, *resp->add_nodes());
              reactor->Finish(grpc::Status::OK);
            };
            if (!fleet)
              return finish();
            self->request(fleet, edge_timeout, list_atom::value, true)
              .then(
                [=](node_listing& q) {
                  add_fleet_quarantine(*nodes, q);
                  finish();
                },
                fail);
          },
          fail);
    },
    registry_, nodes_, reactor, resp, req->namespace_());
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::ClearNodeHealth(grpc::CallbackServerContext* ctx,
                                  const pb::ClearNodeHealthRequest* req,
                                  pb::ClearNodeHealthResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor,
                   "/recoverd.platform.v1.Platform/ClearNodeHealth");
  if (!who)
    return reactor;
  if (req->node().empty()) {
    reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT,
                     "node: must not be empty"});
    return reactor;
  }
  if (!req->jobid().empty() && reject_bad_id(reactor, req->jobid()))
    return reactor;
  // The jobs' records first (an unknown job refuses the whole clear), then
  // the fleet's record of the node.
  spawn_at_edge(
    sys_,
    [](caf::event_based_actor* self, job_registry_actor registry,
       node_registry_actor fleet, grpc::ServerUnaryReactor* reactor,
       pb::ClearNodeHealthResponse* resp, std::string node, std::string job,
       std::string who) {
      auto fail = [reactor](caf::error& err) {
        reactor->Finish(to_grpc_status(err));
      };
      self
        ->request(registry, edge_timeout, nodeclear_atom::value, node, job,
                  who)
        .then(
          [=](std::vector<std::string>& jobs) {
            for (const auto& j : jobs)
              resp->add_jobids(j);
            auto finish = [reactor, resp, node](bool in_fleet) {
              resp->set_noderegistry(in_fleet);
              if (resp->jobids().empty() && !in_fleet)
                reactor->Finish({grpc::StatusCode::NOT_FOUND,
                                 "node " + node + " has no health record"});
              else
                reactor->Finish(grpc::Status::OK);
            };
            if (!fleet)
              return finish(false);
            self->request(fleet, edge_timeout, nodeclear_atom::value, node, who)
              .then([=](bool cleared) { finish(cleared); }, fail);
          },
          fail);
    },
    registry_, nodes_, reactor, resp, req->node(), req->jobid(),
    audit_name(*who, ctx->peer(), true));
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::SetAnnotations(grpc::CallbackServerContext* ctx,
                                 const pb::SetAnnotationsRequest* req,
                                 pb::Annotations* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor,
                   "/recoverd.platform.v1.Platform/SetAnnotations");
  if (!who || reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<annotations_view>(
    sys_, registry_, reactor,
    fill(resp),
    annotate_atom::value, req->jobid(),
    string_map{req->set().begin(), req->set().end()},
    convert::to_vector(req->remove()),
    who->name.empty() ? std::string{"platform"} : who->name,
    static_cast<uint64_t>(req->expectedseq()));
  return reactor;
}

grpc::ServerUnaryReactor*
platform_service::GetAnnotations(grpc::CallbackServerContext* ctx,
                                 const pb::JobRef* req,
                                 pb::Annotations* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!admit(access_, ctx, reactor, "/recoverd.platform.v1.Platform/GetAnnotations"))
    return reactor;
  if (reject_bad_id(reactor, req->jobid()))
    return reactor;
  ask<annotations_view>(
    sys_, registry_, reactor,
    fill(resp),
    get_atom::value, annots_atom::value, req->jobid());
  return reactor;
}

grpc::ServerWriteReactor<pb::Annotations>*
platform_service::WatchAnnotations(grpc::CallbackServerContext* ctx,
                                   const pb::JobRef* req) {
  using stream_type = grpc_stream<pb::Annotations, annotations_view>;
  auto* stream = new stream_type(
    ctx, stream_buffer_, [](const annotations_view& x, pb::Annotations& out) {
      convert::to_proto(x, out);
    });
  annotations_sink_ptr sink = stream->sink();
  if (!admit_stream(access_, ctx, sink, "/recoverd.platform.v1.Platform/WatchAnnotations"))
    return stream;
  if (auto err = to_error(validate_job_id(req->jobid()))) {
    sink->finish(err);
    return stream;
  }
  open_stream<ok_atom>(sys_, registry_, sink, watch_atom::value, req->jobid());
  return stream;
}

grpc::ServerUnaryReactor* platform_service::ReportDeviceFaults(
  grpc::CallbackServerContext* ctx, const pb::ReportDeviceFaultsRequest* req,
  pb::ReportDeviceFaultsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto who = admit(access_, ctx, reactor,
                   "/recoverd.platform.v1.Platform/ReportDeviceFaults");
  if (!who)
    return reactor;
  // Counted before anything is converted, so an oversized request costs
  // one pass over its jobs.
  size_t faults = 0;
  for (const auto& x : req->jobs())
    faults += static_cast<size_t>(x.faults_size());
  if (auto err = to_error(check_device_fault_count(faults))) {
    reactor->Finish(to_grpc_status(err));
    return reactor;
  }
  std::vector<job_device_faults> entries;
  for (const auto& x : req->jobs()) {
    resp->add_results()->set_jobid(x.jobid());
    entries.push_back(convert::from_proto(x));
    entries.back().by = who->name;
  }
  if (entries.empty()) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // One message per job, straight to the job when the directory lists it
  // (a storm of 1,000 jobs spawns no actor and arms no timer); each job
  // answers its own result, from its own thread, and the last one finishes
  // the call. The counter's release/acquire orders every result's writes
  // before the `Finish`. Until then the agents' answers of the jobs already
  // stopped wait at the gate: the other jobs' stops go first.
  auto remaining = std::make_shared<std::atomic<size_t>>(entries.size());
  auto gate = gate_ && gate_->begin(entries.size()) ? gate_ : nullptr;
  auto answer
    = [reactor, resp, remaining, gate](size_t i, const caf::error& err,
                                       const device_faults_outcome& out) {
        auto* result = resp->mutable_results(static_cast<int>(i));
        result->set_accepted(!err);
        if (err)
          result->set_error(to_grpc_status(err).error_message());
        for (const auto& line : out.ignored)
          result->add_ignored(line);
        if (remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) {
          if (gate)
            gate->end();
          reactor->Finish(grpc::Status::OK);
        }
      };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (auto err = to_error(validate_job_id(entries[i].job_id))) {
      answer(i, err, {});
      continue;
    }
    auto reply = make_once_reply<device_faults_outcome>(
      [answer, i](const caf::error& err, device_faults_outcome& out) {
        answer(i, err, out);
      });
    auto job = directory_ ? directory_->find(entries[i].job_id) : job_actor{};
    if (job)
      caf::anon_send(job, faults_atom::value, std::move(entries[i]),
                     std::move(reply));
    else
      caf::anon_send(registry_, faults_atom::value, std::move(entries[i]),
                     std::move(reply));
  }
  return reactor;
}

} // namespace recoverd
