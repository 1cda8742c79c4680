#pragma once

/// Stops first (design §7: a fault storm stops every job within 100 ms):
/// while one device-fault call is still stopping many jobs, the agents'
/// answers of the jobs already stopped wait at the edge, so that the cores
/// go to the stops that are still to go out. A stop is out when gRPC has
/// written it, not when the job handed it over: once the call is done the
/// gate stays closed until the agent streams have written what they were
/// given (at most `max_drain`). Each answer waits at most `max_hold`, and
/// answers keep their order.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace recoverd {

/// Holds agents' reports back while fault fan-outs are in flight.
class report_gate {
public:
  /// The clock of the hold.
  using clock = std::chrono::steady_clock;

  /// How long an answer waits at most when nobody says otherwise: a
  /// fan-out that takes longer than this is not one that holding helps.
  static constexpr std::chrono::milliseconds default_max_hold{200};

  /// How long the gate waits, after the last fan-out, for the stops to be
  /// written: an agent that stopped reading must not hold the others.
  static constexpr std::chrono::milliseconds default_max_drain{50};

  /// Starts the gate's timer thread.
  explicit report_gate(std::chrono::milliseconds max_hold = default_max_hold,
                       std::chrono::milliseconds max_drain = default_max_drain);

  /// Calls `close`.
  ~report_gate();

  /// Runs what is still held (its calls must finish), joins the timer, and
  /// lets every later report pass at once. Before the actors it sends to
  /// are gone.
  void close();

  report_gate(const report_gate&) = delete;
  report_gate& operator=(const report_gate&) = delete;

  /// A fan-out to `jobs` jobs starts; one to a single job does not close
  /// the gate (there are no other stops to go first).
  /// @returns whether the caller must call `end` once the fan-out is done.
  bool begin(size_t jobs);

  /// A fan-out that `begin` counted is done; the last one opens the gate.
  void end();

  /// Runs `fn` now when the gate is open and nothing waits, else keeps it
  /// until the gate opens or it has waited `max_hold`.
  void admit(std::function<void()> fn);

  /// `n` signals were queued on an agent stream.
  void pushed(size_t n = 1) {
    unwritten_.fetch_add(n, std::memory_order_relaxed);
  }

  /// `n` queued signals were written (or dropped with their stream).
  /// Takes the lock only when a drain may wait for it (never while quiet).
  void written(size_t n = 1) {
    if (n > 0 && unwritten_.fetch_sub(n, std::memory_order_acq_rel) == n
        && !quiet())
      drained();
  }

  /// Whether a report would go at once (no fault stopping jobs, nothing
  /// held): callers may then skip `admit` and what it costs.
  bool quiet() const {
    return quiet_.load(std::memory_order_acquire);
  }

  /// Reports held since the start, for metrics and tests.
  size_t held_total() const;

private:
  struct held {
    clock::time_point since;
    std::function<void()> fn;
  };

  // Every queued signal is written: ends a drain.
  void drained();

  // Whether a report may go at once. Called with the lock held.
  bool open_locked() const {
    return fanouts_ == 0 && !draining_ && !releasing_;
  }

  // Publishes whether reports may pass without the lock. Called with the
  // lock held, after every change of the fields `open_locked` reads.
  void settle_locked() {
    quiet_.store(open_locked() && held_.empty() && !stopping_,
                 std::memory_order_release);
  }

  // Runs everything held, in order, outside the lock; what arrives
  // meanwhile is held behind it. Called with `guard` locked.
  void release(std::unique_lock<std::mutex>& guard, const char* why);

  void run_timer();

  const std::chrono::milliseconds max_hold_;
  const std::chrono::milliseconds max_drain_;
  std::atomic<size_t> unwritten_{0};
  std::atomic<bool> quiet_{true};
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  size_t fanouts_ = 0;
  bool draining_ = false;
  clock::time_point drain_until_;
  bool releasing_ = false;
  bool stopping_ = false;
  size_t held_total_ = 0;
  std::deque<held> held_;
  std::thread timer_;
};

} // namespace recoverd
