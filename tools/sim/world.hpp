#pragma once

/// The simulator's world: a recoverd daemon (given or spawned), simulated
/// jobs declared through the Platform API, and one process manager (the
/// agent library) per job whose callbacks stand in for training processes.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "child_process.hpp"
#include "platform.grpc.pb.h"
#include "process_manager.hpp"
#include "recover.grpc.pb.h"

namespace recoverd::sim {

namespace pb = recoverd::platform::v1;
using clock_type = std::chrono::steady_clock;

/// Command-line settings.
struct options {
  std::string server;
  bool spawn_daemon = false;
  std::string daemon_bin;
  std::string scenario = "all";
  int jobs = 2;
  int ranks = 16;
  int pods = 2;
  unsigned seed = 1;
  int delay_ms = 20;
  int timeout_s = 120;
  bool quiet = false;
  bool keep_jobs = false;
};

/// A recoverd started by the simulator on a free port with a temp data dir.
class spawned_daemon {
public:
  /// Starts it; `address()` is empty when it did not come up.
  spawned_daemon(std::string bin, bool fast_waits);
  ~spawned_daemon();

  const std::string& address() const {
    return address_;
  }

  /// SIGKILLs the daemon and starts it again on the same port and data.
  bool restart();

  /// Where its log goes.
  std::string log_file() const {
    return dir_ + "/recoverd.log";
  }

private:
  bool launch(const std::string& listen);

  std::string bin_;
  bool fast_;
  std::string dir_;
  std::string address_;
  std::unique_ptr<child_process> proc_;
};

/// One line of a job's story.
struct timeline_entry {
  double seconds = 0;
  std::string text;
};

/// A simulated job: its spec and its process manager.
struct sim_job {
  std::string id;
  pb::JobSpec spec;
  std::unique_ptr<agent::process_manager> pm;
  clock_type::time_point t0;
  std::mutex mtx;
  std::vector<timeline_entry> timeline;
  /// uuids of the signals the callbacks saw, in order.
  std::vector<std::string> uuids;
  /// Fault ranks of the last restart-ranks request.
  std::vector<std::string> restarted;
  /// The result code the stress-test callback reports for the first rank
  /// of the last pod.
  std::string stress_code = "0";
  /// Flows the job had finished before the scenario (a kept job of an
  /// earlier run).
  uint64_t base_flows = 0;

  /// Adds a line to the story.
  void note(const std::string& text);

  /// True when a line contains `text`.
  bool saw(const std::string& text);

  /// Global rank of device `device` of pod `pod`.
  std::string rank(int pod, int device) const;
};

/// Everything a scenario works with.
class world {
public:
  world(options opts, std::string address, spawned_daemon* daemon);

  const options& opts() const {
    return opts_;
  }

  /// The daemon the simulator spawned, or nullptr.
  spawned_daemon* daemon() {
    return daemon_;
  }

  /// Declares a job and starts its process manager with callbacks that take
  /// `--delay-ms` (jittered) and succeed; `customize` may replace some.
  std::shared_ptr<sim_job>
  start_job(const std::string& scenario, int index,
            std::vector<std::string> strategies,
            const std::function<void(sim_job&)>& customize = {});

  /// Stops a job's manager and deletes the job.
  void finish_job(sim_job& job);

  /// The job's status; false when GetJob fails.
  bool status(const std::string& id, pb::JobStatus& out);

  /// Waits until the job is idle after `flows` flows; false on timeout.
  bool wait_flows(const std::string& id, uint64_t flows, pb::JobStatus& out);

  /// Reports the fault center's view of a job's devices.
  bool device_faults(const sim_job& job, std::vector<pb::DeviceFault> faults);

  /// The Recover and Platform stubs.
  ::Recover::Stub& recover() {
    return *recover_;
  }
  pb::Platform::Stub& platform() {
    return *platform_;
  }

  /// A client context with the simulator's deadline.
  std::unique_ptr<grpc::ClientContext> context(int seconds = 10) const;

  /// The last message of an O&M operator stream (a late subscriber gets
  /// the outcome of the last operation).
  std::string last_operator_message(const std::string& job, bool stress);

private:
  options opts_;
  std::string address_;
  spawned_daemon* daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::Recover::Stub> recover_;
  std::unique_ptr<pb::Platform::Stub> platform_;
  std::mutex rng_mtx_;
  std::mt19937 rng_;
};

/// One scenario's result.
struct scenario_result {
  std::string name;
  int jobs = 0;
  int ok = 0;
  double seconds = 0;
  bool skipped = false;
  /// Why it failed (the first problem), or why it was skipped.
  std::string note;
  /// The first job's story.
  std::vector<timeline_entry> timeline;

  bool passed() const {
    return skipped || (jobs > 0 && ok == jobs);
  }
};

/// A scenario: runs against the world, fills the result.
using scenario_fn = std::function<void(world&, scenario_result&)>;

/// Every scenario, in the order `all` runs them.
const std::vector<std::pair<std::string, scenario_fn>>& scenarios();

} // namespace recoverd::sim
