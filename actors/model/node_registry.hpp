#pragma once

/// The fleet's node registry: every fault and stress-test verdict seen on a
/// node, across all jobs, folded into a fault score that decays and a
/// quarantine list an operator clears. Pure: time is passed in, `apply`
/// folds one event, `decide` turns what jobs observed into events.
///
/// Score: each fault adds the weight of its kind (`fault_weight`); between
/// events the score halves every `half_life_ms`. Quarantine: a stress test
/// isolated the node (result code 2), or a fault lifted the score to
/// `quarantine_score` or above. A quarantine holds until an operator clears
/// the node (the score decaying below the threshold does not end it, so a
/// published taint does not flap); a clear also resets the score. Counts
/// keep counting; only the last `max_recent_faults` faults are kept.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/model/error.hpp"
#include "actors/model/snapshot_policy.hpp"

namespace recoverd {

/// Where a fault on a node was seen.
enum class node_fault_source : uint8_t {
  /// An agent's ReportProcessFault (the rank's node from the topology).
  agent_report,
  /// A fault center's ReportDeviceFaults (an entry new to the job).
  fault_center,
  /// A stress test's result (code 2 isolates the node; 3 and 4 make a rank
  /// a fault).
  stress_test,
};

/// "agent-report", "fault-center" or "stress-test".
const char* to_string(node_fault_source x);

/// Parses the names of `to_string`; nothing when unknown.
std::optional<node_fault_source> node_fault_source_from(const std::string& x);

/// One fault seen on a node.
struct node_fault {
  node_fault_source source = node_fault_source::agent_report;
  /// The job that recorded it.
  std::string job_id;
  /// Device id on the node; empty for a node-level fault.
  std::string device;
  /// Fault codes (fault center), the fault type (agent report) or the
  /// stress result codes.
  std::vector<std::string> codes;
  /// Fault level (fault center), or "" when the source has none.
  std::string level;
  /// When the job recorded it, Unix ms.
  int64_t time_ms = 0;
};

/// A job recorded a fault on `node`.
struct node_fault_seen {
  std::string node;
  node_fault fault;
};

/// A stress test of `job_id` ran on `node`: whether the node is isolated
/// (a result code 2) and whether any rank of it failed (codes 2..4).
struct node_stress_verdict {
  std::string node;
  std::string job_id;
  bool isolated = false;
  bool failed = false;
  /// The worst result code on the node, "0".."4".
  std::string code;
  int64_t time_ms = 0;
};

/// An operator declared `node` healthy: quarantine and score end.
struct node_cleared {
  std::string node;
  /// Who cleared it (audit).
  std::string by;
  int64_t time_ms = 0;
};

/// One event of the fleet's node stream.
using node_event = std::variant<node_fault_seen, node_stress_verdict,
                                node_cleared>;

/// When `e` happened, Unix ms.
int64_t time_of(const node_event& e);

/// The node `e` is about.
const std::string& node_of(const node_event& e);

/// Why a node is quarantined.
enum class quarantine_reason : uint8_t {
  none,
  /// A stress test isolated it.
  stress_test,
  /// Its fault score reached the threshold.
  score,
};

/// "", "stress-test" or "score".
const char* to_string(quarantine_reason x);

/// Parses the names of `to_string`; nothing when unknown.
std::optional<quarantine_reason> quarantine_reason_from(const std::string& x);

/// What the registry knows of one node.
struct node_record {
  /// The score as of `score_ms` (decay is applied on read).
  double score = 0;
  int64_t score_ms = 0;
  /// Faults seen in total (stress failures included).
  uint64_t faults = 0;
  /// Stress tests run on the node, and those that found a fault.
  uint64_t stress_tests = 0;
  uint64_t stress_failures = 0;
  /// The latest faults, oldest first, at most `max_recent_faults`.
  std::deque<node_fault> recent;
  /// When the last fault was seen (Unix ms, 0: never) and in which job.
  int64_t last_fault_ms = 0;
  std::string last_job_id;
  /// Quarantine: why (none: not quarantined) and since when (Unix ms).
  quarantine_reason reason = quarantine_reason::none;
  int64_t since_ms = 0;
  /// The last operator clear (Unix ms, 0: never) and who did it.
  int64_t cleared_ms = 0;
  std::string cleared_by;

  /// Whether the node is quarantined.
  bool quarantined() const {
    return reason != quarantine_reason::none;
  }
};

/// How the registry scores.
struct node_registry_config {
  /// The score halves every this many ms (> 0).
  int64_t half_life_ms = 3'600'000;
  /// A score at or above this quarantines the node (> 0).
  double quarantine_score = 3.0;
  /// Faults kept per node (> 0); older ones only count.
  size_t max_recent_faults = 16;
};

/// Checks a configuration; the message names the bad setting.
failure validate(const node_registry_config& cfg);

/// The fleet's node table: node name -> record, ordered by name.
struct node_table {
  node_registry_config cfg;
  std::map<std::string, node_record> nodes;
};

/// The node table as start-up rebuilt it from its stream.
struct initial_nodes {
  node_table table;
  /// Sequence number of the stream's last event (0: none).
  uint64_t seq = 0;
  /// What was folded after the stream's snapshot.
  snapshot_tail tail;
};

/// The weight a fault adds to its node's score: by level for a fault
/// center's fault (ManuallySeparateNPU, SeparateNPU: 3; RestartNPU,
/// FreeRestartNPU, PreSeparateNPU: 1; RestartBusiness, RestartRequest and
/// no level: 0.5; SubHealthFault, NotHandleFault: 0.25; others: 0.5), 1 for
/// an agent's report, 3 for a stress test that isolated the node and 1 for
/// one that found a rank fault.
double fault_weight(const node_fault& f);

/// The score of `r` at `now_ms`: its stored score decayed from `score_ms`.
double score_at(const node_record& r, int64_t now_ms,
                const node_registry_config& cfg);

/// Returns the registry after `e`. Pure. Call it qualified
/// (`recoverd::apply`): `node_event` is a `std::variant`, so an unqualified
/// call also finds `std::apply` by argument-dependent lookup.
node_table apply(node_table reg, const node_event& e);

/// What a job saw on its nodes in events just made durable, for the
/// registry; each becomes one event of the fleet stream.
using node_observation = std::variant<node_fault_seen, node_stress_verdict>;

struct job_model;
struct event;

/// What the job event `ev` says about the job's nodes, resolved from the
/// job's topology in `before` (the model `ev` was decided on): the faults
/// of an agent's ReportProcessFault (each rank's node; a rank the running
/// flow already holds as faulted, or named twice, counts once), the fault-center
/// entries new to the job (an entry the job already had is not counted
/// again; levels that are no fault are not counted), and a stress test's
/// verdict per node of its results. Pure.
std::vector<node_observation> observe(const job_model& before,
                                      const event& ev);

/// The events the observations `xs` cause, in order (an observation about
/// an empty node name is dropped). Pure.
std::vector<node_event> decide(const node_table& reg,
                               std::vector<node_observation> xs);

/// The clear of `node` by `by` at `now_ms`; nothing when there is nothing
/// to clear: the registry has no record of the node, or it is neither
/// quarantined nor has a score above 0 (e.g. just cleared). Pure.
std::optional<node_event> decide_clear(const node_table& reg,
                                       const std::string& node,
                                       const std::string& by, int64_t now_ms);

/// One line of the registry's listing.
struct node_view {
  std::string node;
  double score = 0; ///< At the time of the listing.
  uint64_t faults = 0;
  uint64_t stress_failures = 0;
  int64_t last_fault_ms = 0;
  std::string last_job_id;
  quarantine_reason reason = quarantine_reason::none;
  int64_t since_ms = 0;
};

/// The registry's listing (Inspect.ListNodes), ordered by node.
struct node_listing {
  std::vector<node_view> nodes;
  double threshold = 0;
  int64_t half_life_ms = 0;
};

/// The registry at `now_ms`, every node or only the quarantined ones.
node_listing list(const node_table& reg, int64_t now_ms,
                  bool quarantined_only = false);

/// How many nodes are tracked and quarantined.
struct node_counts {
  uint64_t tracked = 0;
  uint64_t quarantined = 0;
};

/// Counts the registry's nodes.
node_counts count(const node_table& reg);

} // namespace recoverd
