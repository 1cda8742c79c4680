#pragma once

/// The C++ agent library: what a training job's agent (TaskD's
/// DLRecoverManager) does against recoverd — init, register, subscribe with
/// automatic re-subscribe, and the reports. The simulator and the tests are
/// built on it.

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
  /// @param server recoverd's address, e.g. "127.0.0.1:8899".
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

  /// The Recover stub, for calls the library does not wrap.
  ::Recover::Stub& stub() {
    return *stub_;
  }

  /// The job id.
  const std::string& job_id() const {
    return job_id_;
  }

private:
  ::ClientInfo who() const;
  void subscribe_loop(std::function<void(const ::ProcessManageSignal&)> f,
                      std::chrono::milliseconds backoff);

  std::string job_id_;
  std::string role_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::Recover::Stub> stub_;
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
