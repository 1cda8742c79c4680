// storm_bench: a fault storm (design §7: 1,000 jobs faulted at the same
// moment by one ReportDeviceFaults all have stopTrain within 100 ms).
//
// An in-process daemon on loopback with every configured wait at 0; each
// job has a process manager of the agent library (its agent stream and two
// worker streams open; it answers stopTrain, globalFault and changeStrategy
// itself). One Platform.ReportDeviceFaults call carries a snapshot with a
// retry-class fault (80E01801, so every job starts a flow) for every job.
// Timed from the client's clock just before the call: (1) every agent holds
// stopTrain (its stream thread stamps the arrival), (2) every agent's status
// report was answered, (3) every job is back in INIT (ListJobs), each job's
// last outcome checked with GetJob. The baseline is the same number of unary
// round trips to a trivial gRPC server, from as many client threads as the
// daemon has jobs reporting at once (capped at 64), in the same run.
//
// Agents and daemon share this machine's cores, so an agent that has its
// stopTrain answers at once (StopComplete, then its strategies and status)
// and those answers compete with the stops still on their way. With
// --hold-stop each agent's stop callback waits until every agent has its
// stopTrain: the figure is then the daemon's stop fan-out alone, as when
// the agents run elsewhere (their replies still cost the daemon the same,
// only later).
//
// A process manager reads each stream on a thread of its own and hands
// every signal to another; on this VM those wake-ups are most of what the
// agents cost (perf: 40-57% of the CPU in the stop window, held or not).
// With --light-agents every job's agent is a read reactor on gRPC's
// callback API over one shared channel, answering the same three signals
// with asynchronous calls: the agents then cost a small share, and the
// figure is close to what the daemon takes when its agents run on other
// machines, as in production. A second baseline, the fan-out's floor, is a
// trivial server pushing one stopTrain to as many open streams, read the
// way the storm's agents read.
//
// Storms back to back (200 ms apart) each find the memory the last one
// freed still mapped and its threads and connections warm. A real storm
// hits a daemon that has been idle for hours: --idle N leaves it idle N
// seconds before each storm, so the figure includes what coming back from
// idle costs.
//
// With --daemon-process the daemon runs in a child process of its own
// (tools/bench/daemon_process.hpp): each storm then gives the daemon's own
// resident memory and jemalloc's live heap, which many storms in a row show
// levelling off or growing.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "platform.grpc.pb.h"
#include "process_manager.hpp"
#include "services/app.hpp"
#include "tools/bench/baseline.hpp"
#include "tools/bench/daemon_process.hpp"

using namespace recoverd;
using namespace recoverd::bench;
namespace pb = recoverd::platform::v1;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr size_t devices_per_pod = 8;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "storm_bench: %s\n", what.c_str());
  std::exit(1);
}

int64_t now_ns() {
  return clock_type::now().time_since_epoch().count();
}

std::string job_name(size_t i) {
  return "storm-" + std::to_string(i);
}

void put_job(pb::Platform::Stub& platform, const std::string& id,
             size_t ranks) {
  pb::PutJobRequest req;
  auto* spec = req.mutable_spec();
  spec->set_jobid(id);
  spec->set_processrecoverenable(true);
  // Step retry makes 80E01801 a retry fault: the fault center starts a flow
  // (without it the job only gets preExitProcess).
  spec->add_recoverstrategies("retry");
  spec->add_recoverstrategies("recover");
  for (size_t p = 0; p < ranks / devices_per_pod; ++p) {
    auto* pod = spec->add_pods();
    pod->set_podrank(static_cast<int32_t>(p));
    pod->set_uid(id + "-" + std::to_string(p));
    pod->set_nodename("node-" + std::to_string(p));
    pod->set_running(true);
    for (size_t d = 0; d < devices_per_pod; ++d) {
      auto* dev = pod->add_devices();
      dev->set_deviceid(std::to_string(d));
      dev->set_rankid(std::to_string(p * devices_per_pod + d));
    }
  }
  pb::PutJobResponse resp;
  grpc::ClientContext c;
  if (auto st = platform.PutJob(&c, req, &resp); !st.ok())
    die("PutJob failed: " + st.error_message());
}

std::vector<pb::JobSummary> list_jobs(pb::Platform::Stub& platform) {
  pb::ListJobsRequest req;
  pb::ListJobsResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 30s);
  if (auto st = platform.ListJobs(&c, req, &resp); !st.ok())
    die("ListJobs failed: " + st.error_message());
  return {resp.jobs().begin(), resp.jobs().end()};
}

// Runs f(i) for i in [0, n) on `threads` threads.
template <class F>
void parallel_for(size_t n, size_t threads, F f) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> ts;
  for (size_t t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (auto i = next++; i < n; i = next++)
        f(i);
    });
  for (auto& t : ts)
    t.join();
}

// What each job's agent saw, stamped on the agent's threads.
struct stamps {
  std::atomic<int64_t> stopped{0};
  std::atomic<int64_t> reported{0};
};

// A job's agent stream read on gRPC's callback API: `on_signal` sees each
// signal on one of gRPC's threads; no thread waits per stream.
class signal_reader : public grpc::ClientReadReactor<::ProcessManageSignal> {
public:
  explicit signal_reader(std::string job) {
    who_.set_jobid(std::move(job));
    who_.set_role("process-manager");
  }

  /// Opens the stream.
  void subscribe(::Recover::Stub& stub) {
    stub.async()->SubscribeProcessManageSignal(&call_, &who_, this);
    StartRead(&sig_);
    StartCall();
  }

  /// Ends the stream.
  void cancel() {
    call_.TryCancel();
  }

  /// Waits until the stream has ended and every call in flight is answered.
  void await_done() {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [this] { return done_ && calls_ == 0; });
  }

  void OnReadDone(bool ok) final {
    if (!ok)
      return;
    on_signal(sig_);
    StartRead(&sig_);
  }

  void OnDone(const grpc::Status&) final {
    std::lock_guard<std::mutex> guard{mtx_};
    done_ = true;
    cv_.notify_all();
  }

protected:
  virtual void on_signal(const ::ProcessManageSignal& sig) = 0;

  ::ClientInfo who_;
  std::mutex mtx_;
  std::condition_variable cv_;
  size_t calls_ = 0;

private:
  grpc::ClientContext call_;
  ::ProcessManageSignal sig_;
  bool done_ = false;
};

// A light agent (--light-agents): the process manager's part of a retry
// flow, on gRPC's callback API. Its agent stream is a read reactor on a
// channel all light agents share; it stamps stopTrain on arrival and
// answers stopTrain (StopComplete), globalFault (its strategies) and
// changeStrategy (status 0) with asynchronous calls, so no thread waits
// per stream and the agents' side of a storm costs a small part of what a
// thread per stream costs. Its worker streams are not opened: a retry
// flow sends nothing on them. With --hold-stop it sends its StopComplete
// only once every agent has stopTrain.
class light_agent final : public signal_reader {
public:
  light_agent(::Recover::Stub& stub, std::string job, stamps& seen)
    : signal_reader(std::move(job)), stub_(stub), seen_(seen) {
    // nop
  }

  /// Init and Register (blocking), then the agent stream.
  void start() {
    for (auto rpc : {&::Recover::Stub::Init, &::Recover::Stub::Register}) {
      ::Status resp;
      grpc::ClientContext c;
      if (auto st = (stub_.*rpc)(&c, who_, &resp); !st.ok() || resp.code())
        die("job " + who_.jobid() + ": Init/Register failed");
    }
    subscribe(stub_);
  }

  /// Holds the answer to the next stopTrain until `release` (--hold-stop).
  void hold() {
    std::lock_guard<std::mutex> guard{mtx_};
    holding_ = true;
  }

  /// Sends the held answer, if any.
  void release() {
    bool held = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      holding_ = false;
      std::swap(held, held_);
    }
    if (held)
      report_stop();
  }

  /// Ends the stream and waits until gRPC is done with it.
  void stop() {
    cancel();
    await_done();
  }

private:
  void on_signal(const ::ProcessManageSignal& sig) override {
    const auto& type = sig.signaltype();
    if (type == "stopTrain") {
      seen_.stopped = now_ns();
      bool now = true;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        if (holding_) {
          held_ = true;
          now = false;
        }
      }
      if (now)
        report_stop();
    } else if (type == "globalFault") {
      auto* c = new call<::RecoverStrategyRequest>(*this);
      c->req.set_jobid(who_.jobid());
      c->req.add_strategies("retry");
      c->req.add_strategies("recover");
      stub_.async()->ReportRecoverStrategy(&c->ctx, &c->req, &c->resp,
                                           c->done());
    } else if (type == "changeStrategy") {
      auto* c = new call<::RecoverStatusRequest>(*this, true);
      c->req.set_jobid(who_.jobid());
      c->req.mutable_status()->set_code(0);
      c->req.set_strategy(sig.changestrategy());
      stub_.async()->ReportRecoverStatus(&c->ctx, &c->req, &c->resp, c->done());
    }
  }

  void report_stop() {
    auto* c = new call<::StopCompleteRequest>(*this);
    c->req.set_jobid(who_.jobid());
    c->req.mutable_status()->set_code(0);
    stub_.async()->ReportStopComplete(&c->ctx, &c->req, &c->resp, c->done());
  }

  // One report in flight; deletes itself when answered.
  template <class Request>
  struct call {
    call(light_agent& owner, bool last = false) : self(owner), final(last) {
      std::lock_guard<std::mutex> guard{self.mtx_};
      ++self.calls_;
    }

    std::function<void(grpc::Status)> done() {
      return [this](grpc::Status st) {
        if (final && st.ok() && resp.code() == 0)
          self.seen_.reported = now_ns();
        auto& owner = self;
        delete this;
        std::lock_guard<std::mutex> guard{owner.mtx_};
        --owner.calls_;
        owner.cv_.notify_all();
      };
    }

    light_agent& self;
    bool final;
    grpc::ClientContext ctx;
    Request req;
    ::Status resp;
  };

  ::Recover::Stub& stub_;
  stamps& seen_;
  bool holding_ = false;
  bool held_ = false;
};

// The fault-center snapshot of every job: one retry-class fault on the
// first device of the first pod (`faulty`), or no fault.
pb::ReportDeviceFaultsRequest snapshot_of(size_t jobs, bool faulty) {
  pb::ReportDeviceFaultsRequest req;
  for (size_t i = 0; i < jobs; ++i) {
    auto* j = req.add_jobs();
    j->set_jobid(job_name(i));
    j->set_healthstate(faulty ? "UnHealthy" : "Healthy");
    if (faulty) {
      auto* f = j->add_faults();
      f->set_nodename("node-0");
      f->set_deviceid("0");
      f->add_faultcodes("80E01801");
      f->set_faultlevel("RestartRequest");
    }
  }
  return req;
}

void report_device_faults(pb::Platform::Stub& platform,
                          const pb::ReportDeviceFaultsRequest& req) {
  pb::ReportDeviceFaultsResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 60s);
  if (auto st = platform.ReportDeviceFaults(&c, req, &resp); !st.ok())
    die("ReportDeviceFaults failed: " + st.error_message());
  for (const auto& r : resp.results())
    if (!r.accepted())
      die("job " + r.jobid() + " refused the snapshot: " + r.error());
}

// Waits until `done()` or `limit` passes; false on time-out.
template <class Done>
bool wait_for(Done done, std::chrono::milliseconds limit,
              std::chrono::microseconds poll = 500us) {
  auto end = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > end)
      return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

// Holds the agents' stop callbacks until opened (--hold-stop).
class gate {
public:
  void close() {
    std::lock_guard<std::mutex> guard{mtx_};
    open_ = false;
  }

  void open() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      open_ = true;
    }
    cv_.notify_all();
  }

  // Waits until open, at most `limit`.
  void pass(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, limit, [this] { return open_; });
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool open_ = true;
};

// The floor of a stop fan-out on this machine: a trivial server holding
// one open SubscribeProcessManageSignal stream per job pushes a stopTrain
// to every stream from one thread; each client reads on a thread of its
// own over a channel made as the agent library makes it (so the streams
// share a connection as the agents' do). No decision, no journal: what
// any server of this protocol pays to reach the agents here.
class push_stream final
  : public grpc::ServerWriteReactor<::ProcessManageSignal> {
public:
  explicit push_stream(const std::string& job) {
    msg_.set_uuid("00000000-0000-4000-8000-000000000000");
    msg_.set_jobid(job);
    msg_.set_signaltype("stopTrain");
    msg_.add_actions("stop_train");
    auto* rank = msg_.add_faultranks();
    rank->set_rankid("0");
    rank->set_faulttype("0");
  }

  void push() {
    StartWrite(&msg_);
  }

  void end() {
    Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool) override {
    // nop
  }

  void OnDone() override {
    delete this;
  }

private:
  ::ProcessManageSignal msg_;
};

class push_service final : public ::Recover::CallbackService {
public:
  grpc::ServerWriteReactor<::ProcessManageSignal>*
  SubscribeProcessManageSignal(grpc::CallbackServerContext*,
                               const ::ClientInfo* who) override {
    auto* s = new push_stream(who->jobid());
    std::lock_guard<std::mutex> guard{mtx_};
    streams_.push_back(s);
    return s;
  }

  size_t open() {
    std::lock_guard<std::mutex> guard{mtx_};
    return streams_.size();
  }

  template <class F>
  void each(F f) {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto* s : streams_)
      f(*s);
  }

private:
  std::mutex mtx_;
  std::vector<push_stream*> streams_;
};

// A client of the fan-out floor on gRPC's callback API (as a light agent
// reads): stamps stopTrain.
class floor_reader final : public signal_reader {
public:
  floor_reader(::Recover::Stub& stub, const std::string& job,
               std::atomic<int64_t>& seen)
    : signal_reader(job), seen_(seen) {
    subscribe(stub);
  }

private:
  void on_signal(const ::ProcessManageSignal& sig) override {
    if (sig.signaltype() == "stopTrain")
      seen_ = now_ns();
  }

  std::atomic<int64_t>& seen_;
};

// A channel for agents' calls and streams, kept alive between storms.
std::unique_ptr<::Recover::Stub> agent_stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  return ::Recover::NewStub(grpc::CreateCustomChannel(
    address, grpc::InsecureChannelCredentials(), args));
}

// Milliseconds from the first push until every one of `jobs` clients has
// read its stopTrain; the clients read as the storm's agents do: a thread
// per stream, or (`light`) on the callback API over one channel.
double fan_out_floor_ms(size_t jobs, bool light) {
  push_service service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  auto address = "127.0.0.1:" + std::to_string(port);
  std::vector<std::atomic<int64_t>> seen(jobs);
  auto shared = agent_stub(address);
  std::vector<std::thread> readers;
  std::vector<std::unique_ptr<floor_reader>> reactors;
  std::vector<std::unique_ptr<grpc::ClientContext>> calls;
  for (size_t i = 0; i < jobs; ++i)
    calls.push_back(std::make_unique<grpc::ClientContext>());
  for (size_t i = 0; i < jobs; ++i) {
    if (light) {
      reactors.push_back(
        std::make_unique<floor_reader>(*shared, job_name(i), seen[i]));
      continue;
    }
    readers.emplace_back([&, i] {
      auto stub = agent_stub(address);
      ::ClientInfo who;
      who.set_jobid(job_name(i));
      auto stream = stub->SubscribeProcessManageSignal(calls[i].get(), who);
      ::ProcessManageSignal sig;
      while (stream->Read(&sig))
        if (sig.signaltype() == "stopTrain")
          seen[i] = now_ns();
    });
  }
  if (!wait_for([&] { return service.open() == jobs; }, 60s, 10ms))
    die("the fan-out floor's streams did not all open within 60 s");
  std::this_thread::sleep_for(200ms);
  auto t0 = now_ns();
  service.each([](push_stream& s) { s.push(); });
  if (!wait_for(
        [&] {
          return std::all_of(seen.begin(), seen.end(),
                             [](const auto& x) { return x.load() != 0; });
        },
        60s))
    die("the fan-out floor's clients did not all read within 60 s");
  int64_t last = 0;
  for (const auto& x : seen)
    last = std::max(last, x.load());
  service.each([](push_stream& s) { s.end(); });
  for (auto& t : readers)
    t.join();
  for (auto& r : reactors)
    r->await_done();
  server->Shutdown();
  return static_cast<double>(last - t0) / 1e6;
}

/// One storm's figures, in ms from the moment the call was sent.
struct storm {
  double returned = 0;
  double first_stopped = 0;
  double stopped_p50 = 0;
  double stopped_p90 = 0;
  double stopped_p99 = 0;
  double all_stopped = 0;
  double cpu_to_stopped = 0;
  long faults_to_stopped = 0;
  long switches_to_stopped = 0;
  double all_reported = 0;
  double all_idle = 0;
  double resident_mb = 0;
  /// The daemon's own, when it runs in a process of its own, and what its
  /// allocator holds for live allocations (-1: not jemalloc).
  double daemon_mb = 0;
  double daemon_allocated_mb = -1;
  std::map<std::string, size_t> outcomes;
};

} // namespace

int main(int argc, char** argv) {
  size_t jobs = 1000;
  size_t ranks = 16;
  size_t storms = 1;
  size_t worker_threads = 0;
  size_t setup_threads = 16;
  bool no_sync = false;
  bool hold_stop = false;
  bool light = false;
  bool own_process = false;
  double idle_s = 0;
  double report_wait_s = 0;
  CLI::App cli{"storm_bench: one ReportDeviceFaults faulting every job -> "
               "all stopped, all recovered"};
  cli.set_version_flag("--version", std::string{"storm_bench "} + RECOVERD_VERSION);
  cli.add_option("--jobs", jobs, "jobs, each with a subscribed process "
                                 "manager")
    ->capture_default_str();
  cli.add_option("--ranks", ranks, "ranks of every job (pods of 8 devices)")
    ->capture_default_str();
  cli.add_option("--storms", storms, "storms in a row (the median is the "
                                     "result)")
    ->capture_default_str();
  cli.add_option("--setup-threads", setup_threads, "client threads setting "
                                                   "the jobs up")
    ->capture_default_str();
  cli.add_flag("--sync-batch", no_sync,
               "journal --sync batch instead of always");
  cli.add_flag("--light-agents", light,
               "agents on gRPC's callback API over one channel instead of "
               "the agent library's process managers (a thread per stream)");
  cli.add_flag("--hold-stop", hold_stop,
               "agents answer stopTrain only once every agent has it (the "
               "daemon's stop fan-out without the agents' replies competing "
               "for the cores)");
  cli
    .add_option("--idle", idle_s,
                "seconds the daemon is left idle before each storm (storms "
                "in production hit a daemon that has been idle for long; "
                "back to back, each storm finds the last one's memory and "
                "connections warm)")
    ->check(CLI::Range(0.0, 3600.0))
    ->capture_default_str();
  cli.add_flag("--daemon-process", own_process,
               "the daemon in a child process of its own: its resident "
               "memory is reported apart from the agents' (CPU, page faults "
               "and context switches are the sum of both processes)");
  cli
    .add_option("--report-wait", report_wait_s,
                "seconds a flow waits for an agent's report (0: the "
                "daemon's default, 15 min); with --daemon-process, shows "
                "whether what the daemon holds depends on how long its "
                "waits last")
    ->check(CLI::Range(0.0, 3600.0))
    ->capture_default_str();
  cli
    .add_option("--worker-threads", worker_threads,
                "the daemon's actor worker threads (0: CAF's default, at "
                "least 4)")
    ->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  if (jobs == 0 || storms == 0 || ranks < devices_per_pod
      || ranks % devices_per_pod != 0) {
    std::fprintf(stderr, "storm_bench: need jobs >= 1, storms >= 1 and "
                         "ranks a multiple of 8\n");
    return 2;
  }
  auto dir = std::filesystem::temp_directory_path()
             / ("storm-bench-" + std::to_string(::getpid()));
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir.string();
  opts.worker_threads = worker_threads;
  opts.registry.max_jobs = std::max<size_t>(jobs, opts.registry.max_jobs);
  if (no_sync)
    opts.journal.sync = sync_policy::batch;
  opts.registry.job.waits = timeouts{};
  auto& w = opts.registry.job.waits;
  w.fault_flush = w.resource_release = w.hccl_convergence = w.restart_all
    = 0ms;
  w.keepalive = 60s;
  if (report_wait_s > 0) {
    w.report
      = std::chrono::milliseconds(static_cast<int64_t>(report_wait_s * 1000));
    w.notify = std::min(w.notify, w.report);
  }
  // The child is forked before this process starts any thread.
  std::unique_ptr<daemon_process> child;
  if (own_process)
    child = std::make_unique<daemon_process>(opts);
  configure_logging("error", "text");
  std::unique_ptr<app> in_process;
  if (!child) {
    auto daemon = app::start(opts);
    if (!daemon)
      die(message_of(daemon.error()));
    in_process = std::move(*daemon);
  }
  auto address = child ? child->address() : in_process->address();
  // What the daemon and the agents have used so far, in one process or two.
  auto used_now = [&child] {
    auto x = usage_now();
    if (child) {
      auto d = child->used();
      x.cpu_ms += d.cpu_ms;
      x.faults += d.faults;
      x.switches += d.switches;
    }
    return x;
  };
  auto platform = pb::Platform::NewStub(
    grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));

  std::printf("setting up %zu jobs of %zu ranks, each with %s ...\n", jobs,
              ranks,
              light ? "a light agent (agent stream on gRPC's callback API)"
                    : "a process manager (agent stream + 2 worker streams)");
  std::fflush(stdout);
  auto s0 = clock_type::now();
  std::vector<stamps> seen(jobs);
  gate stops;
  std::vector<std::unique_ptr<agent::process_manager>> managers(jobs);
  std::vector<std::unique_ptr<light_agent>> lights(jobs);
  auto agents = agent_stub(address);
  parallel_for(jobs, setup_threads, [&](size_t i) {
    auto id = job_name(i);
    put_job(*platform, id, ranks);
    if (light) {
      lights[i] = std::make_unique<light_agent>(*agents, id, seen[i]);
      lights[i]->start();
      return;
    }
    auto pm = std::make_unique<agent::process_manager>(
      address, id, std::vector<std::string>{"retry", "recover"});
    auto* x = &seen[i];
    // The notes come from the manager's threads as things happen: "got
    // stopTrain" on the stream thread before anything else is done with the
    // signal, "reported <strategy> status 0" once recoverd answered.
    pm->on_event([x](const std::string& line) {
      if (line.rfind("got stopTrain", 0) == 0)
        x->stopped = now_ns();
      else if (line.rfind("reported ", 0) == 0
               && line.find(" status 0") != std::string::npos)
        x->reported = now_ns();
    });
    if (hold_stop)
      pm->register_callbacks(agent::operation::stop,
                             [&stops](const agent::request&) {
                               stops.pass(60s);
                               return agent::outcome{};
                             });
    if (auto st = pm->start(); st.code() != 0)
      die("job " + id + ": start failed: " + st.info());
    managers[i] = std::move(pm);
  });
  if (!wait_for(
        [&] {
          auto xs = list_jobs(*platform);
          return std::count_if(xs.begin(), xs.end(),
                               [](const auto& x) { return x.subscribed(); })
                 == static_cast<long>(jobs);
        },
        60s, 50ms))
    die("not every agent subscribed within 60 s");
  std::this_thread::sleep_for(500ms); // let the worker streams attach too
  std::printf("set up in %.1f s\n",
              std::chrono::duration<double>(clock_type::now() - s0).count());
  std::fflush(stdout);

  auto faulty = snapshot_of(jobs, true);
  auto healthy = snapshot_of(jobs, false);
  std::vector<storm> results;
  for (size_t round = 0; round < storms; ++round) {
    for (auto& x : seen) {
      x.stopped = 0;
      x.reported = 0;
    }
    storm r;
    if (idle_s > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
    if (hold_stop) {
      stops.close();
      for (auto& x : lights)
        if (x)
          x->hold();
    }
    auto ms_since = [](int64_t t0, int64_t t) {
      return static_cast<double>(t - t0) / 1e6;
    };
    auto used0 = used_now();
    auto t0 = now_ns();
    report_device_faults(*platform, faulty);
    r.returned = ms_since(t0, now_ns());
    auto all = [&](auto field) {
      return [&seen, field] {
        return std::all_of(seen.begin(), seen.end(), [field](const stamps& x) {
          return (x.*field).load() != 0;
        });
      };
    };
    if (!wait_for(all(&stamps::stopped), 60s))
      die("not every agent got stopTrain within 60 s");
    auto used1 = used_now();
    r.cpu_to_stopped = used1.cpu_ms - used0.cpu_ms;
    r.faults_to_stopped = used1.faults - used0.faults;
    r.switches_to_stopped = used1.switches - used0.switches;
    stops.open();
    for (auto& x : lights)
      if (x)
        x->release();
    std::vector<double> stopped;
    for (const auto& x : seen)
      stopped.push_back(ms_since(t0, x.stopped.load()));
    r.first_stopped = percentile(stopped, 0);
    r.stopped_p50 = percentile(stopped, 0.5);
    r.stopped_p90 = percentile(stopped, 0.9);
    r.stopped_p99 = percentile(stopped, 0.99);
    r.all_stopped = percentile(stopped, 1);
    if (!wait_for(all(&stamps::reported), 120s))
      die("not every agent's status report was answered within 120 s");
    int64_t last = 0;
    for (const auto& x : seen)
      last = std::max(last, x.reported.load());
    r.all_reported = ms_since(t0, last);
    // Polled only now, so that the polling does not slow the storm.
    if (!wait_for(
          [&] {
            auto xs = list_jobs(*platform);
            return std::all_of(xs.begin(), xs.end(), [](const auto& x) {
              return x.recoverystate() == "INIT";
            });
          },
          60s, 1ms))
      die("not every job was back in INIT within 60 s");
    r.all_idle = ms_since(t0, now_ns());
    r.resident_mb = static_cast<double>(std::max(0L, rss_kib())) * 1024 / 1e6;
    if (child) {
      r.daemon_mb
        = static_cast<double>(std::max(0L, child->rss())) * 1024 / 1e6;
      if (auto bytes = child->allocated(); bytes >= 0)
        r.daemon_allocated_mb = static_cast<double>(bytes) / 1e6;
    }
    for (size_t i = 0; i < jobs; ++i) {
      pb::JobRef ref;
      ref.set_jobid(job_name(i));
      pb::JobStatus st;
      grpc::ClientContext c;
      if (!platform->GetJob(&c, ref, &st).ok())
        die("GetJob failed");
      ++r.outcomes[st.lastoutcome().empty() ? "(none)" : st.lastoutcome()];
    }
    char resident[128];
    if (child)
      std::snprintf(resident, sizeof resident,
                    "the daemon %.0f MB (%.0f MB allocated), the agents %.0f "
                    "MB",
                    r.daemon_mb, r.daemon_allocated_mb, r.resident_mb);
    else
      std::snprintf(resident, sizeof resident, "%.0f MB (daemon and agents)",
                    r.resident_mb);
    std::string outcomes;
    for (const auto& [name, n] : r.outcomes)
      outcomes += (outcomes.empty() ? "" : ", ") + name + " x"
                  + std::to_string(n);
    std::printf("storm %zu%s%s: ReportDeviceFaults for %zu jobs returned after "
                "%.1f ms; stopTrain at the agents: first %.1f ms, p50 %.1f "
                "ms, p90 %.1f ms, p99 %.1f ms, all %.1f ms (design target <= "
                "100 ms), CPU used by then "
                "%.0f ms (daemon and agents, %u cores; %ld page faults, %ld "
                "context switches); every status "
                "report answered %.1f ms; every job back in INIT %.1f ms "
                "(outcomes: %s); resident %s\n",
                round + 1, hold_stop ? " (stops held)" : "",
                idle_s > 0 ? " (after idling)" : "", jobs, r.returned,
                r.first_stopped, r.stopped_p50, r.stopped_p90, r.stopped_p99,
                r.all_stopped, r.cpu_to_stopped,
                std::thread::hardware_concurrency(), r.faults_to_stopped,
                r.switches_to_stopped, r.all_reported, r.all_idle,
                outcomes.c_str(), resident);
    std::fflush(stdout);
    if (r.outcomes.size() != 1 || r.outcomes.count("(none)") > 0)
      die("not every job ended its flow the same way: " + outcomes);
    results.push_back(std::move(r));
    // Clear the faults: a fault that persists is raised only once.
    report_device_faults(*platform, healthy);
    std::this_thread::sleep_for(200ms);
  }
  auto median = [&](double storm::*field) {
    std::vector<double> xs;
    for (const auto& r : results)
      xs.push_back(r.*field);
    return percentile(xs, 0.5);
  };
  auto stopped = median(&storm::all_stopped);
  // Memory that keeps growing from storm to storm is a leak or an allocator
  // that does not reuse what it keeps: either shows here.
  std::printf("resident memory%s after storm 1: %.0f MB; after storm %zu: "
              "%.0f MB\n",
              child ? " of the agents' process" : "",
              results.front().resident_mb, results.size(),
              results.back().resident_mb);
  if (child)
    std::printf("resident memory of the daemon's process after storm 1: "
                "%.0f MB (%.0f MB allocated); after storm %zu: %.0f MB (%.0f "
                "MB allocated)\n",
                results.front().daemon_mb, results.front().daemon_allocated_mb,
                results.size(), results.back().daemon_mb,
                results.back().daemon_allocated_mb);
  // A soak: storm after storm, the daemon's live heap must level off. It
  // rises and falls by 15-20 MB over a few storms (RocksDB's memtables fill
  // and are flushed), so the highest of the later half is set against the
  // highest of the earlier half: a leak of a kilobyte per job and storm
  // would add a megabyte per storm on 1,000 jobs.
  if (child && results.size() >= 4) {
    bool heap = results.front().daemon_allocated_mb >= 0;
    auto highest = [&](size_t from, size_t to) {
      double x = 0;
      for (size_t i = from; i < to; ++i)
        x = std::max(x, heap ? results[i].daemon_allocated_mb
                             : results[i].daemon_mb);
      return x;
    };
    auto half = results.size() / 2;
    auto early = highest(0, half);
    auto late = highest(half, results.size());
    std::printf("RESULT\tSoak: %zu fault storms back to back on %zu jobs, "
                "the daemon's %s, highest after storms %zu-%zu\t%.0f MB\t"
                "%.0f MB (storms 1-%zu)\t%.2f\tlevels off (about 1)\n",
                results.size(), jobs,
                heap ? "live heap (jemalloc allocated)" : "resident memory",
                half + 1, results.size(), late, early, half, late / early);
  }
  auto idle = median(&storm::all_idle);
  // Baseline: a stop is at least one message to each agent, a recovery at
  // least the agents' 3 reports and 3 signals: the same number of unary
  // round trips to a trivial server, from up to 64 threads.
  auto concurrency = std::min<size_t>(jobs, 64);
  // After idling, so is the baseline: coming back from idle costs a trivial
  // server too, and the ratio should not charge that to the daemon alone.
  if (idle_s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
  auto stop_base = echo_seconds(jobs, concurrency) * 1000;
  auto cycle_base = echo_seconds(jobs * 4, concurrency) * 1000;
  auto floor_ms = fan_out_floor_ms(jobs, light);
  std::printf("baseline%s: %zu unary round trips to a trivial gRPC server (%zu "
              "threads) %.1f ms; %zu (4 per job, as a recovery cycle's 4 "
              "RPCs) %.1f ms; a trivial server pushing stopTrain on %zu open "
              "streams until every client has read it (the fan-out's floor "
              "here) %.1f ms\n",
              idle_s > 0 ? " (the round trips after idling as long)" : "", jobs,
              concurrency, stop_base, jobs * 4, cycle_base, jobs, floor_ms);
  std::printf("ratio all stopped / %zu round trips: %.1f; all recovered / "
              "%zu round trips: %.1f; all stopped vs the 100 ms target: %.1fx\n",
              jobs, stopped / stop_base, jobs * 4, idle / cycle_base,
              stopped / 100);
  // Machine-readable lines for scripts/bench.sh (BENCHMARKS.md).
  std::string agents_are;
  if (light)
    agents_are = " (light agents: callback API, one channel";
  if (hold_stop)
    agents_are += light ? "; answers held until all have it)"
                        : " (agents answer once all have it: the daemon's "
                          "fan-out alone)";
  else if (light)
    agents_are += ")";
  std::string idle_note;
  if (idle_s > 0) {
    char idle_text[64];
    std::snprintf(idle_text, sizeof idle_text, "each storm after %g s idle",
                  idle_s);
    idle_note = idle_text;
    agents_are += ", " + idle_note;
  }
  std::printf("RESULT\tFault storm: one ReportDeviceFaults faulting %zu "
              "subscribed jobs -> every agent has stopTrain%s\t%.0f ms\t%.0f "
              "ms (%zu unary round trips to a trivial gRPC server; a trivial "
              "server pushing to as many open streams: %.0f ms)\t%.1f\t"
              "<= 100 ms\n",
              jobs, agents_are.c_str(), stopped, stop_base, jobs, floor_ms,
              stopped / stop_base);
  std::string recovered_note = light ? "light agents" : "";
  if (!idle_note.empty())
    recovered_note += (light ? ", " : "") + idle_note;
  if (!recovered_note.empty())
    recovered_note = " (" + recovered_note + ")";
  // With the stops held the cycle includes the hold: not comparable.
  if (!hold_stop)
    std::printf("RESULT\tFault storm: ... -> every job recovered (back in "
                "INIT, outcome recorded)%s\t%.0f ms\t%.0f ms (%zu unary "
                "round trips to a trivial gRPC server)\t%.1f\t(compared, no "
                "target)\n",
                recovered_note.c_str(), idle, cycle_base, jobs * 4,
                idle / cycle_base);
  std::fflush(stdout);
  managers.clear();
  for (auto& x : lights)
    if (x)
      x->stop();
  lights.clear();
  agents.reset();
  if (in_process)
    in_process->stop();
  child.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
