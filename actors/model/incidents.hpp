#pragma once

/// What a job's history says beyond its current state: its incidents (one
/// per flow of the recovery machine, from leaving INIT until back in INIT)
/// with their phases, and a readable line per event. Pure functions of the
/// event list: no I/O, no clock; used by the inspector, `recoverctl` offline
/// and the metrics.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/model/goodput.hpp"
#include "actors/model/job_model.hpp"

namespace recoverd {

/// One milestone an incident reached.
struct incident_phase {
  /// "fault_seen" / "requested", "stop_acknowledged", "strategy_decided",
  /// "switch_reported" or "result".
  std::string name;
  /// The event that reached it.
  uint64_t seq = 0;
  /// When, Unix ms.
  int64_t time_ms = 0;
  /// Milliseconds since the incident began.
  int64_t since_start_ms = 0;
  /// Milliseconds since the previous milestone.
  int64_t duration_ms = 0;
};

/// What started an incident, so that a post-mortem names the root cause.
struct fault_attribution {
  /// "agent-report" (ReportProcessFault), "fault-center" (a device fault
  /// snapshot), "stress-test" (StressTest), "operator" (SwitchNicTrack) or
  /// "other" (a flow the log does not trace to one of them).
  std::string source;
  /// The node of the first faulty device or rank; empty when unknown.
  std::string node;
  /// The device id on that node; empty for a whole node or when unknown.
  std::string device;
  /// Fault codes the fault center gave for the faults that started it
  /// (sorted, without repeats); empty for the other sources.
  std::vector<std::string> codes;
  /// The fault center's fault level of the first matched fault, or an agent
  /// report's fault type ("uce", "normal", "network"); empty when none.
  std::string level;
};

/// The closed vocabulary of `fault_attribution::source`.
namespace cause {
/// A ReportProcessFault of the job's agent.
constexpr const char* agent_report = "agent-report";
/// A device fault snapshot of the fault center.
constexpr const char* fault_center = "fault-center";
/// An operator's StressTest.
constexpr const char* stress_test = "stress-test";
/// An operator's SwitchNicTrack.
constexpr const char* operator_request = "operator";
/// Anything else.
constexpr const char* other = "other";
} // namespace cause

/// One flow of a job's recovery machine.
struct incident {
  /// "recovery", "switch" or "stress".
  std::string kind;
  /// The flow's uuid.
  std::string uuid;
  /// First and last event of the flow.
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  /// When it began, Unix ms.
  int64_t started_ms = 0;
  /// When it ended, Unix ms; 0 while it runs.
  int64_t ended_ms = 0;
  /// Time of its last event, Unix ms.
  int64_t last_time_ms = 0;
  /// True while it runs.
  bool active = true;
  /// The machine's state after its last event.
  std::string state;
  /// The last strategy decided, and all of them in order.
  std::string strategy;
  std::vector<std::string> strategies;
  /// How it ended; empty while it runs.
  std::string outcome;
  /// The last final message to the operator (link switch), if any.
  std::string operator_result;
  /// Ranks reported faulty, in order of first report.
  std::vector<std::string> fault_ranks;
  /// Milestones reached, in order.
  std::vector<incident_phase> phases;
  /// flow_stepped events in the flow.
  uint64_t steps = 0;
  /// What started it.
  fault_attribution attribution;

  /// Milliseconds from start to end (to the last event while it runs).
  int64_t duration_ms() const {
    return (active ? last_time_ms : ended_ms) - started_ms;
  }

  /// Training time the incident cost: from the event that took the machine
  /// out of INIT (the fault report, the fault-center snapshot, the
  /// operator's request) to the event that brought it back (the
  /// recover-success result that resumed training, or the failure, kill or
  /// deletion that ended the flow). While it runs: until the last event.
  int64_t time_lost_ms() const {
    return duration_ms();
  }

  /// Time lost by milestone: each milestone's `duration_ms` (the time from
  /// the previous milestone, or from the start, until it was reached). Once
  /// the incident ended the values add up to `time_lost_ms()`.
  std::map<std::string, int64_t> lost_by_phase() const;

  /// The milestone called `name`, if reached.
  const incident_phase* phase(const std::string& name) const;
};

/// Finished incidents counted by (kind, strategy, outcome).
using incident_counts
  = std::map<std::tuple<std::string, std::string, std::string>, uint64_t>;

/// The latest agent subscription as the log tells it.
struct subscription_record {
  uint64_t generation = 0;
  std::string role;
  std::string peer;
  int64_t time_ms = 0;
};

/// An incremental, pure fold of a job's events into its incidents and a few
/// facts the state does not keep. Feed every event of the job in sequence
/// order, from the first.
class job_history {
public:
  /// What the incidents need of the recovery state, followed through the
  /// steps' changes.
  struct flow_facts {
    std::string uuid;
    std::vector<std::string> decided;
    om_kind om = om_kind::none;
    std::string last_outcome;
  };

  /// Everything the fold holds after its last event: what a stored history
  /// keeps (see `storage/incident_codec`) to be taken up again.
  struct fold_state {
    /// Finished incidents, oldest first (at most the history's `keep`).
    std::deque<incident> finished;
    /// The running flow, if any.
    std::optional<incident> active;
    /// Every finished incident ever folded or kept, by its labels.
    incident_counts counts;
    /// Goodput sums over the same incidents.
    goodput_tally tally;
    /// Time the job existed in its earlier lives, ms; when its current life
    /// began; the time of the last event (all Unix ms).
    int64_t observed_ms = 0;
    int64_t life_started_ms = 0;
    int64_t last_time_ms = 0;
    /// The latest subscription.
    subscription_record subscription;
    /// The job exists (put and not deleted); it is registered.
    bool exists = false;
    bool registered = false;
    /// Sequence number of the last event folded.
    uint64_t seq = 0;
    flow_facts facts;
    /// Where each global rank of the job's latest spec lives: its node and
    /// device id (for attribution; as big as the job's topology).
    std::unordered_map<std::string, std::pair<std::string, std::string>> places;
    /// The fault-center snapshot of the previous event, if it was one.
    std::optional<device_faults_reported> snapshot;
  };

  /// @param keep How many finished incidents to keep (the oldest are
  ///             dropped; counts keep counting).
  explicit job_history(size_t keep = SIZE_MAX);

  /// Takes up a fold where `s` left it, keeping `keep` finished incidents
  /// (the oldest of `s.finished` beyond that are dropped).
  job_history(fold_state s, size_t keep);

  /// What the fold holds now.
  const fold_state& state() const {
    return s_;
  }

  /// Folds one event.
  void add(const event& ev);

  /// Finished incidents, oldest first (at most `keep`).
  const std::deque<incident>& finished() const {
    return s_.finished;
  }

  /// The running flow, if any.
  const std::optional<incident>& active() const {
    return s_.active;
  }

  /// The last finished incident, or null.
  const incident* last_finished() const {
    return s_.finished.empty() ? nullptr : &s_.finished.back();
  }

  /// Every finished incident ever folded, by (kind, strategy, outcome).
  const incident_counts& counts() const {
    return s_.counts;
  }

  /// The job exists after the last event (put and not deleted).
  bool exists() const {
    return s_.exists;
  }

  /// The job is registered for recovery after the last event.
  bool registered() const {
    return s_.registered;
  }

  /// The latest subscription.
  const subscription_record& subscription() const {
    return s_.subscription;
  }

  /// Sequence number of the last event folded.
  uint64_t seq() const {
    return s_.seq;
  }

  /// Finished incidents followed by the running one.
  std::vector<incident> all() const;

  /// Goodput sums over every finished incident ever folded or kept.
  const goodput_tally& tally() const {
    return s_.tally;
  }

  /// The job's goodput at `now_ms` (Unix ms): the finished incidents, the
  /// running one until then, and the time the job existed until then.
  goodput_figures figures(int64_t now_ms) const;

  /// Counts a finished incident whose events the retention removed (kept
  /// in their place), as if it had been folded.
  void add_kept(const incident& x);

private:
  void open(const event& ev, const flow_stepped& x);
  void update(const event& ev, const flow_stepped& x, bool milestones);
  void close(const event& ev, std::string outcome);
  void reach(const event& ev, const char* name);
  void follow(const recovery_delta& d);
  void attribute(const event& ev, const flow_stepped& x);
  void fold(const event& ev);

  size_t keep_;
  fold_state s_;
};

/// Every incident of a job's events (finished ones, then the running one).
std::vector<incident> build_incidents(const std::vector<event>& evs);

/// The incident kind a flow that starts with step `x` has.
/// `om` is the operator action running after the step.
std::string flow_kind(const flow_stepped& x, om_kind om);

/// One readable line about an event, e.g. "receiveReport stop (code 0):
/// WaitReportStopCompleteState -> WaitFaultFlushFinishedState".
std::string describe(const event& ev);

} // namespace recoverd
