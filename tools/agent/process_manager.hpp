#pragma once

/// The process-manager plug-in point of the agent library: a training
/// launcher registers what to do for each operation recoverd asks for (stop,
/// pause, continue, restart ranks, dump, exit, switch NIC, stress test) and
/// calls `start()`; the manager keeps the agent and worker streams open,
/// runs the callbacks one at a time, and sends the reports recoverd waits
/// for. It plays the part of TaskD's DLRecoverManager plus MindSpore's
/// process-manager plug-in.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent.hpp"

namespace recoverd::agent {

/// What recoverd asks the training processes to do.
enum class operation {
  /// stopTrain: stop training (a fault happened).
  stop,
  /// stopTrain with pause_train: pause for an operator action.
  pause,
  /// changeStrategy continue: go on after a pause.
  continue_training,
  /// changeStrategy retry / recover / downgrade / upgrade: restart the
  /// named ranks' processes (step retry, process recovery, DP scaling).
  restart_ranks,
  /// changeStrategy dump or saveAndExit: save a checkpoint.
  dump,
  /// changeStrategy exit, killMaster, faultNodesExit: stop for good.
  exit,
  /// SwitchRankList: move ranks to their backup link or back.
  switch_nic,
  /// StressTestRankParams: run stress operations on ranks.
  stress_test,
};

/// The name of `op` as the simulator and logs print it.
const char* to_string(operation op);

/// What a callback is asked.
struct request {
  operation op = operation::stop;
  /// The signal that asked (switch_nic and stress_test have none).
  ::ProcessManageSignal signal;
  /// The strategy of a changeStrategy ("retry", "recover", ...), else "".
  std::string strategy;
  /// Ranks concerned: fault ranks, or the ranks to switch.
  std::vector<std::string> ranks;
  /// switch_nic: per rank, true = to the backup link.
  std::vector<bool> to_backup;
  /// stress_test: global rank -> operations (0 = AIC, 1 = P2P).
  std::map<std::string, std::vector<int64_t>> stress_ops;
  /// The signal's `signal_key`; empty for worker messages.
  std::string key;
};

/// One stress operation's result.
struct stress_op_outcome {
  /// "0" passed, "1" not run, "2" hardware fault, "3" timeout, "4" voltage.
  std::string code = "0";
  std::string detail;
};

/// What a callback answers.
struct outcome {
  /// The status code reported (0 = success).
  int code = 0;
  /// switch_nic: whether the switch worked.
  bool ok = true;
  /// restart_ranks (downgrade): ranks to isolate.
  std::vector<std::string> isolate_ranks;
  /// stress_test: global rank -> op code -> result. Ranks left out pass.
  std::map<std::string, std::map<std::string, stress_op_outcome>> stress;
};

/// A callback for one operation. It runs on the manager's thread, one at a
/// time, and may take as long as the operation takes.
using callback = std::function<outcome(const request&)>;

/// Runs a job's callbacks against recoverd.
///
/// Signals come at least once: a signal received again (same
/// `signal_key`, e.g. after recoverd restarted and the stream re-opened)
/// does not run its callback again. Once handled, its report is sent again
/// with the outcome it had (the first one may have been lost while recoverd
/// was down); while it is still queued or running, the repeat is dropped.
/// Worker messages (SwitchRankList, StressTestRankParams) carry no uuid:
/// recoverd sends one again only to a new worker stream, and it runs again.
class process_manager {
public:
  /// @param strategies What the job's processes can do, reported when
  ///        recoverd asks (globalFault), e.g. {"retry", "recover", "dump"}.
  process_manager(const std::string& server, std::string job_id,
                  std::vector<std::string> strategies = {"retry", "recover",
                                                         "dump"});

  ~process_manager();

  process_manager(const process_manager&) = delete;
  process_manager& operator=(const process_manager&) = delete;

  /// Sets the callback of `op`. Operations without one succeed at once.
  void register_callbacks(operation op, callback fn);

  /// Called with a line for everything that happens (signals received,
  /// callbacks run, reports sent), for logs and timelines.
  void on_event(std::function<void(const std::string&)> fn);

  /// Init + Register, then opens the agent stream and the two worker
  /// streams (each re-opened when it ends). Returns the first failing
  /// status, or code 0.
  ::Status start();

  /// Closes the streams and waits for the running callback.
  void stop();

  /// The agent connection, for reports the launcher makes itself (e.g.
  /// ReportProcessFault when a process dies).
  client& agent() {
    return *agent_;
  }

private:
  void post(request req);
  void run();
  void handle(const request& req);
  void report(const request& req, const outcome& out);
  void note(const std::string& line);
  template <class Msg, class Open>
  void worker_loop(Open open, std::function<void(const Msg&)> take);

  std::string job_id_;
  std::vector<std::string> strategies_;
  std::unique_ptr<client> agent_;
  std::map<operation, callback> callbacks_;
  std::function<void(const std::string&)> on_event_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<request> queue_;
  /// Keys of signals queued or running.
  std::vector<std::string> pending_;
  /// Outcomes of the signals handled last, by key (oldest first, bounded).
  std::deque<std::pair<std::string, outcome>> handled_;
  bool stopping_ = false;
  std::vector<grpc::ClientContext*> live_;
  std::thread runner_;
  std::vector<std::thread> workers_;
};

} // namespace recoverd::agent
