#pragma once

/// How CAF inspects the model's domain types (CAF 0.17 style). The model
/// itself knows no actor framework; every actor header includes this one.

#include <caf/meta/type_name.hpp>

#include "actors/model/recovery.hpp"
#include "actors/model/types.hpp"

namespace recoverd {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device& x) {
  return f(caf::meta::type_name("device"), x.device_id, x.rank_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pod& x) {
  return f(caf::meta::type_name("pod"), x.pod_rank, x.uid, x.node_name,
           x.running, x.super_pod_id, x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_spec& x) {
  return f(caf::meta::type_name("job_spec"), x.job_id, x.name, x.ns,
           x.framework, x.recover_strategies, x.process_recover_enable,
           x.graceful_fault_tolerance, x.fault_scheduling, x.pod_rescheduling,
           x.sub_healthy_strategy, x.platform_mode, x.annotations, x.pods);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_fault& x) {
  return f(caf::meta::type_name("device_fault"), x.node_name, x.device_id,
           x.fault_codes, x.fault_level, x.pod_uid);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f,
                                        device_faults_outcome& x) {
  return f(caf::meta::type_name("device_faults_outcome"), x.ignored);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_device_faults& x) {
  return f(caf::meta::type_name("job_device_faults"), x.job_id,
           x.health_state, x.faults, x.by);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_info& x) {
  return f(caf::meta::type_name("client_info"), x.job_id, x.role, x.peer,
           x.identity);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, biz_status& x) {
  return f(caf::meta::type_name("biz_status"), x.code, x.info);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.spec, x.inited, x.registered,
           x.subscribed, x.recovery_state, x.process_recover_label, x.last_seq,
           x.created_at_ms, x.updated_at_ms, x.device_faults, x.health_state,
           x.uuid, x.reset_json, x.reset_check, x.last_outcome, x.flows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, put_result& x) {
  return f(caf::meta::type_name("put_result"), x.created, x.job);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_summary& x) {
  return f(caf::meta::type_name("job_summary"), x.job_id, x.name, x.ns,
           x.registered, x.subscribed, x.recovery_state, x.pods, x.ranks,
           x.last_seq, x.unhealthy_nodes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_health& x) {
  return f(caf::meta::type_name("node_health"), x.node, x.job_id, x.status,
           x.reason, x.since_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stress_request& x) {
  return f(caf::meta::type_name("stress_request"), x.all_nodes_ops,
           x.node_ops);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, annotations_view& x) {
  return f(caf::meta::type_name("annotations_view"), x.job_id, x.annotations,
           x.process_recover_label, x.seq);
}


template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_rank& x) {
  return f(caf::meta::type_name("fault_rank"), x.rank_id, x.fault_type);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_signal& x) {
  return f(caf::meta::type_name("process_signal"), x.uuid, x.job_id,
           x.signal_type, x.actions, x.fault_ranks, x.change_strategy,
           x.timeout, x.node_rank_ids, x.extra_params);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_report& x) {
  return f(caf::meta::type_name("recover_report"), x.code, x.strategy,
           x.isolate_ranks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, nic_op& x) {
  return f(caf::meta::type_name("nic_op"), x.node, x.device, x.to_backup);
}

} // namespace recoverd
