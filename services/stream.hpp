#pragma once

/// A gRPC server stream fed by an actor: `grpc_sink` implements the actors'
/// `stream_sink` over a callback-API write reactor. At most one write is in
/// flight; the rest wait in a bounded queue; overflow ends the stream with
/// RESOURCE_EXHAUSTED. Nothing here blocks beyond a short mutex.

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <grpcpp/support/server_callback.h>

#include "actors/log.hpp"
#include "actors/sink.hpp"
#include "services/status_mapping.hpp"

namespace recoverd {

/// The actor-facing end of a server stream of `Proto` messages built from
/// `Domain` values.
template <class Proto, class Domain>
class grpc_sink final : public stream_sink<Domain> {
public:
  /// Fills a message from a domain value.
  using convert_fn = std::function<void(const Domain&, Proto&)>;

  grpc_sink(size_t limit, convert_fn convert)
    : limit_(limit), convert_(std::move(convert)) {
    // nop
  }

  bool push(const Domain& x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (owner_ == nullptr || cancelled_ || finish_requested_)
      return false;
    if (queue_.size() >= limit_) {
      ES_WARN("stream overflowed after {} queued messages; closing it",
              queue_.size());
      queue_.clear();
      finish_requested_ = true;
      final_ = grpc::Status{grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "stream consumer too slow: buffer of "
                              + std::to_string(limit_) + " messages full"};
      pump_locked();
      return false;
    }
    queue_.emplace_back();
    convert_(x, queue_.back());
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

  // -- reactor side -----------------------------------------------------------

  /// Binds the reactor that writes for this sink.
  void attach(grpc::ServerWriteReactor<Proto>* owner) {
    std::lock_guard<std::mutex> guard{mtx_};
    owner_ = owner;
  }

  /// A write completed.
  void write_done(bool ok) {
    std::lock_guard<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok)
      cancelled_ = true;
    pump_locked();
  }

  /// The client cancelled or went away.
  void cancel() {
    std::lock_guard<std::mutex> guard{mtx_};
    cancelled_ = true;
    pump_locked();
  }

  /// The RPC is over; runs the close hooks.
  void done() {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      owner_ = nullptr;
      closed_ = true;
      hooks.swap(hooks_);
    }
    for (auto& f : hooks)
      f();
  }

private:
  void pump_locked() {
    // In gRPC 1.51 StartWrite/Finish never call back inline, so calling them
    // under the mutex is safe.
    if (owner_ == nullptr || finished_ || writing_)
      return;
    if (!queue_.empty() && !cancelled_) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      owner_->StartWrite(&in_flight_);
    } else if (finish_requested_ || cancelled_) {
      finished_ = true;
      owner_->Finish(cancelled_ ? grpc::Status::CANCELLED : final_);
    }
  }

  const size_t limit_;
  convert_fn convert_;
  mutable std::mutex mtx_;
  grpc::ServerWriteReactor<Proto>* owner_ = nullptr;
  std::deque<Proto> queue_;
  Proto in_flight_;
  bool writing_ = false;
  bool finish_requested_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool closed_ = false;
  grpc::Status final_;
  std::vector<std::function<void()>> hooks_;
};

/// The gRPC-facing end: a write reactor that deletes itself when done.
template <class Proto, class Domain>
class grpc_stream final : public grpc::ServerWriteReactor<Proto> {
public:
  /// The sink type this stream serves.
  using sink_type = grpc_sink<Proto, Domain>;

  grpc_stream(size_t limit, typename sink_type::convert_fn convert)
    : sink_(std::make_shared<sink_type>(limit, std::move(convert))) {
    sink_->attach(this);
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
