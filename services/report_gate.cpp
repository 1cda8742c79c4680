#include "services/report_gate.hpp"

#include <algorithm>
#include <utility>

#include "actors/log.hpp"

namespace recoverd {

report_gate::report_gate(std::chrono::milliseconds max_hold,
                         std::chrono::milliseconds max_drain)
  : max_hold_(max_hold), max_drain_(max_drain),
    timer_([this] { run_timer(); }) {
  // nop
}

report_gate::~report_gate() {
  close();
}

void report_gate::close() {
  std::unique_lock<std::mutex> guard{mtx_};
  stopping_ = true;
  settle_locked();
  cv_.notify_all();
  guard.unlock();
  if (timer_.joinable())
    timer_.join();
  guard.lock();
  if (!held_.empty() && !releasing_)
    release(guard, "the daemon stops");
}

bool report_gate::begin(size_t jobs) {
  if (jobs < 2)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  ++fanouts_;
  draining_ = false;
  settle_locked();
  return true;
}

void report_gate::end() {
  std::unique_lock<std::mutex> guard{mtx_};
  if (fanouts_ > 0)
    --fanouts_;
  if (fanouts_ > 0 || releasing_)
    return;
  // Stops handed to streams but not yet written still go first.
  if (unwritten_.load(std::memory_order_acquire) > 0) {
    draining_ = true;
    drain_until_ = clock::now() + max_drain_;
    cv_.notify_all();
    return;
  }
  if (!held_.empty())
    release(guard, "every job of the fault has its stop");
  settle_locked();
}

void report_gate::drained() {
  std::unique_lock<std::mutex> guard{mtx_};
  if (!draining_ || fanouts_ > 0 || releasing_)
    return;
  draining_ = false;
  if (!held_.empty())
    release(guard, "every job of the fault has its stop, written");
  settle_locked();
}

void report_gate::admit(std::function<void()> fn) {
  // The common case, no fault stopping jobs: no lock.
  if (quiet()) {
    fn();
    return;
  }
  std::unique_lock<std::mutex> guard{mtx_};
  if ((open_locked() && held_.empty()) || stopping_) {
    guard.unlock();
    fn();
    return;
  }
  held_.push_back({clock::now(), std::move(fn)});
  ++held_total_;
  settle_locked();
  if (open_locked())
    release(guard, "no fault is stopping jobs");
  else if (held_.size() == 1)
    cv_.notify_all();
}

size_t report_gate::held_total() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return held_total_;
}

void report_gate::release(std::unique_lock<std::mutex>& guard,
                          const char* why) {
  releasing_ = true;
  auto longest = clock::now() - held_.front().since;
  size_t count = 0;
  // Whatever arrives while a batch runs queues behind it; it goes too once
  // no fan-out is left (else it waits for its own turn).
  do {
    auto batch = std::move(held_);
    held_.clear();
    guard.unlock();
    for (auto& x : batch)
      x.fn();
    count += batch.size();
    guard.lock();
  } while (!held_.empty() && ((fanouts_ == 0 && !draining_) || stopping_));
  releasing_ = false;
  settle_locked();
  cv_.notify_all();
  ES_INFO(
    "{} agent reports held for up to {} ms so that a fault's stops "
    "went out first; released: {}",
    count,
    std::chrono::duration_cast<std::chrono::milliseconds>(longest).count(),
    why);
}

void report_gate::run_timer() {
  std::unique_lock<std::mutex> guard{mtx_};
  while (!stopping_) {
    if (releasing_ || (held_.empty() && !draining_)) {
      cv_.wait(guard);
      continue;
    }
    auto now = clock::now();
    if (draining_ && now >= drain_until_) {
      draining_ = false;
      if (!held_.empty())
        release(guard, "stops still unwritten after the drain's limit");
      settle_locked();
      continue;
    }
    if (!held_.empty() && now >= held_.front().since + max_hold_) {
      release(guard, "held as long as allowed");
      continue;
    }
    auto due = clock::time_point::max();
    if (draining_)
      due = drain_until_;
    if (!held_.empty())
      due = std::min(due, held_.front().since + max_hold_);
    cv_.wait_until(guard, due);
  }
}

} // namespace recoverd
