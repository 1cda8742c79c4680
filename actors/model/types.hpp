#pragma once

/// Domain types exchanged between actors and stored in events. No protobuf
/// and no gRPC types appear here: `services/` and `storage/` translate.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace recoverd {

/// Ordered string map (annotations, ...).
using string_map = std::map<std::string, std::string>;

/// One accelerator device of a pod and the global rank on it.
struct device {
  std::string device_id; ///< Device id on its node.
  std::string rank_id;   ///< Global rank, decimal.
};

/// One pod of a job.
struct pod {
  int32_t pod_rank = 0;        ///< Pod index within the job.
  std::string uid;             ///< Pod uid; changes when rescheduled.
  std::string node_name;       ///< Node the pod runs on.
  bool running = false;        ///< Running with devices allocated.
  int32_t super_pod_id = -1;   ///< Super-pod id, -1 when unknown.
  std::vector<device> devices; ///< Devices and their ranks.
};

/// Everything recoverd knows about a job's configuration and topology.
struct job_spec {
  std::string job_id;
  std::string name;
  std::string ns; ///< Namespace.
  std::string framework;
  std::vector<std::string> recover_strategies;
  bool process_recover_enable = false;
  bool graceful_fault_tolerance = false;
  std::string fault_scheduling;
  bool pod_rescheduling = false;
  std::string sub_healthy_strategy;
  bool platform_mode = false;
  string_map annotations;
  std::vector<pod> pods;
};

/// One device fault as the fault center reports it.
struct device_fault {
  std::string node_name;
  /// Device id on the node; empty for a node-level fault (every rank of the
  /// job's pods on `node_name`).
  std::string device_id;
  std::vector<std::string> fault_codes;
  std::string fault_level;
  /// Uid of the pod that held the device when the fault was seen; empty
  /// when the fault center does not say.
  std::string pod_uid = {};
};

/// A fault-center snapshot of one job.
struct job_device_faults {
  std::string job_id;
  /// Healthy, SubHealthy or UnHealthy; empty: computed from the levels.
  std::string health_state;
  std::vector<device_fault> faults;
  std::string by = {}; ///< The caller identity (audit); empty when none.
};

/// What became of a recorded fault-center snapshot.
struct device_faults_outcome {
  /// One line per entry that was skipped, naming it by index (e.g.
  /// `faults[3]: no fault codes`).
  std::vector<std::string> ignored;
};

/// Recovery configuration captured at the first successful Init.
struct init_config {
  bool platform_mode = false;
  std::vector<std::string> strategies; ///< Effective, in priority order.
  bool process_recover_enable = false;
  std::string sub_healthy_strategy;
  std::string framework;
};

/// Who is calling: the agent's `ClientInfo` plus the transport peer.
struct client_info {
  std::string job_id;
  std::string role;
  std::string peer;
  std::string identity = {}; ///< Authenticated name (audit); empty if none.
};

/// Who puts a job (audit) and how many jobs that identity may own.
struct put_origin {
  /// The caller's authenticated identity; empty when none.
  std::string by;
  /// Most jobs `by` may own (have created and not deleted); 0: no cap of
  /// its own (the registry's job cap still holds).
  uint64_t max_jobs = 0;
};

/// A business outcome of the Recover protocol (`Status{code, info}`).
struct biz_status {
  int32_t code = 0;
  std::string info;
};

/// One faulty rank on the wire.
struct fault_rank {
  std::string rank_id;
  std::string fault_type;
};

/// A command to a job's agent (`ProcessManageSignal`).
struct process_signal {
  std::string uuid;
  std::string job_id;
  std::string signal_type;
  std::vector<std::string> actions;
  std::vector<fault_rank> fault_ranks;
  std::string change_strategy;
  int64_t timeout = 0;
  std::vector<std::string> node_rank_ids;
  std::string extra_params;
};

/// Field-wise equality (a step's change is what differs).
inline bool operator==(const fault_rank& x, const fault_rank& y) {
  return x.rank_id == y.rank_id && x.fault_type == y.fault_type;
}

/// Field-wise equality.
inline bool operator==(const process_signal& x, const process_signal& y) {
  return x.uuid == y.uuid && x.job_id == y.job_id
    && x.signal_type == y.signal_type && x.actions == y.actions
    && x.fault_ranks == y.fault_ranks && x.change_strategy == y.change_strategy
    && x.timeout == y.timeout && x.node_rank_ids == y.node_rank_ids
    && x.extra_params == y.extra_params;
}

// -- events -------------------------------------------------------------------

/// The platform created or replaced the job's spec.
struct job_put {
  job_spec spec;
  bool created = false;
};

/// The platform deleted the job.
struct job_deleted {};

/// Annotations were set or removed.
struct annotations_changed {
  string_map set;
  std::vector<std::string> removed;
  std::string by;
};

/// Init succeeded for the first time.
struct job_inited {
  init_config config;
  std::string role;
};

/// Register succeeded for the first time.
struct job_registered {
  std::string role;
};

/// An agent stream was opened.
struct subscriber_attached {
  uint64_t generation = 0;
  std::string role;
  std::string peer;
};

/// An agent stream ended.
struct subscriber_detached {
  uint64_t generation = 0;
  std::string reason;
};

/// A fault-center snapshot was recorded.
struct device_faults_reported {
  std::string health_state;
  std::vector<device_fault> faults;
};

/// The ranks a worker must switch (`SwitchRankList`).
struct switch_rank_list {
  std::vector<std::string> ranks;
  std::vector<bool> to_backup;
  std::string job_id;
};

/// Stress operations (0 = AIC, 1 = P2P) per key (a node or a global rank).
using stress_ops_map = std::map<std::string, std::vector<int64_t>>;

/// A StressTest request: operations for every node, or per node.
struct stress_request {
  /// Operations for every node; wins over `node_ops` when non-empty.
  std::vector<int64_t> all_nodes_ops;
  /// Node name -> operations.
  stress_ops_map node_ops;
};

/// The operations each rank must run (`StressTestRankParams`).
struct stress_rank_params {
  stress_ops_map params;
  std::string job_id;
};

/// One stress operation's result on one rank.
struct stress_op_result {
  /// "0" passed .. "4" voltage not recovered (reference §9.2).
  std::string code;
  std::string result;
};

/// A worker's results: global rank -> operation code -> result.
using stress_results
  = std::map<std::string, std::map<std::string, stress_op_result>>;

/// A node a stress test found faulty: isolated until an operator clears it.
struct node_health {
  std::string node;
  std::string job_id;
  /// "UnHealthy".
  std::string status;
  /// Why, e.g. the stress test result.
  std::string reason;
  /// When it was recorded (Unix ms).
  int64_t since_ms = 0;
};

/// A message for the operator of a link switch or stress test.
struct om_message {
  std::string job_id;
  std::string msg;
};

// -- views returned to the edge ----------------------------------------------

/// A job's status (Platform.GetJob).
struct job_status {
  job_spec spec;
  bool inited = false;
  bool registered = false;
  bool subscribed = false;
  std::string recovery_state;
  std::string process_recover_label;
  uint64_t last_seq = 0;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::vector<device_fault> device_faults;
  std::string health_state;
  std::string uuid;
  std::string reset_json;
  std::string reset_check;
  std::string last_outcome;
  uint64_t flows = 0;
};

/// The result of PutJob.
struct put_result {
  bool created = false;
  job_status job;
};

/// One line of a job listing.
struct job_summary {
  std::string job_id;
  std::string name;
  std::string ns;
  bool registered = false;
  bool subscribed = false;
  std::string recovery_state;
  int32_t pods = 0;
  int32_t ranks = 0;
  uint64_t last_seq = 0;
  /// Nodes this job's stress tests isolated.
  std::vector<node_health> unhealthy_nodes;
};

/// What the registry holds of a job that start-up left undecoded (a
/// dormant job): its listing line, and what its caps count. Written at a
/// clean stop for every job without a pending timer; valid only while the
/// job's last event is still the one it was taken at.
struct job_digest {
  /// The job's listing line as of `summary.last_seq` (never subscribed: a
  /// dormant job has no agent stream).
  job_summary summary;
  /// The identity that created the job (see `job_model::owner`).
  std::string owner;
};

/// A job's annotations and process-recover label.
struct annotations_view {
  std::string job_id;
  string_map annotations;
  std::string process_recover_label;
  uint64_t seq = 0;
};

} // namespace recoverd
