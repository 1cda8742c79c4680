#pragma once

/// A gRPC server stream fed by an actor: `grpc_sink` implements the actors'
/// `stream_sink` over a callback-API write reactor. At most one write is in
/// flight; the rest wait in a queue bounded in messages and in bytes;
/// overflow ends the stream with RESOURCE_EXHAUSTED, and cancels it when
/// its client has stopped reading (a write that never completes would keep
/// it open for good). Nothing here blocks beyond a short mutex.

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "actors/log.hpp"
#include "actors/sink.hpp"
#include "services/report_gate.hpp"
#include "services/status_mapping.hpp"

namespace recoverd {

/// Most bytes a stream queues for a slow client: a large message (an
/// annotations view of a big job) must not multiply by the message limit.
constexpr size_t stream_byte_limit = size_t{4} << 20;

/// The actor-facing end of a server stream of `Proto` messages built from
/// `Domain` values.
template <class Proto, class Domain>
class grpc_sink final : public stream_sink<Domain> {
public:
  /// Fills a message from a domain value.
  using convert_fn = std::function<void(const Domain&, Proto&)>;

  grpc_sink(size_t limit, convert_fn convert,
            size_t byte_limit = stream_byte_limit)
    : limit_(limit), byte_limit_(byte_limit), convert_(std::move(convert)) {
    // nop
  }

  bool push(const Domain& x) override {
    Proto msg;
    convert_(x, msg);
    auto size = msg.ByteSizeLong();
    std::unique_lock<std::mutex> guard{mtx_};
    if (owner_ == nullptr || cancelled_ || finish_requested_)
      return false;
    if (queue_.size() >= limit_ || queued_bytes_ + size > byte_limit_) {
      auto gone = overflow_locked();
      guard.unlock();
      settled(gone);
      return false;
    }
    queued_bytes_ += size;
    queue_.push_back(std::move(msg));
    if (writes_) {
      ++unwritten_;
      writes_->pushed();
    }
    pump_locked();
    return true;
  }

  void finish(const caf::error& err) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (owner_ == nullptr || finish_requested_)
      return;
    finish_requested_ = true;
    final_ = to_grpc_status(err);
    pump_locked();
  }

  void on_close(std::function<void()> f) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!closed_) {
        hooks_.push_back(std::move(f));
        return;
      }
    }
    f();
  }

  bool closed() const override {
    std::lock_guard<std::mutex> guard{mtx_};
    return closed_ || cancelled_;
  }

  /// Counts this stream's messages in `gate` until they are written, so
  /// that it knows when the stops it waits for are out. Set before the
  /// first push.
  void count_writes(std::shared_ptr<report_gate> gate) {
    writes_ = std::move(gate);
  }

  /// Messages waiting to be written.
  size_t queued() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return queue_.size();
  }

  // -- reactor side -----------------------------------------------------------

  /// Binds the reactor that writes for this sink and the call it serves
  /// (null in tests without a call: overflow then only finishes).
  void attach(grpc::ServerWriteReactor<Proto>* owner,
              grpc::CallbackServerContext* call = nullptr) {
    std::lock_guard<std::mutex> guard{mtx_};
    owner_ = owner;
    call_ = call;
  }

  /// A write completed.
  void write_done(bool ok) {
    std::unique_lock<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok)
      cancelled_ = true;
    auto gone = unwritten_ > 0 ? size_t{1} : size_t{0};
    unwritten_ -= gone;
    pump_locked();
    guard.unlock();
    settled(gone);
  }

  /// The client cancelled or went away.
  void cancel() {
    std::unique_lock<std::mutex> guard{mtx_};
    cancelled_ = true;
    auto gone = drop_queue_locked();
    pump_locked();
    guard.unlock();
    settled(gone);
  }

  /// The RPC is over; runs the close hooks.
  void done() {
    std::vector<std::function<void()>> hooks;
    size_t gone = 0;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      owner_ = nullptr;
      call_ = nullptr;
      closed_ = true;
      // Whatever is still counted will never be written.
      gone = drop_queue_locked() + std::exchange(unwritten_, 0);
      hooks.swap(hooks_);
    }
    settled(gone);
    for (auto& f : hooks)
      f();
  }

private:
  // The client reads too slowly: what is queued goes, the stream ends with
  // RESOURCE_EXHAUSTED. A write still in flight to a client that stopped
  // reading never completes, so the call is cancelled instead of waiting.
  // Returns the counted messages it dropped.
  size_t overflow_locked() {
    ES_WARN("stream overflowed with {} messages ({} bytes) queued; closing it",
            queue_.size(), queued_bytes_);
    auto gone = drop_queue_locked();
    finish_requested_ = true;
    final_ = grpc::Status{grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "stream consumer too slow: buffer of "
                            + std::to_string(limit_) + " messages or "
                            + std::to_string(byte_limit_) + " bytes full"};
    if (writing_ && call_ != nullptr)
      call_->TryCancel();
    pump_locked();
    return gone;
  }

  // Drops what waits to be written; returns how many of them were counted
  // (and are no longer).
  size_t drop_queue_locked() {
    auto gone = std::min(unwritten_, queue_.size());
    unwritten_ -= gone;
    std::deque<Proto>{}.swap(queue_);
    queued_bytes_ = 0;
    return gone;
  }

  // Tells the gate that `n` counted messages are written or gone; called
  // without the lock (the gate may release held reports from here).
  void settled(size_t n) {
    if (writes_ && n > 0)
      writes_->written(n);
  }

  void pump_locked() {
    // In gRPC 1.51 StartWrite/Finish never call back inline, so calling them
    // under the mutex is safe.
    if (owner_ == nullptr || finished_ || writing_)
      return;
    if (!queue_.empty() && !cancelled_) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= std::min(queued_bytes_, in_flight_.ByteSizeLong());
      writing_ = true;
      owner_->StartWrite(&in_flight_);
    } else if (finish_requested_ || cancelled_) {
      finished_ = true;
      owner_->Finish(cancelled_ ? grpc::Status::CANCELLED : final_);
    }
  }

  const size_t limit_;
  const size_t byte_limit_;
  convert_fn convert_;
  mutable std::mutex mtx_;
  grpc::ServerWriteReactor<Proto>* owner_ = nullptr;
  grpc::CallbackServerContext* call_ = nullptr;
  std::deque<Proto> queue_;
  size_t queued_bytes_ = 0;
  Proto in_flight_;
  bool writing_ = false;
  bool finish_requested_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool closed_ = false;
  grpc::Status final_;
  std::vector<std::function<void()>> hooks_;
  std::shared_ptr<report_gate> writes_;
  // Counted messages queued or in flight.
  size_t unwritten_ = 0;
};

/// The gRPC-facing end: a write reactor that deletes itself when done.
template <class Proto, class Domain>
class grpc_stream final : public grpc::ServerWriteReactor<Proto> {
public:
  /// The sink type this stream serves.
  using sink_type = grpc_sink<Proto, Domain>;

  /// A stream of the call `call`, queueing at most `limit` messages and
  /// `byte_limit` bytes.
  grpc_stream(grpc::CallbackServerContext* call, size_t limit,
              typename sink_type::convert_fn convert,
              size_t byte_limit = stream_byte_limit)
    : sink_(std::make_shared<sink_type>(limit, std::move(convert),
                                        byte_limit)) {
    sink_->attach(this, call);
  }

  /// The actor-facing end.
  std::shared_ptr<sink_type> sink() const {
    return sink_;
  }

  void OnWriteDone(bool ok) override {
    sink_->write_done(ok);
  }

  void OnCancel() override {
    sink_->cancel();
  }

  void OnDone() override {
    sink_->done();
    delete this;
  }

private:
  std::shared_ptr<sink_type> sink_;
};

} // namespace recoverd
