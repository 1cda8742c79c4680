#include "convert.hpp"

namespace recoverd::convert {

namespace pb = recoverd::platform::v1;

job_spec from_proto(const pb::JobSpec& x) {
  job_spec result;
  result.job_id = x.jobid();
  result.name = x.name();
  result.ns = x.namespace_();
  result.framework = x.framework();
  result.recover_strategies = to_vector(x.recoverstrategies());
  result.process_recover_enable = x.processrecoverenable();
  result.graceful_fault_tolerance = x.gracefulfaulttolerance();
  result.fault_scheduling = x.faultscheduling();
  result.pod_rescheduling = x.podrescheduling();
  result.sub_healthy_strategy = x.subhealthystrategy();
  result.platform_mode = x.platformmode();
  result.annotations = {x.annotations().begin(), x.annotations().end()};
  result.pods.reserve(static_cast<size_t>(x.pods_size()));
  for (const auto& p : x.pods()) {
    pod q;
    q.pod_rank = p.podrank();
    q.uid = p.uid();
    q.node_name = p.nodename();
    q.running = p.running();
    q.super_pod_id = p.superpodid();
    q.devices.reserve(static_cast<size_t>(p.devices_size()));
    for (const auto& d : p.devices())
      q.devices.push_back({d.deviceid(), d.rankid()});
    result.pods.push_back(std::move(q));
  }
  return result;
}

void to_proto(const job_spec& x, pb::JobSpec& out) {
  out.set_jobid(x.job_id);
  out.set_name(x.name);
  out.set_namespace_(x.ns);
  out.set_framework(x.framework);
  for (const auto& s : x.recover_strategies)
    out.add_recoverstrategies(s);
  out.set_processrecoverenable(x.process_recover_enable);
  out.set_gracefulfaulttolerance(x.graceful_fault_tolerance);
  out.set_faultscheduling(x.fault_scheduling);
  out.set_podrescheduling(x.pod_rescheduling);
  out.set_subhealthystrategy(x.sub_healthy_strategy);
  out.set_platformmode(x.platform_mode);
  out.mutable_annotations()->insert(x.annotations.begin(),
                                    x.annotations.end());
  for (const auto& p : x.pods) {
    auto* q = out.add_pods();
    q->set_podrank(p.pod_rank);
    q->set_uid(p.uid);
    q->set_nodename(p.node_name);
    q->set_running(p.running);
    q->set_superpodid(p.super_pod_id);
    for (const auto& d : p.devices) {
      auto* e = q->add_devices();
      e->set_deviceid(d.device_id);
      e->set_rankid(d.rank_id);
    }
  }
}

device_fault from_proto(const pb::DeviceFault& x) {
  return {x.nodename(), x.deviceid(), to_vector(x.faultcodes()),
          x.faultlevel(), x.poduid()};
}

void to_proto(const device_fault& x, pb::DeviceFault& out) {
  out.set_nodename(x.node_name);
  out.set_deviceid(x.device_id);
  for (const auto& c : x.fault_codes)
    out.add_faultcodes(c);
  out.set_faultlevel(x.fault_level);
  out.set_poduid(x.pod_uid);
}

job_device_faults from_proto(const pb::JobDeviceFaults& x) {
  job_device_faults result;
  result.job_id = x.jobid();
  result.health_state = x.healthstate();
  for (const auto& f : x.faults())
    result.faults.push_back(from_proto(f));
  return result;
}

void to_proto(const job_status& x, pb::JobStatus& out) {
  to_proto(x.spec, *out.mutable_spec());
  out.set_inited(x.inited);
  out.set_registered(x.registered);
  out.set_subscribed(x.subscribed);
  out.set_recoverystate(x.recovery_state);
  out.set_processrecoverlabel(x.process_recover_label);
  out.set_lastseq(x.last_seq);
  out.set_createdatms(x.created_at_ms);
  out.set_updatedatms(x.updated_at_ms);
  for (const auto& f : x.device_faults)
    to_proto(f, *out.add_devicefaults());
  out.set_healthstate(x.health_state);
  out.set_uuid(x.uuid);
  out.set_resetjson(x.reset_json);
  out.set_resetcheckcode(x.reset_check);
  out.set_lastoutcome(x.last_outcome);
  out.set_flows(x.flows);
}

void to_proto(const job_summary& x, pb::JobSummary& out) {
  out.set_jobid(x.job_id);
  out.set_name(x.name);
  out.set_namespace_(x.ns);
  out.set_registered(x.registered);
  out.set_subscribed(x.subscribed);
  out.set_recoverystate(x.recovery_state);
  out.set_pods(x.pods);
  out.set_ranks(x.ranks);
  out.set_lastseq(x.last_seq);
  for (const auto& n : x.unhealthy_nodes)
    to_proto(n, *out.add_unhealthynodes());
}

void to_proto(const node_health& x, pb::NodeHealth& out) {
  out.set_node(x.node);
  out.set_jobid(x.job_id);
  out.set_status(x.status);
  out.set_reason(x.reason);
  out.set_sincems(x.since_ms);
}

job_summary from_proto(const pb::JobSummary& x) {
  job_summary out;
  out.job_id = x.jobid();
  out.name = x.name();
  out.ns = x.namespace_();
  out.registered = x.registered();
  out.subscribed = x.subscribed();
  out.recovery_state = x.recoverystate();
  out.pods = x.pods();
  out.ranks = x.ranks();
  out.last_seq = x.lastseq();
  for (const auto& n : x.unhealthynodes())
    out.unhealthy_nodes.push_back(from_proto(n));
  return out;
}

node_health from_proto(const pb::NodeHealth& x) {
  return {x.node(), x.jobid(), x.status(), x.reason(), x.sincems()};
}

void to_proto(const annotations_view& x, pb::Annotations& out) {
  out.set_jobid(x.job_id);
  out.mutable_annotations()->insert(x.annotations.begin(),
                                    x.annotations.end());
  out.set_processrecoverlabel(x.process_recover_label);
  out.set_seq(x.seq);
}

void to_proto(const process_signal& x, ::ProcessManageSignal& out) {
  out.set_uuid(x.uuid);
  out.set_jobid(x.job_id);
  out.set_signaltype(x.signal_type);
  for (const auto& a : x.actions)
    out.add_actions(a);
  for (const auto& f : x.fault_ranks) {
    auto* r = out.add_faultranks();
    r->set_rankid(f.rank_id);
    r->set_faulttype(f.fault_type);
  }
  out.set_changestrategy(x.change_strategy);
  out.set_timeout(x.timeout);
  for (const auto& n : x.node_rank_ids)
    out.add_noderankids(n);
  out.set_extraparams(x.extra_params);
}

process_signal from_proto(const ::ProcessManageSignal& x) {
  process_signal result;
  result.uuid = x.uuid();
  result.job_id = x.jobid();
  result.signal_type = x.signaltype();
  result.actions = to_vector(x.actions());
  for (const auto& f : x.faultranks())
    result.fault_ranks.push_back({f.rankid(), f.faulttype()});
  result.change_strategy = x.changestrategy();
  result.timeout = x.timeout();
  result.node_rank_ids = to_vector(x.noderankids());
  result.extra_params = x.extraparams();
  return result;
}

} // namespace recoverd::convert
