// memory_bench: what an idle job costs in memory with its agent connected
// (design §7: <= 50 KB resident per idle job at 10,000 jobs, agents
// initialised, registered and subscribed).
//
// The daemon runs in a child process (its memory is not the client's), with
// its default configuration on an empty data directory. The parent puts the
// jobs (16 ranks each) through Platform.PutJob, calls Init and Register for
// each, and opens every job's SubscribeProcessManageSignal stream; the
// streams are callback reactors spread over several channels (one TCP
// connection each), so 10,000 streams need no thread each. Resident memory
// (VmRSS) of the daemon is read when it has started (empty: the baseline),
// at half of the jobs and at all of them, each time once ListJobs shows
// every stream open and the keep-alives have run for a while. Reported: the
// growth per job net of the empty daemon, and the slope between half and
// all of the jobs (the cost of one more job, free of one-off costs).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "platform.grpc.pb.h"
#include "recover.grpc.pb.h"
#include "services/app.hpp"
#include "tools/bench/daemon_process.hpp"

using namespace recoverd;
namespace pb = recoverd::platform::v1;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "memory_bench: %s\n", what.c_str());
  std::exit(1);
}

// -- the agents -----------------------------------------------------------------

/// One job's open SubscribeProcessManageSignal stream, reading every signal
/// (keep-alives included) on gRPC's threads.
class subscription final
  : public grpc::ClientReadReactor<::ProcessManageSignal> {
public:
  subscription(::Recover::Stub& stub, const std::string& job_id) {
    who_.set_jobid(job_id);
    who_.set_role("agent");
    stub.async()->SubscribeProcessManageSignal(&ctx_, &who_, this);
    StartRead(&sig_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (ok)
      StartRead(&sig_);
  }

  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> guard{mtx_};
    done_ = true;
    cv_.notify_all();
  }

  /// Ends the stream and waits until gRPC is done with it.
  void close() {
    ctx_.TryCancel();
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [this] { return done_; });
  }

private:
  grpc::ClientContext ctx_;
  ::ClientInfo who_;
  ::ProcessManageSignal sig_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool done_ = false;
};

std::shared_ptr<grpc::Channel> own_channel(const std::string& address) {
  grpc::ChannelArguments args;
  // A connection of its own (channels to one address share one otherwise).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

void put_job(pb::Platform::Stub& platform, const std::string& id) {
  pb::PutJobRequest req;
  auto* spec = req.mutable_spec();
  spec->set_jobid(id);
  spec->set_name("train-" + id);
  spec->set_namespace_("bench");
  spec->set_processrecoverenable(true);
  spec->add_recoverstrategies("retry");
  spec->add_recoverstrategies("recover");
  spec->add_recoverstrategies("dump");
  for (int p = 0; p < 2; ++p) {
    auto* pod = spec->add_pods();
    pod->set_podrank(p);
    pod->set_uid(id + "-3f2a9c1e-" + std::to_string(p));
    pod->set_nodename("node-" + std::to_string(p));
    pod->set_running(true);
    for (int d = 0; d < 8; ++d) {
      auto* dev = pod->add_devices();
      dev->set_deviceid(std::to_string(d));
      dev->set_rankid(std::to_string(p * 8 + d));
    }
  }
  pb::PutJobResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 30s);
  if (auto st = platform.PutJob(&c, req, &resp); !st.ok())
    die("PutJob " + id + " failed: " + st.error_message());
}

void init_and_register(::Recover::Stub& stub, const std::string& id) {
  ::ClientInfo who;
  who.set_jobid(id);
  who.set_role("agent");
  for (int call = 0; call < 2; ++call) {
    ::Status resp;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 30s);
    auto st = call == 0 ? stub.Init(&c, who, &resp)
                        : stub.Register(&c, who, &resp);
    if (!st.ok() || resp.code() != 0)
      die((call == 0 ? "Init " : "Register ") + id + " failed: "
          + (st.ok() ? resp.info() : st.error_message()));
  }
}

size_t subscribed(pb::Platform::Stub& platform) {
  pb::ListJobsRequest req;
  pb::ListJobsResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 60s);
  if (auto st = platform.ListJobs(&c, req, &resp); !st.ok())
    die("ListJobs failed: " + st.error_message());
  return static_cast<size_t>(
    std::count_if(resp.jobs().begin(), resp.jobs().end(),
                  [](const auto& x) { return x.subscribed(); }));
}

} // namespace

int main(int argc, char** argv) {
  size_t jobs = 10'000;
  size_t channels = 16;
  size_t threads = 32;
  double settle_s = 6;
  CLI::App cli{"memory_bench: resident memory per idle job with its agent "
               "initialised, registered and subscribed"};
  cli.set_version_flag("--version", std::string{"memory_bench "} + RECOVERD_VERSION);
  cli.add_option("--jobs", jobs, "jobs (16 ranks each)")->capture_default_str();
  cli.add_option("--channels", channels,
                 "client channels (TCP connections) the streams share")
    ->capture_default_str();
  cli.add_option("--threads", threads, "client threads for the unary calls")
    ->capture_default_str();
  cli.add_option("--settle", settle_s,
                 "seconds to wait with every stream open before reading the "
                 "memory (the default covers a keep-alive period)")
    ->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  if (jobs < 2 || channels == 0 || threads == 0) {
    std::fprintf(stderr, "memory_bench: need jobs >= 2, channels and threads "
                         ">= 1\n");
    return 2;
  }
  auto dir = fs::temp_directory_path()
             / ("memory-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir.string();
  opts.registry.max_jobs = std::max(jobs, opts.registry.max_jobs);
  // Forked before this process starts any thread.
  bench::daemon_process daemon{opts};
  std::this_thread::sleep_for(1s);
  auto empty = daemon.rss();
  std::printf("daemon started on an empty data directory: VmRSS %ld KiB\n",
              empty);
  std::fflush(stdout);

  std::vector<std::shared_ptr<grpc::Channel>> chans;
  std::vector<std::unique_ptr<::Recover::Stub>> recover;
  std::vector<std::unique_ptr<pb::Platform::Stub>> platform;
  for (size_t c = 0; c < channels; ++c) {
    chans.push_back(own_channel(daemon.address()));
    recover.push_back(::Recover::NewStub(chans.back()));
    platform.push_back(pb::Platform::NewStub(chans.back()));
  }
  std::vector<std::unique_ptr<subscription>> streams(jobs);
  struct stage {
    size_t jobs = 0;
    long rss = 0;
  };
  std::vector<stage> stages;
  size_t done = 0;
  for (auto upto : {jobs / 2, jobs}) {
    auto t0 = clock_type::now();
    std::atomic<size_t> next{done};
    std::vector<std::thread> ts;
    for (size_t t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (auto i = next++; i < upto; i = next++) {
          auto id = "mem-" + std::to_string(i);
          auto c = i % channels;
          put_job(*platform[c], id);
          init_and_register(*recover[c], id);
          streams[i] = std::make_unique<subscription>(*recover[c], id);
        }
      });
    for (auto& t : ts)
      t.join();
    auto deadline = clock_type::now() + 120s;
    while (subscribed(*platform[0]) < upto) {
      if (clock_type::now() > deadline)
        die("not every stream opened within 120 s");
      std::this_thread::sleep_for(200ms);
    }
    auto setup_s = std::chrono::duration<double>(clock_type::now() - t0);
    std::this_thread::sleep_for(
      std::chrono::duration<double>(settle_s));
    auto rss = daemon.rss();
    std::printf("%zu jobs put, initialised, registered and subscribed (%.1f "
                "s for %zu more): VmRSS %ld KiB\n",
                upto, setup_s.count(), upto - done, rss);
    std::fflush(stdout);
    stages.push_back({upto, rss});
    done = upto;
  }
  auto per_job = [](long kib, size_t n) {
    return static_cast<double>(kib) / static_cast<double>(n);
  };
  auto net = per_job(stages[1].rss - empty, stages[1].jobs);
  auto slope = per_job(stages[1].rss - stages[0].rss,
                       stages[1].jobs - stages[0].jobs);
  std::printf("resident memory per job at %zu jobs with agents initialised, "
              "registered and subscribed: %.1f KiB net of the empty daemon "
              "(%ld KiB); %.1f KiB per job from %zu to %zu jobs (design "
              "target <= 50 KB = 48.8 KiB)\n",
              jobs, net, empty, slope, stages[0].jobs, stages[1].jobs);
  // Machine-readable line for scripts/bench.sh (BENCHMARKS.md).
  std::printf("RESULT\tMemory: resident per idle job at %zu jobs, agents "
              "initialised, registered and subscribed (streams open)\t%.1f "
              "KiB (net of the empty daemon; %.1f KiB per job from %zu to "
              "%zu)\t%ld KiB (the empty daemon)\t-\t<= 50 KB\n",
              jobs, net, slope, stages[0].jobs, stages[1].jobs, empty);
  std::fflush(stdout);
  for (auto& s : streams)
    if (s)
      s->close();
  streams.clear();
  daemon.stop();
  fs::remove_all(dir);
  return 0;
}
