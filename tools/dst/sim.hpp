#pragma once

/// Deterministic simulation of one job (issue 11): the real pure job model
/// (`decide` / `apply`) driven through seeded random schedules of faults,
/// reports, signal deliveries, timers, operator requests, platform changes
/// and crash-restarts, with the model's invariants checked after every step.
///
/// Nothing here uses threads, clocks or actors: a schedule is a list of
/// steps, each a kind plus a few random numbers that are read against the
/// state the job is in when the step runs, so that any sub-list of a
/// schedule is a schedule too (this is what shrinking relies on). The
/// harness around the model does what the job actor does around it: it
/// stamps sequence numbers and time, encodes every event with
/// `storage::encode_event`, fires the flow's deadline at its deadline,
/// delivers the pending signal to a subscribed agent, and feeds the
/// follow-up inputs (a pod change re-checks a polled wait, a fault-center
/// snapshot becomes faults).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/model/job_model.hpp"

namespace recoverd::dst {

/// What a step of a schedule does.
enum class step_kind : uint8_t {
  process_fault,  ///< Recover.ReportProcessFault naming random ranks.
  device_faults,  ///< Platform.ReportDeviceFaults with a random snapshot.
  deliver,        ///< The pending signal reaches the agent (or a worker).
  stale_delivery, ///< A signal delivered earlier is confirmed again, late.
  report,         ///< A report of some kind and code, in any state.
  fire_timer,     ///< Time jumps to the flow's deadline, which fires.
  idle,           ///< Nothing happens for 0.5 to 60 s (deadlines fire).
  subscribe,      ///< An agent stream (re)subscribes, taking over.
  detach,         ///< The agent stream is lost.
  init,           ///< Recover.Init.
  enroll,         ///< Recover.Register.
  put_change,     ///< Platform.PutJob changing a pod (uid, running, node).
  annotate,       ///< Platform.SetAnnotations (platform-mode annotations).
  switch_nic,     ///< An operator asks for a link switch.
  stress_test,    ///< An operator asks for a stress test.
  clear_node,     ///< An operator clears a node a stress test isolated.
  restart,        ///< recoverd crashes and replays its log.
  delete_job,     ///< Platform.DeleteJob (a later put_change re-creates).
};

/// Number of `step_kind`s.
constexpr size_t step_kind_count = 18;

/// The name of a step kind, e.g. "process_fault".
const char* to_string(step_kind x);

/// One step of a schedule: its kind, how much time passes before it, and
/// random numbers its kind reads (which ranks, which code, ...).
struct step {
  step_kind kind = step_kind::idle;
  /// Milliseconds that pass before the step (due deadlines fire first).
  uint32_t dt_ms = 0;
  uint32_t x = 0;
  uint32_t y = 0;
  uint32_t z = 0;
  /// Right after the step the pending signal reaches a subscribed agent (or
  /// a worker), as the job actor pushes it after a commit; when false it
  /// stays pending until a `deliver` step, a new subscriber, or its timeout.
  bool settle = true;
};

/// A schedule: the seed that chose the job's configuration and waits, and
/// the steps.
struct schedule {
  uint64_t seed = 0;
  std::vector<step> steps;
};

/// The job a seed configures: its spec and the protocol's waits.
struct job_setup {
  job_spec spec;
  timeouts waits;
  /// Devices per pod.
  int devices = 0;
};

/// The job and waits of `seed` (the same in every mode of the simulator).
job_setup make_setup(uint64_t seed);

/// The job and waits as text (two lines).
std::string describe_setup(const job_setup& s);

/// Whether a job in state `s` waits for a report of kind `k` with `code`:
/// the protocol's table (reference §5, §8, §9), written down apart from the
/// model's so that the two can disagree.
bool report_waited(flow_state s, report_kind k, int32_t code);

/// Whether a step through `path` starts a round that gives the flow a new
/// uuid by design (a new stopTrain, an operator's pause, a stress test's
/// phases).
bool starts_round(const std::vector<flow_state>& path);

/// Makes the schedule of `seed` with `steps` steps.
schedule make_schedule(uint64_t seed, size_t steps);

/// A broken invariant.
struct violation {
  /// Index of the step during which it broke.
  size_t step = 0;
  /// Which invariant, e.g. "replay", "uuid", "deadline".
  std::string invariant;
  /// What exactly was wrong.
  std::string what;
};

/// Knobs of a run; the defaults check the real model.
struct run_options {
  /// Records a line per step in `outcome::trace`.
  bool trace = false;
  /// Applied to every event decoded at a crash-restart, before it is folded
  /// (the checker's self-test corrupts the replay with it); returns false to
  /// drop the event.
  std::function<bool(event&)> tamper_replay;
  /// An extra invariant checked after every step: returns a message when
  /// it is broken (the self-test fabricates a violation with it).
  std::function<std::string(const job_model&)> extra_check;
};

/// What a run of one schedule found.
struct outcome {
  /// Steps run (all of them unless an invariant broke).
  size_t steps = 0;
  /// The first broken invariant, if any.
  std::optional<violation> failure;
  /// One line per step when `run_options::trace` is set.
  std::vector<std::string> trace;
  /// Events the job's log holds at the end.
  size_t events = 0;
  /// Flows that ended.
  size_t flows = 0;
};

/// Runs `s` against a fresh job, checking every invariant after every step.
outcome run(const schedule& s, const run_options& opts = {});

/// A smaller schedule that breaks the same invariant as `s` (which must
/// break one): steps are dropped one at a time while it still does, until
/// no single step can go.
schedule shrink(const schedule& s, const run_options& opts = {});

/// Runs a schedule in one mode of the simulator.
using runner = std::function<outcome(const schedule&, const run_options&)>;

/// `shrink` with the runs of `run` (e.g. `run_actor`).
schedule shrink(const schedule& s, const run_options& opts, const runner& run);

/// The schedule as text: the seed, the job it configures, one line per step.
std::string describe(const schedule& s);

/// The first field in which `x` and `y` differ ("" when equal), e.g.
/// "rec (recovery state)" or "spec.pods[1].uid".
std::string first_difference(const job_model& x, const job_model& y);

} // namespace recoverd::dst
