#pragma once

/// What the machine files share (internal to `actors/model/machines/`): the
/// context an entry action works on, the row type, and the entry actions one
/// machine borrows from another (a failed switch starts a recovery, every
/// operator action ends like a flow).

#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/model/recovery.hpp"
#include "actors/model/topology.hpp"

namespace recoverd::machines {

// -- topology and configuration predicates ------------------------------------

/// Every pod runs.
bool job_running(const job_spec& spec);

/// A rank's number (ranks are decimal strings, validated at PutJob).
int64_t rank_number(const std::string& rank);

/// Numeric order of ranks.
bool rank_less(const std::string& x, const std::string& y);

/// `x` is in `xs`.
bool contains(const std::vector<std::string>& xs, const std::string& x);

/// The platform's strategy (reference §7), trimmed of spaces and commas.
std::string platform_strategy(const job_spec& spec);

/// A platform strategy recoverd can act on (`exit` included: §15.9 fix).
bool usable_platform_strategy(const std::string& plat);

/// supportRetry of reference §5.5: the agent is not consulted.
bool supports_retry(const job_spec& spec, const init_config& init);

/// dumpOnly of reference §5.5.
bool is_dump_only(const job_spec& spec, const init_config& init);

/// Go's %v of a string slice: [a b c].
std::string go_list(const std::vector<std::string>& xs);

// -- merging faults into a flow ----------------------------------------------

/// What merging faults into a flow changes, found from the ranks they name
/// alone (one lookup each), so that a fault joining a running flow costs
/// the same on a flow of 4 faults as on one of 4,000.
struct merge_plan {
  /// Cache entries added or retyped (a normal type replaces a retry type).
  std::map<std::string, fault_type> set;
  /// A normal fault was merged: the flow's health becomes UnHealthy.
  bool unhealthy = false;
  /// Pod ranks of the named ranks (fault pods or not yet).
  std::set<int32_t> pods;
};

/// Plans merging `faults` into `flow`'s caches.
merge_plan plan_merge(const flow_part& flow, const rank_index& ranks,
                      const std::vector<fault_rank>& faults);

// -- the context --------------------------------------------------------------

/// What an entry action reads and writes: the machine's state (`rec`, a
/// copy being stepped), the job, the input, the configured waits, and the
/// step's record (`out`).
struct ctx {
  recovery& rec;
  const job_spec& spec;
  const rank_index& ranks;
  const init_config& init;
  const flow_input& in;
  const timeouts& waits;
  flow_step& out;
  const std::vector<device_fault>* device_faults = nullptr;

  /// The strategy is configured for the job.
  bool configured(const std::string& s) const;
  /// The agent supports the strategy in this flow.
  bool agent(const std::string& s) const;
  /// The platform's strategy (platform mode).
  std::string plat() const;
  /// Not in platform mode, or the platform chose `s`.
  bool plat_allows(const std::string& s) const;
  bool support_retry() const;
  bool support_recover() const;
  bool support_restart_in_place() const;
  bool support_dump() const;
  bool dump_only() const;
  /// DP scale-in (reference §5.5 canScaleIn).
  bool can_scale_in() const;

  /// Pods whose faults make them exit (every normal-fault pod that does not
  /// restart in place).
  std::vector<std::string> must_exit_pods() const;
  /// The pods a signal tells to exit (its nodeRankIds): `must_exit_pods`
  /// without the fault pods replaced since they became fault pods (their
  /// uid now is not the one recorded then), which have nothing to stop.
  std::vector<std::string> exit_node_ranks() const;
  /// Pod `p` runs under another uid than when it became a fault pod.
  bool replaced(int32_t p) const;
  std::vector<std::string> in_place_pod_list() const;
  /// Ranks with a normal fault (`normal`) or a retry fault, in rank order.
  std::vector<std::string> ranks_of(bool normal) const;
  bool has_normal() const;
  bool has_retry() const;
  std::vector<fault_rank> fault_list(bool normal) const;
  std::vector<fault_rank> all_faults() const;
  /// The pods of `faults`, as decimal pod ranks in order.
  std::vector<std::string> pods_of(const std::vector<fault_rank>& faults) const;
  std::vector<std::string> fault_pod_list() const;

  /// Turns every retry fault into a normal one.
  void retry_to_normal();
  /// Expands every normal fault to all ranks of its pod; pods that restart
  /// in place keep their ranks as they are.
  void expand_normal();
  /// Writes the reset document for `op` (see `reset_document`).
  void write_reset(const std::string& op);
  /// Merges faults into the caches; a normal type replaces a retry type.
  void merge(const std::vector<fault_rank>& faults);
  /// Makes pod `p` a fault pod, keeping the uid it has now to see it
  /// rescheduled later.
  void add_fault_pod(int32_t p);

  /// Waits `wait`, then the machine receives `event`. A zero wait returns
  /// the event at once, so tests and benchmarks can run with waits at 0.
  flow_event arm(millis wait, flow_event event);
  /// A signal of this flow to the agent.
  process_signal signal(const std::string& type) const;
  /// Puts `sig` in the outbox; if nobody takes it in time, notifyFail.
  flow_event notify(process_signal sig);
  /// Waits for the agent's report (receiveTimeout at the deadline).
  flow_event wait_report();
  /// Sets the ProcessRecoverStatus annotation this step writes.
  void set_status(const std::string& value);

  /// Some fault pod runs again under a new uid (scale-out trigger).
  bool any_pod_rescheduled() const;
  /// Every fault pod runs again under a new uid.
  bool pods_rescheduled() const;
};

/// An entry action: runs when its row is taken, returns the next event for
/// the new state (or `none` to wait for an input).
using entry_fn = flow_event (*)(ctx&);

/// One row: (from, event) -> to, then `entry`.
struct rule {
  flow_state from;
  flow_event event;
  flow_state to;
  entry_fn entry;
};

// -- the machines' rows (one file each) ---------------------------------------

/// Process-level recovery, R1..R46 (machines/recovery.cpp).
const std::vector<rule>& recovery_rules();
/// DP scale-in / scale-out (machines/dp_scale.cpp).
const std::vector<rule>& dp_scale_rules();
/// Pause and continue around an operator action (machines/operator_pause.cpp).
const std::vector<rule>& operator_pause_rules();
/// Link switch, reference §8.2 (machines/switch_nic.cpp).
const std::vector<rule>& switch_nic_rules();
/// Online stress test, reference §9.2 (machines/stress_test.cpp).
const std::vector<rule>& stress_test_rules();

// -- entry actions one machine borrows from another ---------------------------

/// Does nothing.
flow_event no_action(ctx& c);
/// Waits for the agent's report.
flow_event on_wait_report(ctx& c);
/// stopTrain with a fresh uuid (R2); also how a failed operator action
/// turns into a recovery.
flow_event on_notify_stop_train(ctx& c);
/// Decides and sends changeStrategy (R17 / R35 / R39).
flow_event on_decide(ctx& c);
/// Sends changeStrategy for `strategy`.
flow_event send_strategy(ctx& c, const std::string& strategy);
/// The result check (reference §5.6).
flow_event on_check_result(ctx& c);
/// Resets the reset document (R41).
flow_event on_fault_clear(ctx& c);
/// killMaster (R45).
flow_event on_kill_job(ctx& c);
/// Back to idle: the flow is over.
flow_event on_reset(ctx& c);

/// Sends `msg` to the operator stream (`final` ends it).
void om_say(ctx& c, const std::string& msg, bool final = false);
/// Forgets the running operator action (its outcome stays for late readers).
void om_clear(ctx& c);
/// An operator action begins: pause training (reference §8.2 / §9.2 step 1).
flow_event begin_om(ctx& c, om_kind kind, int64_t pause_timeout);
/// Puts the marker of a worker message (SwitchRankList or
/// StressTestRankParams) in the outbox; the job actor builds the message.
flow_event notify_worker(ctx& c, const char* what);
/// changeStrategy(continue) after an operator action.
flow_event on_notify_continue(ctx& c);
/// An operator action that cannot go on kills the job (reference §8.2),
/// telling the operator why.
flow_event on_om_kill(ctx& c);

/// A stress result that ends in a recovery: a node to isolate, a faulty
/// rank, or a fault reported while the test ran.
bool stress_fails(const recovery& rec, const stress_results& results);

// -- the report table ---------------------------------------------------------

/// Translates a receiveReport input into the event of the table for the
/// current state (machines/reports.cpp), or fails with `unexpected_report`
/// when the state waits for no such report.
expected<flow_event> report_event(const recovery& rec, const flow_input& in);

} // namespace recoverd::machines
