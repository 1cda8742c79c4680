#include "world.hpp"

#include <cstdlib>
#include <thread>

namespace recoverd::sim {

using namespace std::chrono_literals;

// -- spawned daemon -------------------------------------------------------------

spawned_daemon::spawned_daemon(std::string bin, bool fast_waits)
  : bin_(std::move(bin)), fast_(fast_waits) {
  char tmpl[] = "/tmp/recoverd-sim-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    return;
  dir_ = tmpl;
  launch("127.0.0.1:0");
}

spawned_daemon::~spawned_daemon() {
  if (proc_) {
    proc_->kill(SIGTERM);
    if (proc_->wait(std::chrono::seconds(10)) < 0)
      proc_->kill(SIGKILL);
  }
  proc_.reset();
  if (!dir_.empty() && std::getenv("RECOVERD_SIM_KEEP") == nullptr)
    std::system(("rm -rf '" + dir_ + "'").c_str());
}

bool spawned_daemon::launch(const std::string& listen) {
  std::vector<std::string> args{"--listen", listen, "--data-dir",
                                dir_ + "/data", "--log-level", "info"};
  if (fast_)
    // Waits that only add wall time to a simulation.
    for (const char* flag :
         {"--fault-flush-wait", "--resource-release-wait",
          "--hccl-convergence-wait", "--restart-all-wait", "--recover-in-place-wait"}) {
      args.push_back(flag);
      args.push_back("0");
    }
  proc_ = std::make_unique<child_process>(bin_, args, log_file());
  address_ = proc_->read_line_after("recoverd: listening on ");
  return !address_.empty();
}

bool spawned_daemon::restart() {
  proc_->kill(SIGKILL);
  proc_->wait();
  auto listen = address_;
  return launch(listen);
}

// -- jobs -----------------------------------------------------------------------

void sim_job::note(const std::string& text) {
  std::lock_guard<std::mutex> guard{mtx};
  timeline.push_back(
    {std::chrono::duration<double>(clock_type::now() - t0).count(), text});
}

bool sim_job::saw(const std::string& text) {
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& e : timeline)
    if (e.text.find(text) != std::string::npos)
      return true;
  return false;
}

std::string sim_job::rank(int pod, int device) const {
  return spec.pods(pod).devices(device).rankid();
}

// -- world ----------------------------------------------------------------------

world::world(options opts, std::string address, spawned_daemon* daemon)
  : opts_(std::move(opts)),
    address_(std::move(address)),
    daemon_(daemon),
    rng_(opts_.seed) {
  channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  recover_ = ::Recover::NewStub(channel_);
  platform_ = pb::Platform::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> world::context(int seconds) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  ctx->set_wait_for_ready(true);
  return ctx;
}

std::shared_ptr<sim_job>
world::start_job(const std::string& scenario, int index,
                 std::vector<std::string> strategies,
                 const std::function<void(sim_job&)>& customize) {
  auto job = std::make_shared<sim_job>();
  job->id = "sim-" + scenario + "-" + std::to_string(index);
  job->t0 = clock_type::now();
  auto& spec = job->spec;
  spec.set_jobid(job->id);
  spec.set_name(scenario);
  spec.set_namespace_("sim");
  spec.set_framework("pytorch");
  spec.set_processrecoverenable(true);
  for (const auto& s : strategies)
    spec.add_recoverstrategies(s);
  int pods = std::max(1, opts_.pods);
  int per_pod = std::max(1, opts_.ranks / pods);
  for (int p = 0; p < pods; ++p) {
    auto* pod = spec.add_pods();
    pod->set_podrank(p);
    pod->set_uid(job->id + "-pod-" + std::to_string(p));
    pod->set_nodename(job->id + "-node-" + std::to_string(p));
    pod->set_running(true);
    pod->set_superpodid(0);
    for (int d = 0; d < per_pod; ++d) {
      auto* dev = pod->add_devices();
      dev->set_deviceid(std::to_string(d));
      dev->set_rankid(std::to_string(p * per_pod + d));
    }
  }
  pb::PutJobRequest put;
  *put.mutable_spec() = spec;
  pb::PutJobResponse resp;
  auto ctx = context();
  if (auto st = platform_->PutJob(ctx.get(), put, &resp); !st.ok()) {
    job->note("PutJob failed: " + st.error_message());
    return job;
  }
  job->base_flows = resp.job().flows();
  int delay = 0;
  {
    std::lock_guard<std::mutex> guard{rng_mtx_};
    // Callback delays vary by +-50% between jobs.
    std::uniform_int_distribution<int> jitter{opts_.delay_ms / 2,
                                              opts_.delay_ms * 3 / 2};
    delay = opts_.delay_ms > 0 ? jitter(rng_) : 0;
  }
  job->pm = std::make_unique<agent::process_manager>(address_, job->id,
                                                     std::move(strategies));
  auto* j = job.get();
  job->pm->on_event([j](const std::string& line) { j->note(line); });
  for (auto op : {agent::operation::stop, agent::operation::pause,
                  agent::operation::continue_training,
                  agent::operation::restart_ranks, agent::operation::dump,
                  agent::operation::exit, agent::operation::switch_nic,
                  agent::operation::stress_test})
    job->pm->register_callbacks(op, [j, delay, op](const agent::request& req) {
      {
        std::lock_guard<std::mutex> guard{j->mtx};
        if (!req.signal.uuid().empty())
          j->uuids.push_back(req.signal.uuid());
        if (op == agent::operation::restart_ranks)
          j->restarted = req.ranks;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      agent::outcome out;
      if (op == agent::operation::stress_test) {
        // The first rank of the last pod reports the scenario's code.
        std::lock_guard<std::mutex> guard{j->mtx};
        auto rank = j->rank(j->spec.pods_size() - 1, 0);
        out.stress[rank]["0"] = {j->stress_code, "simulated"};
      }
      return out;
    });
  if (customize)
    customize(*job);
  auto st = job->pm->start();
  if (st.code() != 0)
    job->note("agent start failed: " + st.info());
  // The streams are open once the daemon knows the subscriber.
  pb::JobStatus s;
  for (int i = 0; i < 500; ++i) {
    if (status(job->id, s) && s.subscribed())
      break;
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(100ms); // the worker streams follow
  return job;
}

void world::finish_job(sim_job& job) {
  if (job.pm)
    job.pm->stop();
  if (opts_.keep_jobs)
    return;
  pb::JobRef ref;
  ref.set_jobid(job.id);
  pb::DeleteJobResponse resp;
  auto ctx = context();
  platform_->DeleteJob(ctx.get(), ref, &resp);
}

bool world::status(const std::string& id, pb::JobStatus& out) {
  pb::JobRef ref;
  ref.set_jobid(id);
  auto ctx = context();
  return platform_->GetJob(ctx.get(), ref, &out).ok();
}

bool world::wait_flows(const std::string& id, uint64_t flows, pb::JobStatus& out) {
  auto deadline = clock_type::now() + std::chrono::seconds(opts_.timeout_s);
  while (clock_type::now() < deadline) {
    if (status(id, out) && out.flows() >= flows && out.recoverystate() == "INIT")
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

bool world::device_faults(const sim_job& job, std::vector<pb::DeviceFault> faults) {
  pb::ReportDeviceFaultsRequest req;
  auto* j = req.add_jobs();
  j->set_jobid(job.id);
  j->set_healthstate(faults.empty() ? "Healthy" : "UnHealthy");
  for (auto& f : faults)
    *j->add_faults() = std::move(f);
  pb::ReportDeviceFaultsResponse resp;
  auto ctx = context();
  return platform_->ReportDeviceFaults(ctx.get(), req, &resp).ok()
         && resp.results_size() == 1 && resp.results(0).accepted();
}

std::string world::last_operator_message(const std::string& job, bool stress) {
  std::string last;
  auto ctx = context();
  if (stress) {
    ::StressTestRequest req;
    req.set_jobid(job);
    auto r = recover_->SubscribeStressTestResponse(ctx.get(), req);
    ::StressTestResponse x;
    while (r->Read(&x))
      last = x.msg();
    r->Finish();
  } else {
    ::SwitchNicRequest req;
    req.set_jobid(job);
    auto r = recover_->SubscribeSwitchNicSignal(ctx.get(), req);
    ::SwitchNicResponse x;
    while (r->Read(&x))
      last = x.msg();
    r->Finish();
  }
  return last;
}

} // namespace recoverd::sim
