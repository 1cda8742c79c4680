#include "services/inspect_convert.hpp"

#include <google/protobuf/util/json_util.h>

#include "events.pb.h"
#include "storage/event_codec.hpp"

namespace recoverd::convert {

namespace pi = recoverd::inspection::v1;
namespace pe = recoverd::events::v1;

void to_proto(const incident& x, pi::Incident& out) {
  out.set_kind(x.kind);
  out.set_uuid(x.uuid);
  out.set_firstseq(x.first_seq);
  out.set_lastseq(x.last_seq);
  out.set_startedms(x.started_ms);
  out.set_endedms(x.ended_ms);
  out.set_durationms(x.duration_ms());
  out.set_active(x.active);
  out.set_state(x.state);
  out.set_strategy(x.strategy);
  for (const auto& s : x.strategies)
    out.add_strategies(s);
  out.set_outcome(x.outcome);
  for (const auto& r : x.fault_ranks)
    out.add_faultranks(r);
  for (const auto& p : x.phases) {
    auto* q = out.add_phases();
    q->set_name(p.name);
    q->set_seq(p.seq);
    q->set_timems(p.time_ms);
    q->set_sincestartms(p.since_start_ms);
    q->set_durationms(p.duration_ms);
  }
  out.set_steps(x.steps);
  out.set_timelostms(x.time_lost_ms());
  for (const auto& [name, ms] : x.lost_by_phase())
    (*out.mutable_lostbyphase())[name] = ms;
  auto* a = out.mutable_attribution();
  a->set_source(x.attribution.source);
  a->set_node(x.attribution.node);
  a->set_device(x.attribution.device);
  for (const auto& c : x.attribution.codes)
    a->add_codes(c);
  a->set_level(x.attribution.level);
}

void to_proto(const goodput_figures& x, pi::Goodput& out) {
  out.set_incidents(x.incidents);
  out.set_mttrms(x.mttr_ms);
  out.set_ettr(x.ettr);
  out.set_timelostms(x.time_lost_ms);
  for (const auto& [cause, n] : x.by_cause)
    (*out.mutable_bycause())[cause] = n;
  out.set_observedms(x.observed_ms);
  out.set_recoveries(x.recoveries);
  out.set_active(x.active);
}

void to_proto(const goodput_report& x, pi::StatsResponse& out) {
  to_proto(x.fleet, *out.mutable_fleet());
  for (const auto& j : x.jobs) {
    auto* y = out.add_jobs();
    to_proto(j.figures, *y);
    y->set_jobid(j.job_id);
  }
  out.set_nowms(x.now_ms);
}

void to_proto(const job_model& x, pe::JobState& out) {
  // Through the snapshot codec: one definition of what a state holds.
  pe::Snapshot snap;
  snap.ParseFromString(storage::encode_snapshot(x));
  out.Swap(snap.mutable_state());
}

void to_proto(const job_view& x, pi::JobOverview& out) {
  const auto& m = x.job.model;
  out.set_jobid(m.spec.job_id);
  out.set_name(m.spec.name);
  out.set_namespace_(m.spec.ns);
  out.set_recoverystate(to_string(m.rec.flow.state));
  out.set_healthstate(m.health_state);
  out.set_recoveryhealth(m.rec.flow.health);
  out.set_registered(m.registered);
  out.set_subscribed(x.job.live.subscribed);
  out.set_lastseq(m.seq);
  out.set_updatedatms(m.updated_at_ms);
  if (x.active)
    to_proto(*x.active, *out.mutable_activeflow());
  if (x.last)
    to_proto(*x.last, *out.mutable_lastincident());
  out.set_flows(m.rec.job.flows);
}

void to_proto(const job_view& x, pi::JobDetail& out) {
  const auto& m = x.job.model;
  out.set_jobid(m.spec.job_id);
  to_proto(m, *out.mutable_state());
  out.set_seq(m.seq);
  auto* subs = out.mutable_subscribers();
  subs->set_attached(x.job.live.subscribed);
  subs->set_generation(x.job.live.generation);
  subs->set_role(x.subscription.role);
  subs->set_peer(x.subscription.peer);
  subs->set_attachedatms(x.subscription.time_ms);
  subs->set_annotationwatchers(x.job.live.annotation_watchers);
  subs->set_switchworkers(x.job.live.switch_workers);
  subs->set_operators(x.job.live.operators);
  out.set_waitingfor(to_string(expected_report(m.rec.flow.state)));
  if (x.active)
    to_proto(*x.active, *out.mutable_activeflow());
  if (x.last)
    to_proto(*x.last, *out.mutable_lastincident());
}

void to_proto(const inspected_event& x, pi::EventRecord& out) {
  out.set_jobid(x.job_id);
  out.set_seq(x.seq);
  out.set_timems(x.time_ms);
  out.set_kind(x.kind);
  out.set_summary(x.summary);
  out.mutable_event()->ParseFromString(x.bytes);
}

void to_proto(const published_event& x, pi::EventRecord& out) {
  out.set_jobid(x.job_id);
  out.set_seq(x.seq);
  out.set_position(x.position);
  out.mutable_event()->ParseFromString(x.bytes);
  out.set_timems(out.event().timems());
  if (auto ev = storage::decode_event(x.bytes)) {
    out.set_kind(kind_name(ev->body));
    out.set_summary(describe(*ev));
  } else {
    out.set_kind("unknown");
  }
}

void to_proto(const job_at& x, pi::JobAt& out) {
  out.set_jobid(x.event.job_id);
  out.set_seq(x.state.seq);
  to_proto(x.state, *out.mutable_state());
  to_proto(x.event, *out.mutable_event());
  if (x.active)
    to_proto(*x.active, *out.mutable_activeflow());
}

void to_proto(const component_status& x, pi::ComponentStatus& out) {
  out.set_name(x.name);
  out.set_kind(x.kind);
  out.set_answered(x.answered);
  out.set_problem(x.problem);
  for (const auto& [k, v] : x.counters)
    (*out.mutable_counters())[k] = v;
  for (const auto& [k, v] : x.facts)
    (*out.mutable_facts())[k] = v;
}

void to_proto(const std::vector<component_status>& xs,
              pi::StatusResponse& out) {
  bool healthy = true;
  for (const auto& x : xs) {
    healthy = healthy && x.healthy();
    to_proto(x, *out.add_components());
  }
  out.set_healthy(healthy);
  out.set_version(RECOVERD_VERSION);
}

std::string to_json(const google::protobuf::Message& msg, bool pretty) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = pretty;
  opts.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(msg, &out, opts).ok())
    return "{}";
  return out;
}

void to_proto(const node_listing& x, pi::ListNodesResponse& out) {
  for (const auto& v : x.nodes) {
    auto& n = *out.add_nodes();
    n.set_node(v.node);
    n.set_score(v.score);
    n.set_faults(v.faults);
    n.set_stressfailures(v.stress_failures);
    n.set_lastfaultms(v.last_fault_ms);
    n.set_lastjobid(v.last_job_id);
    n.set_quarantined(v.reason != quarantine_reason::none);
    n.set_reason(to_string(v.reason));
    n.set_sincems(v.since_ms);
  }
  out.set_threshold(x.threshold);
  out.set_halflifems(x.half_life_ms);
}

} // namespace recoverd::convert
