// The simulator's scenarios: each injects something into every simulated job
// at once and checks the outcome recoverd drives the job to.

#include <condition_variable>
#include <thread>

#include "world.hpp"

namespace recoverd::sim {

namespace {

using namespace std::chrono_literals;

const std::vector<std::string> full_ladder = {"retry", "recover", "dump"};

// Starts every job, runs `one` for all of them at once (it answers "" or
// what went wrong), and cleans up.
void run_jobs(world& w, scenario_result& res, const std::string& name,
              const std::vector<std::string>& strategies,
              const std::function<std::string(sim_job&)>& one,
              const std::function<void(sim_job&)>& customize = {}) {
  std::vector<std::shared_ptr<sim_job>> jobs(static_cast<size_t>(w.opts().jobs));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      jobs[i] = w.start_job(name, static_cast<int>(i), strategies, customize);
    });
  for (auto& t : threads)
    t.join();
  threads.clear();
  res.jobs = static_cast<int>(jobs.size());
  std::vector<std::string> errors(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] { errors[i] = one(*jobs[i]); });
  for (auto& t : threads)
    t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (errors[i].empty())
      ++res.ok;
    else if (res.note.empty())
      res.note = jobs[i]->id + ": " + errors[i];
  }
  if (!jobs.empty()) {
    std::lock_guard<std::mutex> guard{jobs[0]->mtx};
    res.timeline = jobs[0]->timeline;
  }
  for (auto& j : jobs)
    w.finish_job(*j);
}

// Waits for the job to finish its `flows`-th flow with `outcome`.
std::string expect_outcome(world& w, sim_job& j, uint64_t flows,
                           const std::string& outcome) {
  pb::JobStatus s;
  if (!w.wait_flows(j.id, j.base_flows + flows, s))
    return "no outcome within " + std::to_string(w.opts().timeout_s)
           + " s (state " + s.recoverystate() + ")";
  j.note("outcome: " + s.lastoutcome());
  if (s.lastoutcome() != outcome)
    return "outcome " + s.lastoutcome() + ", expected " + outcome;
  return {};
}

// The first of `texts` the job's story lacks, as an error. A report's
// answer may reach the agent just after the outcome is visible: wait a
// little for each line.
std::string expect_saw(sim_job& j, const std::vector<std::string>& texts) {
  for (const auto& t : texts) {
    auto deadline = clock_type::now() + 5s;
    while (!j.saw(t) && clock_type::now() < deadline)
      std::this_thread::sleep_for(10ms);
    if (!j.saw(t))
      return "never saw \"" + t + "\"";
  }
  return {};
}

// The outcome first (it waits), then what the story must hold.
std::string outcome_and_story(world& w, sim_job& j, uint64_t flows,
                              const std::string& outcome,
                              const std::vector<std::string>& texts) {
  auto err = expect_outcome(w, j, flows, outcome);
  return err.empty() ? expect_saw(j, texts) : err;
}

std::string inject_process_fault(sim_job& j, const std::string& rank) {
  j.note("inject: process of rank " + rank + " died (hardware fault, type 1)");
  auto st = j.pm->agent().report_process_fault({{rank, "1"}});
  if (st.code() != 0)
    return "ReportProcessFault answered " + std::to_string(st.code()) + " "
           + st.info();
  return {};
}

pb::DeviceFault device_fault(const sim_job& j, int pod, int device,
                             const std::string& code) {
  pb::DeviceFault f;
  f.set_nodename(j.spec.pods(pod).nodename());
  f.set_deviceid(j.spec.pods(pod).devices(device).deviceid());
  f.add_faultcodes(code);
  f.set_faultlevel("RestartRequest");
  return f;
}

// A fault from the fault center that step retry can fix.
std::string retry_fault(world& w, sim_job& j, const std::string& code,
                        const std::vector<std::string>& seen) {
  int last = j.spec.pods_size() - 1;
  j.note("inject: fault center reports " + code + " on " + j.rank(last, 0));
  if (!w.device_faults(j, {device_fault(j, last, 0, code)}))
    return "ReportDeviceFaults was not accepted";
  auto err = outcome_and_story(w, j, 1, "retry-success", seen);
  w.device_faults(j, {}); // the fault clears
  return err;
}

void hardware_fault(world& w, scenario_result& res) {
  run_jobs(w, res, "hardware-fault", full_ladder, [&](sim_job& j) {
    if (auto err = inject_process_fault(j, j.rank(j.spec.pods_size() - 1, 0));
        !err.empty())
      return err;
    return outcome_and_story(w, j, 1, "recover-success", {"got stopTrain", "reported stop complete 0",
                               "got globalFault", "reported strategies",
                               "got changeStrategy recover",
                               "reported recover status 0"});
  });
}

void uce_retry(world& w, scenario_result& res) {
  run_jobs(w, res, "uce-retry", full_ladder, [&](sim_job& j) {
    return retry_fault(w, j, "80E01801",
                       {"got stopTrain", "got globalFault",
                        "got changeStrategy retry", "reported retry status 0"});
  });
}

void network_fault(world& w, scenario_result& res) {
  run_jobs(w, res, "network-fault", full_ladder, [&](sim_job& j) {
    return retry_fault(w, j, "8C1F860B",
                       {"got globalFault (timeout 33)",
                        "got changeStrategy retry", "reported retry status 0"});
  });
}

void fault_during_recovery(world& w, scenario_result& res) {
  run_jobs(
    w, res, "fault-during-recovery", full_ladder,
    [&](sim_job& j) {
      if (auto err = inject_process_fault(j, j.rank(0, 0)); !err.empty())
        return err;
      auto err = outcome_and_story(w, j, 1, "recover-success", {"inject: second fault"});
      if (!err.empty())
        return err;
      std::this_thread::sleep_for(200ms);
      pb::JobStatus s;
      if (w.status(j.id, s) && s.flows() != j.base_flows + 1)
        return "the second fault started flow " + std::to_string(s.flows())
               + " instead of joining the first";
      std::lock_guard<std::mutex> guard{j.mtx};
      auto late = j.rank(j.spec.pods_size() - 1, 0);
      for (const auto& r : {j.rank(0, 0), late})
        if (std::find(j.restarted.begin(), j.restarted.end(), r) == j.restarted.end())
          return "rank " + r + " was not restarted";
      return std::string{};
    },
    [](sim_job& j) {
      // While the processes stop, a second pod fails.
      auto once = std::make_shared<std::atomic<bool>>(false);
      auto* jp = &j;
      j.pm->register_callbacks(agent::operation::stop,
                               [jp, once](const agent::request& req) {
                                 {
                                   std::lock_guard<std::mutex> guard{jp->mtx};
                                   jp->uuids.push_back(req.signal.uuid());
                                 }
                                 if (!once->exchange(true)) {
                                   auto r = jp->rank(jp->spec.pods_size() - 1, 0);
                                   jp->note("inject: second fault, rank " + r);
                                   jp->pm->agent().report_process_fault({{r, "1"}});
                                 }
                                 return agent::outcome{};
                               });
    });
}

::Status switch_nic(world& w, const sim_job& j) {
  ::SwitchNics req;
  req.set_jobid(j.id);
  auto& ops = (*req.mutable_nicops())[j.spec.pods(j.spec.pods_size() - 1).nodename()];
  ops.add_dev(j.spec.pods(j.spec.pods_size() - 1).devices(0).deviceid());
  ops.add_op(true);
  ::Status resp;
  auto ctx = w.context();
  if (auto st = w.recover().SwitchNicTrack(ctx.get(), req, &resp); !st.ok()) {
    resp.set_code(-1);
    resp.set_info(st.error_message());
  }
  return resp;
}

void switch_nic_scenario(world& w, scenario_result& res) {
  run_jobs(w, res, "switch-nic", full_ladder, [&](sim_job& j) {
    j.note("inject: operator switches " + j.rank(j.spec.pods_size() - 1, 0)
           + " to its backup link");
    auto st = switch_nic(w, j);
    if (st.code() != 0)
      return "SwitchNicTrack answered " + std::to_string(st.code()) + " " + st.info();
    auto err = outcome_and_story(w, j, 1, "recovered",
                                 {"got stopTrain", "got SwitchRankList",
                                  "replied switch ok", "got changeStrategy continue"});
    if (!err.empty())
      return err;
    auto msg = w.last_operator_message(j.id, false);
    j.note("operator: " + msg);
    return msg == "switch nic finish" ? std::string{}
                                      : "operator message \"" + msg + "\"";
  });
}

::Status stress_test(world& w, const sim_job& j) {
  ::StressTestParam req;
  req.set_jobid(j.id);
  auto& ops = (*req.mutable_stressparam())[j.spec.pods(j.spec.pods_size() - 1).nodename()];
  ops.add_ops(0);
  ops.add_ops(1);
  ::Status resp;
  auto ctx = w.context();
  if (auto st = w.recover().StressTest(ctx.get(), req, &resp); !st.ok()) {
    resp.set_code(-1);
    resp.set_info(st.error_message());
  }
  return resp;
}

// One stress test round with result `code`; checks its consequence.
std::string stress_round(world& w, sim_job& j, const std::string& code,
                         uint64_t flows) {
  {
    std::lock_guard<std::mutex> guard{j.mtx};
    j.stress_code = code;
  }
  auto node = j.spec.pods(j.spec.pods_size() - 1).nodename();
  j.note("inject: operator stress-tests " + node + "; the result will be code " + code);
  auto st = stress_test(w, j);
  if (st.code() != 0)
    return "StressTest answered " + std::to_string(st.code()) + " " + st.info();
  bool fails = code == "2" || code == "3" || code == "4";
  auto err = outcome_and_story(w, j, flows, fails ? "recover-success" : "recovered", {"got pauseStartAgent", "got continueStartAgent"});
  if (!err.empty())
    return err;
  auto msg = w.last_operator_message(j.id, true);
  j.note("operator: " + msg.substr(0, msg.find(",result:")));
  std::string want = code == "2"   ? "stress test find fault, isolate node:[" + node + "]"
                     : fails       ? "stress test timeout fault"
                                   : "stress test finish";
  if (msg.rfind(want, 0) != 0)
    return "code " + code + ": operator message \"" + msg + "\"";
  if (code != "2")
    return {};
  // The isolated node is listed until an operator clears it.
  pb::ListNodeHealthRequest list;
  pb::ListNodeHealthResponse nodes;
  auto ctx = w.context();
  w.platform().ListNodeHealth(ctx.get(), list, &nodes);
  bool listed = false;
  for (const auto& n : nodes.nodes())
    listed = listed || (n.node() == node && n.jobid() == j.id);
  if (!listed)
    return "node " + node + " is not listed unhealthy";
  pb::ClearNodeHealthRequest clear;
  clear.set_node(node);
  clear.set_jobid(j.id);
  pb::ClearNodeHealthResponse cleared;
  auto cctx = w.context();
  if (!w.platform().ClearNodeHealth(cctx.get(), clear, &cleared).ok())
    return "node " + node + " could not be cleared";
  j.note("operator: cleared node " + node);
  return {};
}

void stress_scenario(world& w, scenario_result& res) {
  run_jobs(w, res, "stress-test", full_ladder, [&](sim_job& j) {
    uint64_t flows = 0;
    for (const char* code : {"0", "1", "2", "3", "4"})
      if (auto err = stress_round(w, j, code, ++flows); !err.empty())
        return err;
    return std::string{};
  });
}

void daemon_restart(world& w, scenario_result& res) {
  if (w.daemon() == nullptr) {
    res.skipped = true;
    res.note = "needs --spawn-daemon (the simulator must own the daemon to kill it)";
    return;
  }
  // The first job to stop kills and restarts the daemon; the others wait
  // for it, so every job's flow spans the restart.
  struct restart_gate {
    std::mutex mtx;
    std::condition_variable cv;
    bool started = false;
    bool done = false;
    bool ok = false;
  };
  auto gate = std::make_shared<restart_gate>();
  auto* daemon = w.daemon();
  run_jobs(
    w, res, "daemon-restart", full_ladder,
    [&](sim_job& j) {
      if (auto err = inject_process_fault(j, j.rank(0, 0)); !err.empty())
        return err;
      auto err = outcome_and_story(w, j, 1, "recover-success", {"daemon restarted", "got changeStrategy recover"});
      if (!err.empty())
        return err;
      std::lock_guard<std::mutex> guard{j.mtx};
      for (const auto& u : j.uuids)
        if (u != j.uuids.front())
          return "the flow's uuid changed across the restart (" + j.uuids.front()
                 + " -> " + u + ")";
      return std::string{};
    },
    [gate, daemon](sim_job& j) {
      auto* jp = &j;
      j.pm->register_callbacks(agent::operation::stop, [jp, gate, daemon](
                                                         const agent::request& req) {
        {
          std::lock_guard<std::mutex> guard{jp->mtx};
          jp->uuids.push_back(req.signal.uuid());
        }
        std::unique_lock<std::mutex> lock{gate->mtx};
        if (!gate->started) {
          gate->started = true;
          lock.unlock();
          // Let the delivery of stopTrain become durable first.
          std::this_thread::sleep_for(300ms);
          jp->note("inject: recoverd SIGKILLed mid-recovery");
          bool ok = daemon->restart();
          jp->note(ok ? "daemon restarted" : "daemon did not restart");
          lock.lock();
          gate->done = true;
          gate->ok = ok;
          gate->cv.notify_all();
        } else {
          gate->cv.wait_for(lock, 30s, [&] { return gate->done; });
          jp->note("daemon restarted (seen by this job)");
        }
        return agent::outcome{};
      });
    });
}

} // namespace

const std::vector<std::pair<std::string, scenario_fn>>& scenarios() {
  static const std::vector<std::pair<std::string, scenario_fn>> all = {
    {"hardware-fault", hardware_fault},
    {"uce-retry", uce_retry},
    {"network-fault", network_fault},
    {"fault-during-recovery", fault_during_recovery},
    {"switch-nic", switch_nic_scenario},
    {"stress-test", stress_scenario},
    {"daemon-restart", daemon_restart},
  };
  return all;
}

} // namespace recoverd::sim
