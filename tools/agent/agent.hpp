#pragma once

/// The C++ agent library: what a training job's agent (TaskD's
/// DLRecoverManager) does against recoverd — init, register, subscribe with
/// automatic re-subscribe, and the reports. The simulator and the tests are
/// built on it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "recover.grpc.pb.h"

namespace recoverd::agent {

/// A (rank, fault type) pair as agents report it.
using fault = std::pair<std::string, std::string>;

/// What makes two signals the same request, for dedupe. recoverd delivers
/// at least once: a new stream gets again, with its uuid, the signal the
/// current wait waits on (design §4.1). The key is the uuid and signal type
/// plus the change strategy, extra parameters and actions, because one flow
/// legitimately sends several changeStrategy signals under one uuid (e.g.
/// recover, then dump after a failed recover).
std::string signal_key(const ::ProcessManageSignal& sig);

/// One job's agent connection.
class client {
public:
  /// @param server recoverd's address, e.g. "127.0.0.1:8899", or the
  ///   replicas of an active/standby recoverd as a comma-separated list
  ///   ("10.0.0.5:8899,10.0.0.6:8899"). One address: every call waits for the
  ///   channel (up to its 10 s). Several: a call goes to the current address
  ///   without waiting, each attempt for at most 1 s; an attempt that fails
  ///   with UNAVAILABLE (a standby's answer, or a refused connection) or
  ///   DEADLINE_EXCEEDED moves on to the next address, until the call's 10 s
  ///   pass. The subscription moves on likewise whenever its stream ends.
  client(const std::string& server, std::string job_id,
         std::string role = "agent");

  ~client();

  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Recover.Init. A failed call comes back with code -1 and the gRPC text.
  ::Status init();

  /// Recover.Register.
  ::Status register_job();

  /// Init + Register.
  ::Status init_clusterd();

  /// Opens SubscribeProcessManageSignal on a background thread and keeps it
  /// open: when the stream ends for any reason, it subscribes again after
  /// `backoff`. Every signal goes to `on_signal` (if set), re-deliveries
  /// included; the queue read by `next_signal` gets each one once (by
  /// `signal_key`), and `redelivered` counts the repeats it left out.
  void start_subscribe(
    std::function<void(const ::ProcessManageSignal&)> on_signal = {},
    std::chrono::milliseconds backoff = std::chrono::milliseconds(100));

  /// Stops the subscription thread.
  void stop();

  /// The next signal other than keep-alive, or nothing after `timeout`.
  std::optional<::ProcessManageSignal>
  next_signal(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  /// Signals received so far, keep-alives included.
  size_t received() const;

  /// Signals received again (same `signal_key`) and kept off the queue.
  size_t redelivered() const;

  /// Streams opened so far.
  size_t subscriptions() const;

  /// Times a call or the subscription moved on to the next address (always 0
  /// with one address).
  size_t failovers() const;

  /// Recover.ReportStopComplete.
  ::Status report_stop_complete(int code, const std::vector<fault>& faults = {});

  /// Recover.ReportRecoverStrategy.
  ::Status report_recover_strategy(const std::vector<std::string>& strategies,
                                   const std::vector<fault>& faults = {});

  /// Recover.ReportRecoverStatus.
  ::Status report_recover_status(int code, const std::string& strategy,
                                 const std::vector<std::string>& isolate = {});

  /// Recover.ReportProcessFault.
  ::Status report_process_fault(const std::vector<fault>& faults);

  /// The Recover stub of the current address, for calls the library does
  /// not wrap. The reference stays valid as long as the client; with several
  /// addresses, call `stub()` again for each call to follow a failover.
  ::Recover::Stub& stub() {
    return *stubs_[current_.load()];
  }

  /// The job id.
  const std::string& job_id() const {
    return job_id_;
  }

private:
  /// A unary Recover method whose answer is a `Status`.
  template <class Request>
  using rpc = grpc::Status (::Recover::Stub::*)(grpc::ClientContext*,
                                                const Request&, ::Status*);

  /// Calls `method` with `req`: at the single address, or with failover over
  /// several. A failed call comes back with code -1 and the gRPC text.
  template <class Request>
  ::Status unary(rpc<Request> method, const Request& req);

  /// Moves the current address on from `from`, unless another thread
  /// already did.
  void advance(size_t from);

  ::ClientInfo who() const;
  void subscribe_loop(std::function<void(const ::ProcessManageSignal&)> f,
                      std::chrono::milliseconds backoff);

  std::string job_id_;
  std::string role_;
  /// One channel and stub per address, fixed after construction.
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<::Recover::Stub>> stubs_;
  /// The index of the address calls go to; the caller's threads and the
  /// subscription thread move it.
  std::atomic<size_t> current_{0};
  std::atomic<size_t> failovers_{0};
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<::ProcessManageSignal> queue_;
  /// Keys of the signals queued so far, oldest first (bounded).
  std::deque<std::string> seen_;
  size_t received_ = 0;
  size_t redelivered_ = 0;
  size_t subscriptions_ = 0;
  bool stopping_ = false;
  grpc::ClientContext* live_ = nullptr;
  std::thread thread_;
};

} // namespace recoverd::agent
