#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/ostream_sink.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "actors/model/job_model.hpp"
#include "fixtures/service_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "platform.grpc.pb.h"
#include "recover.grpc.pb.h"
#include "services/app.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;
namespace pb = recoverd::platform::v1;
using namespace std::chrono_literals;
using recoverd::test::service_fixture;
using recoverd::test::spec_of;
using recoverd::test::start_app;

TEST_CASE_FIXTURE(service_fixture, "Platform: put, get, list and delete") {
  pb::PutJobResponse resp;
  REQUIRE(put(spec_of("j1"), &resp).ok());
  CHECK(resp.created());
  CHECK(resp.job().spec().pods_size() == 2);
  CHECK(resp.job().lastseq() == 1);
  REQUIRE(put(spec_of("j1"), &resp).ok());
  CHECK_FALSE(resp.created());
  REQUIRE(put(spec_of("j0"), &resp).ok());
  auto status = get("j1");
  CHECK(status.spec().name() == "name-j1");
  CHECK(status.recoverystate() == "INIT");
  CHECK(status.healthstate() == "Healthy");
  pb::ListJobsRequest lreq;
  pb::ListJobsResponse list;
  auto c = ctx();
  REQUIRE(platform->ListJobs(c.get(), lreq, &list).ok());
  REQUIRE(list.jobs_size() == 2);
  CHECK(list.jobs(0).jobid() == "j0");
  CHECK(list.jobs(1).ranks() == 4);
  lreq.set_namespace_("other");
  c = ctx();
  REQUIRE(platform->ListJobs(c.get(), lreq, &list).ok());
  CHECK(list.jobs_size() == 0);
  pb::JobRef ref;
  ref.set_jobid("j1");
  pb::DeleteJobResponse del;
  c = ctx();
  REQUIRE(platform->DeleteJob(c.get(), ref, &del).ok());
  CHECK(del.lastseq() == 3);
  pb::JobStatus gone;
  c = ctx();
  auto st = platform->GetJob(c.get(), ref, &gone);
  CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
  c = ctx();
  st = platform->DeleteJob(c.get(), ref, &del);
  CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE_FIXTURE(service_fixture, "Platform: bad input gets a clear error "
                                   "and changes nothing") {
  pb::PutJobRequest empty;
  pb::PutJobResponse resp;
  auto c = ctx();
  auto st = platform->PutJob(c.get(), empty, &resp);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("spec") != std::string::npos);
  auto spec = spec_of("");
  st = put(spec);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().rfind("jobId:", 0) == 0);
  spec = spec_of("bad");
  spec.mutable_pods(1)->mutable_devices(0)->set_rankid("0");
  st = put(spec);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("pods[1].devices[0].rankId") != std::string::npos);
  spec = spec_of("bad");
  spec.add_recoverstrategies("teleport");
  st = put(spec);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("teleport") != std::string::npos);
  spec = spec_of("bad");
  spec.set_gracefulfaulttolerance(true);
  st = put(spec);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("gracefulFaultTolerance") != std::string::npos);
  pb::JobRef ref;
  pb::JobStatus status;
  c = ctx();
  st = platform->GetJob(c.get(), ref, &status);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  ref.set_jobid("bad");
  c = ctx();
  st = platform->GetJob(c.get(), ref, &status);
  CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE_FIXTURE(service_fixture, "Platform: annotations set, get and "
                                   "watched") {
  REQUIRE(put(spec_of("j")).ok());
  pb::JobRef ref;
  ref.set_jobid("j");
  grpc::ClientContext watch_ctx;
  auto watch = platform->WatchAnnotations(&watch_ctx, ref);
  pb::Annotations first;
  REQUIRE(watch->Read(&first));
  CHECK(first.jobid() == "j");
  CHECK(first.annotations().empty());
  pb::SetAnnotationsRequest set;
  set.set_jobid("j");
  (*set.mutable_set())["ProcessRecoverStrategy"] = "recover";
  (*set.mutable_set())["x"] = "1";
  pb::Annotations out;
  auto c = ctx();
  REQUIRE(platform->SetAnnotations(c.get(), set, &out).ok());
  CHECK(out.annotations().at("x") == "1");
  pb::Annotations change;
  REQUIRE(watch->Read(&change));
  CHECK(change.annotations().at("ProcessRecoverStrategy") == "recover");
  MESSAGE("remove one key, and refuse a key both set and removed");
  pb::SetAnnotationsRequest rm;
  rm.set_jobid("j");
  rm.add_remove("x");
  c = ctx();
  REQUIRE(platform->SetAnnotations(c.get(), rm, &out).ok());
  CHECK(out.annotations().count("x") == 0);
  REQUIRE(watch->Read(&change));
  CHECK(change.annotations().count("x") == 0);
  (*rm.mutable_set())["x"] = "2";
  c = ctx();
  auto st = platform->SetAnnotations(c.get(), rm, &out);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  c = ctx();
  REQUIRE(platform->GetAnnotations(c.get(), ref, &out).ok());
  CHECK(out.annotations().size() == 1);
  MESSAGE("Register shows in the watch as the process-recover label");
  CHECK(init("j").code() == 0);
  CHECK(reg("j").code() == 0);
  REQUIRE(watch->Read(&change));
  CHECK(change.processrecoverlabel() == "on");
  MESSAGE("deleting the job ends the watch with OK");
  pb::DeleteJobResponse del;
  c = ctx();
  REQUIRE(platform->DeleteJob(c.get(), ref, &del).ok());
  CHECK_FALSE(watch->Read(&change));
  CHECK(watch->Finish().ok());
  grpc::ClientContext unknown_ctx;
  auto unknown = platform->WatchAnnotations(&unknown_ctx, ref);
  CHECK_FALSE(unknown->Read(&change));
  CHECK(unknown->Finish().error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE_FIXTURE(service_fixture, "Platform: SetAnnotations with an "
                                   "expected sequence number cannot "
                                   "overwrite a change it did not see") {
  REQUIRE(put(spec_of("j")).ok());
  pb::JobRef ref;
  ref.set_jobid("j");
  pb::Annotations read;
  auto c = ctx();
  REQUIRE(platform->GetAnnotations(c.get(), ref, &read).ok());
  auto seen = read.seq();
  REQUIRE(seen > 0);
  MESSAGE("writer A changes the job first");
  pb::SetAnnotationsRequest a;
  a.set_jobid("j");
  (*a.mutable_set())["ProcessRecoverStrategy"] = "recover";
  a.set_expectedseq(seen);
  pb::Annotations out;
  c = ctx();
  REQUIRE(platform->SetAnnotations(c.get(), a, &out).ok());
  CHECK(out.seq() > seen);
  MESSAGE("writer B, who read the same version, is refused: ABORTED");
  pb::SetAnnotationsRequest b;
  b.set_jobid("j");
  (*b.mutable_set())["ProcessRecoverStrategy"] = "dump";
  b.set_expectedseq(seen);
  c = ctx();
  auto st = platform->SetAnnotations(c.get(), b, &out);
  CHECK(st.error_code() == grpc::StatusCode::ABORTED);
  CHECK(st.error_message().find("sequence number") != std::string::npos);
  c = ctx();
  REQUIRE(platform->GetAnnotations(c.get(), ref, &read).ok());
  CHECK(read.annotations().at("ProcessRecoverStrategy") == "recover");
  MESSAGE("B reads again and writes with the new number");
  b.set_expectedseq(read.seq());
  c = ctx();
  REQUIRE(platform->SetAnnotations(c.get(), b, &out).ok());
  CHECK(out.annotations().at("ProcessRecoverStrategy") == "dump");
  MESSAGE("0: unconditional, as before");
  b.set_expectedseq(0);
  (*b.mutable_set())["ProcessRecoverStrategy"] = "retry";
  c = ctx();
  CHECK(platform->SetAnnotations(c.get(), b, &out).ok());
}

TEST_CASE_FIXTURE(service_fixture, "Platform: device faults per job") {
  REQUIRE(put(spec_of("j")).ok());
  pb::ReportDeviceFaultsRequest req;
  auto* ok = req.add_jobs();
  ok->set_jobid("j");
  ok->set_healthstate("UnHealthy");
  auto* f = ok->add_faults();
  f->set_nodename("node-1");
  f->set_deviceid("0");
  f->add_faultcodes("80E01801");
  auto* unknown = req.add_jobs();
  unknown->set_jobid("ghost");
  unknown->set_healthstate("Healthy");
  auto* bad = req.add_jobs();
  bad->set_jobid("j");
  bad->set_healthstate("Sleepy");
  auto* empty = req.add_jobs();
  empty->set_healthstate("Healthy");
  pb::ReportDeviceFaultsResponse resp;
  auto c = ctx();
  REQUIRE(platform->ReportDeviceFaults(c.get(), req, &resp).ok());
  REQUIRE(resp.results_size() == 4);
  CHECK(resp.results(0).accepted());
  CHECK_FALSE(resp.results(1).accepted());
  CHECK(resp.results(1).error().find("not known") != std::string::npos);
  CHECK_FALSE(resp.results(2).accepted());
  CHECK(resp.results(2).error().find("healthState") != std::string::npos);
  CHECK_FALSE(resp.results(3).accepted());
  auto status = get("j");
  CHECK(status.healthstate() == "UnHealthy");
  REQUIRE(status.devicefaults_size() == 1);
  CHECK(status.devicefaults(0).nodename() == "node-1");
}

namespace {

// A snapshot of `n` faults of job `id`, spread over its devices (pods of
// `devices` devices, one pod per node, as spec_of lays them out).
pb::ReportDeviceFaultsRequest
device_snapshot(const std::string& id, size_t n, int pods, int devices) {
  pb::ReportDeviceFaultsRequest req;
  auto* job = req.add_jobs();
  job->set_jobid(id);
  job->set_healthstate("UnHealthy");
  for (size_t i = 0; i < n; ++i) {
    auto slot = static_cast<int>(i % static_cast<size_t>(pods * devices));
    auto* f = job->add_faults();
    f->set_nodename("node-" + std::to_string(slot / devices));
    f->set_deviceid(std::to_string(slot % devices));
    f->add_faultcodes("81078603");
  }
  return req;
}

} // namespace

TEST_CASE_FIXTURE(service_fixture, "Platform: ReportDeviceFaults is capped "
                                   "at max_device_faults_per_request entries "
                                   "and linear below it") {
  constexpr int pods = 4096;
  constexpr int devices = 16; // 65,536 ranks
  REQUIRE(put(spec_of("big", pods, devices)).ok());
  REQUIRE(init("big").code() == 0);
  REQUIRE(reg("big").code() == 0);
  auto seq = get("big").lastseq();
  MESSAGE("100,000 entries: refused as a whole, nothing recorded");
  {
    auto req = device_snapshot("big", 100000, pods, devices);
    pb::ReportDeviceFaultsResponse resp;
    auto c = ctx(60s);
    auto started = std::chrono::steady_clock::now();
    auto st = platform->ReportDeviceFaults(c.get(), req, &resp);
    auto took = std::chrono::steady_clock::now() - started;
    MESSAGE("100,000 entries refused after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took)
                 .count()
            << " ms");
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("100000") != std::string::npos);
    CHECK(st.error_message().find(std::to_string(
            max_device_faults_per_request))
          != std::string::npos);
    auto status = get("big");
    CHECK(status.lastseq() == seq);
    CHECK(status.healthstate() == "Healthy");
    CHECK(status.devicefaults_size() == 0);
  }
  MESSAGE("exactly the cap: recorded, one fault per device");
  {
    auto req = device_snapshot("big", max_device_faults_per_request, pods,
                               devices);
    pb::ReportDeviceFaultsResponse resp;
    auto c = ctx(120s);
    auto started = std::chrono::steady_clock::now();
    auto st = platform->ReportDeviceFaults(c.get(), req, &resp);
    auto took = std::chrono::steady_clock::now() - started;
    MESSAGE(max_device_faults_per_request
            << " entries handled in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took)
                 .count()
            << " ms");
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    REQUIRE(resp.results_size() == 1);
    CHECK_MESSAGE(resp.results(0).accepted(), resp.results(0).error());
    auto status = get("big");
    CHECK(status.healthstate() == "UnHealthy");
    CHECK(status.devicefaults_size()
          == static_cast<int>(max_device_faults_per_request));
  }
}

TEST_CASE_FIXTURE(service_fixture, "Recover: Init, Register and HealthCheck "
                                   "codes") {
  auto st = init("ghost");
  CHECK(st.code() == 502);
  CHECK(reg("ghost").code() == 408);
  auto spec = spec_of("off");
  spec.set_processrecoverenable(false);
  REQUIRE(put(spec).ok());
  auto off = init("off");
  CHECK(off.code() == 403);
  CHECK(off.info().find("process-recover-enable") != std::string::npos);
  REQUIRE(put(spec_of("j")).ok());
  CHECK(reg("j").code() == 408);
  auto ok = init("j");
  CHECK(ok.code() == 0);
  CHECK(ok.info() == "job(uid=j) init success");
  CHECK(init("j").code() == 0);
  auto r = reg("j");
  CHECK(r.code() == 0);
  CHECK(r.info() == "register success");
  CHECK(reg("j").code() == 0);
  CHECK(get("j").registered());
  auto health = call(&::Recover::Stub::HealthCheck, "anything");
  CHECK(health.code() == 0);
  CHECK(health.info() == "jobId=anything, receive HeathCheck");
  MESSAGE("an empty job id is refused outright");
  ::ClientInfo empty;
  ::Status resp;
  auto c = ctx();
  auto gst = recover->Init(c.get(), empty, &resp);
  CHECK(gst.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  c = ctx();
  gst = recover->Register(c.get(), empty, &resp);
  CHECK(gst.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  ::StressTestParam stress;
  c = ctx();
  gst = recover->StressTest(c.get(), stress, &resp);
  CHECK(gst.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE_FIXTURE(service_fixture, "Recover: subscribe gets keep-alives; a "
                                   "new subscriber takes over") {
  REQUIRE(put(spec_of("j")).ok());
  ::ClientInfo who;
  who.set_jobid("j");
  who.set_role("agent");
  {
    grpc::ClientContext c;
    auto s = recover->SubscribeProcessManageSignal(&c, who);
    ::ProcessManageSignal sig;
    CHECK_FALSE(s->Read(&sig));
    auto st = s->Finish();
    CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(st.error_message() == "jobId=j not registed");
  }
  REQUIRE(init("j").code() == 0);
  REQUIRE(reg("j").code() == 0);
  grpc::ClientContext a_ctx;
  a_ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto a = recover->SubscribeProcessManageSignal(&a_ctx, who);
  ::ProcessManageSignal sig;
  REQUIRE(a->Read(&sig));
  CHECK(sig.signaltype() == "keep-alive");
  CHECK(sig.jobid() == "j");
  CHECK(sig.uuid().empty());
  REQUIRE(a->Read(&sig));
  CHECK(sig.signaltype() == "keep-alive");
  CHECK(get("j").subscribed());
  grpc::ClientContext b_ctx;
  b_ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto b = recover->SubscribeProcessManageSignal(&b_ctx, who);
  REQUIRE(b->Read(&sig));
  CHECK(sig.signaltype() == "keep-alive");
  MESSAGE("the first stream has ended with OK");
  while (a->Read(&sig)) {
    // drain what was queued before the take-over
  }
  CHECK(a->Finish().ok());
  auto status = get("j");
  CHECK(status.subscribed());
  CHECK(status.registered());
  CHECK(status.recoverystate() == "INIT");
  b_ctx.TryCancel();
  b->Finish();
}

TEST_CASE("Recover: a client that pings every 3 s keeps its stream") {
  service_fixture fx{60s};
  REQUIRE(fx.put(spec_of("j")).ok());
  REQUIRE(fx.init("j").code() == 0);
  REQUIRE(fx.reg("j").code() == 0);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Without this the client itself holds back pings for 5 minutes.
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 3000);
  auto channel = grpc::CreateCustomChannel(
    fx.daemon->address(), grpc::InsecureChannelCredentials(), args);
  auto stub = ::Recover::NewStub(channel);
  ::ClientInfo who;
  who.set_jobid("j");
  grpc::ClientContext c;
  auto s = stub->SubscribeProcessManageSignal(&c, who);
  MESSAGE("idle stream for 11 s while the client pings every 3 s");
  std::this_thread::sleep_for(11s);
  // A server that refused the pings would have sent GOAWAY and the stream
  // would have ended; the job would then show no subscriber.
  CHECK(fx.get("j").subscribed());
  CHECK(channel->GetState(false) == GRPC_CHANNEL_READY);
  c.TryCancel();
  ::ProcessManageSignal sig;
  while (s->Read(&sig)) {
  }
  CHECK(s->Finish().error_code() == grpc::StatusCode::CANCELLED);
}

TEST_CASE_FIXTURE(service_fixture, "a storage failure makes state changes "
                                   "UNAVAILABLE and says why") {
  REQUIRE(put(spec_of("j")).ok());
  daemon->log().inject_write_failure("No space left on device");
  auto st = put(spec_of("k"));
  CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(st.error_message().find("No space left on device")
        != std::string::npos);
  ::ClientInfo who;
  who.set_jobid("j");
  ::Status resp;
  auto c = ctx();
  auto gst = recover->Init(c.get(), who, &resp);
  CHECK(gst.error_code() == grpc::StatusCode::UNAVAILABLE);
  MESSAGE("reads still work and show the state before the failure");
  auto status = get("j");
  CHECK_FALSE(status.inited());
  CHECK(status.lastseq() == 1);
}

TEST_CASE("a second daemon on the same data directory or port fails "
          "clearly") {
  test::temp_dir dir;
  auto first = start_app(dir / "db");
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir / "db";
  auto same_dir = app::start(opts);
  REQUIRE_FALSE(same_dir);
  CHECK(message_of(same_dir.error()).find("in use by another recoverd")
        != std::string::npos);
  opts.listen = first->address();
  opts.data_dir = dir / "other";
  auto same_port = app::start(opts);
  REQUIRE_FALSE(same_port);
  CHECK(message_of(same_port.error()).find("cannot listen on")
        != std::string::npos);
  MESSAGE("the failed start released its data directory");
  opts.listen = "127.0.0.1:0";
  auto again = app::start(opts);
  CHECK(again);
}

TEST_CASE("an in-process restart finds jobs, annotations and registrations") {
  test::temp_dir dir;
  {
    auto d = start_app(dir / "db");
    auto ch = grpc::CreateChannel(d->address(),
                                  grpc::InsecureChannelCredentials());
    auto platform = pb::Platform::NewStub(ch);
    pb::PutJobRequest req;
    *req.mutable_spec() = spec_of("j");
    (*req.mutable_spec()->mutable_annotations())["a"] = "1";
    pb::PutJobResponse resp;
    grpc::ClientContext c;
    REQUIRE(platform->PutJob(&c, req, &resp).ok());
  }
  auto d = start_app(dir / "db");
  CHECK(d->replayed().jobs == 1);
  // The clean stop stored the job's digest: it is read when first asked for.
  CHECK(d->replayed().dormant == 1);
  CHECK(d->replayed().events == 0);
  auto ch = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
  auto platform = pb::Platform::NewStub(ch);
  // The edge's directory lists live jobs only: a dormant job's fault
  // snapshot goes through the registry, which wakes the job for it.
  pb::ReportDeviceFaultsRequest faults;
  auto* entry = faults.add_jobs();
  entry->set_jobid("j");
  entry->set_healthstate("UnHealthy");
  auto* f = entry->add_faults();
  f->set_nodename("node-1");
  f->set_deviceid("0");
  f->add_faultcodes("81078603");
  pb::ReportDeviceFaultsResponse answered;
  {
    grpc::ClientContext c;
    REQUIRE(platform->ReportDeviceFaults(&c, faults, &answered).ok());
  }
  REQUIRE(answered.results_size() == 1);
  CHECK(answered.results(0).accepted());
  pb::JobRef ref;
  ref.set_jobid("j");
  pb::JobStatus status;
  grpc::ClientContext c;
  REQUIRE(platform->GetJob(&c, ref, &status).ok());
  CHECK(status.spec().annotations().at("a") == "1");
  CHECK(status.healthstate() == "UnHealthy");
  CHECK(status.devicefaults_size() == 1);
}

TEST_CASE("the app stops while a client channel of the same process is "
          "still open") {
  // gRPC's threads outlive the app here (the channel keeps gRPC up); the
  // handlers that spawned bridge actors on them must not hold up the actor
  // system's shutdown (CAF 0.17 waits for the logger those spawns pinned).
  test::temp_dir dir;
  auto d = start_app(dir / "db");
  auto ch
    = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
  auto platform = pb::Platform::NewStub(ch);
  // Through the callback API, as an in-process client of the callback API
  // keeps gRPC's callback threads (the ones the handlers ran on) alive.
  for (int i = 0; i < 20; ++i) {
    pb::PutJobRequest req;
    *req.mutable_spec() = spec_of("j" + std::to_string(i));
    pb::PutJobResponse resp;
    grpc::ClientContext c;
    std::promise<grpc::Status> put;
    platform->async()->PutJob(&c, &req, &resp,
                              [&put](grpc::Status st) { put.set_value(st); });
    REQUIRE(put.get_future().get().ok());
    pb::ListNodeHealthRequest nodes;
    pb::ListNodeHealthResponse listed;
    grpc::ClientContext c2;
    std::promise<grpc::Status> list;
    platform->async()->ListNodeHealth(
      &c2, &nodes, &listed, [&list](grpc::Status st) { list.set_value(st); });
    REQUIRE(list.get_future().get().ok());
  }
  // A watchdog ends the run if the stop hangs: the stopping thread would be
  // stuck inside CAF, with no clean way on.
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  std::thread{[stopped] {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!*stopped && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    if (!*stopped) {
      std::fprintf(stderr,
                   "FAILED: the app did not stop within 30 s with a "
                   "client channel open\n");
      std::_Exit(1);
    }
  }}.detach();
  d.reset();
  *stopped = true;
  // The channel still works against a server that is gone: it fails fast.
  pb::ListJobsRequest req;
  pb::ListJobsResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 2s);
  CHECK_FALSE(platform->ListJobs(&c, req, &resp).ok());
}

TEST_CASE("durations parse as the flags document them") {
  millis x{0};
  CHECK(parse_duration("250ms", x));
  CHECK(x == millis{250});
  CHECK(parse_duration("1.5s", x));
  CHECK(x == millis{1'500});
  CHECK(parse_duration("7", x));
  CHECK(x == millis{7'000});
  CHECK(parse_duration("15m", x));
  CHECK(x == millis{900'000});
  CHECK(parse_duration("2h", x));
  CHECK(x == millis{7'200'000});
  CHECK(parse_duration("30d", x));
  CHECK(x == std::chrono::hours{24 * 30});
  CHECK(x == registry_config{}.retention);
  CHECK_FALSE(parse_duration("3w", x));
  CHECK_FALSE(parse_duration("-1s", x));
  CHECK_FALSE(parse_duration("d", x));
}

TEST_CASE("log: a role with a newline is logged as one line, in text and "
          "JSON (issue 11.7.7)") {
  const std::string forged
    = "taskd\n2026-12-02T00:00:00.000+0000 info job j deleted";
  auto lines = [](const std::string& x) {
    return std::count(x.begin(), x.end(), '\n');
  };
  for (const char* format : {"text", "json"}) {
    CAPTURE(format);
    std::ostringstream out;
    spdlog::logger log{"t", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)};
    log.set_formatter(make_log_formatter(format));
    log.info("job {} subscribed by {} at {}", "j", forged, "peer\r");
    auto text = out.str();
    CHECK(lines(text) == 1);
    CHECK(text.find("taskd\\n2026") != std::string::npos);
  }
  MESSAGE("the daemon's own logger, through SubscribeProcessManageSignal");
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  logger().sinks().push_back(sink);
  REQUIRE(configure_logging("info", "text"));
  {
    service_fixture fx;
    REQUIRE(fx.put(spec_of("j")).ok());
    REQUIRE(fx.init("j").code() == 0);
    REQUIRE(fx.reg("j").code() == 0);
    ::ClientInfo who;
    who.set_jobid("j");
    who.set_role(forged);
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 10s);
    auto reader = fx.recover->SubscribeProcessManageSignal(&c, who);
    ::ProcessManageSignal sig;
    CHECK(reader->Read(&sig)); // a keep-alive: the stream is attached
    c.TryCancel();
    while (reader->Read(&sig)) {
    }
    reader->Finish();
  } // the daemon is stopped: nothing logs any more
  logger().sinks().pop_back();
  std::istringstream text{out.str()};
  int subscribed = 0;
  for (std::string line; std::getline(text, line);) {
    CHECK(line.rfind("2026-12-02T00:00:00.000+0000", 0) != 0);
    if (line.find("subscribed by") != std::string::npos) {
      ++subscribed;
      CHECK(line.find("taskd\\n2026") != std::string::npos);
    }
  }
  CHECK(subscribed == 1);
}

TEST_CASE_FIXTURE(service_fixture, "Recover: an id with '/' is refused at "
                                   "every entry (issue 11.7.8)") {
  REQUIRE(put(spec_of("j")).ok());
  auto slash = [](const grpc::Status& st) {
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("contains '/'") != std::string::npos);
  };
  ::ClientInfo who;
  who.set_jobid("j/x");
  ::Status resp;
  auto c = ctx();
  slash(recover->Init(c.get(), who, &resp));
  c = ctx();
  slash(recover->Register(c.get(), who, &resp));
  {
    grpc::ClientContext sc;
    sc.set_deadline(std::chrono::system_clock::now() + 10s);
    auto reader = recover->SubscribeProcessManageSignal(&sc, who);
    ::ProcessManageSignal sig;
    CHECK_FALSE(reader->Read(&sig));
    slash(reader->Finish());
  }
  ::StopCompleteRequest stop;
  stop.set_jobid("j/x");
  stop.mutable_status()->set_code(0);
  c = ctx();
  slash(recover->ReportStopComplete(c.get(), stop, &resp));
  ::ProcessFaultRequest fault;
  fault.set_jobid("j/x");
  auto* f = fault.add_faultranks();
  f->set_rankid("0");
  f->set_faulttype("1");
  c = ctx();
  slash(recover->ReportProcessFault(c.get(), fault, &resp));
  ::SwitchNics nics;
  nics.set_jobid("j/x");
  c = ctx();
  auto st = recover->SwitchNicTrack(c.get(), nics, &resp);
  slash(st);
  CHECK(st.error_message().rfind("jobID:", 0) == 0);
  CHECK(get("j").lastseq() == 1);
}
