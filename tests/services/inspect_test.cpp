// The Inspect API over real loopback gRPC and HTTP: every RPC and route, the
// incidents of a recovery driven with a pinned clock, replay to a point
// against the live state recorded at that point, watches, /metrics and the
// gRPC health service.

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include "actors/error.hpp"
#include "actors/model/recovery.hpp"
#include "agent.hpp"
#include "fixtures/flow_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "inspect.grpc.pb.h"
#include "platform.grpc.pb.h"
#include "services/app.hpp"
#include "services/inspect_convert.hpp"

using namespace recoverd;
namespace pb = recoverd::platform::v1;
namespace pi = recoverd::inspection::v1;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

/// A daemon with an HTTP port and a clock the test moves.
struct inspect_fixture {
  test::temp_dir dir;
  std::shared_ptr<std::atomic<int64_t>> now
    = std::make_shared<std::atomic<int64_t>>(t0);
  std::unique_ptr<app> daemon;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Platform::Stub> platform;
  std::unique_ptr<pi::Inspect::Stub> inspect;
  std::unique_ptr<httplib::Client> http;
  app_options opts;

  explicit inspect_fixture(size_t stream_buffer = 1024) {
    opts.listen = "127.0.0.1:0";
    opts.http_listen = "127.0.0.1:0";
    opts.data_dir = dir / "db";
    opts.worker_threads = 2;
    opts.registry.job.stream_buffer = stream_buffer;
    auto clock = now;
    opts.registry.job.clock = [clock] { return clock->load(); };
    auto& w = opts.registry.job.waits;
    test::quick_waits(w);
    w.report = 5s;
    w.notify = 5s;
    start();
  }

  // Starts the daemon on `opts` (again after `stop`, on the same data).
  void start() {
    auto x = app::start(opts);
    REQUIRE_MESSAGE(x, (x ? "" : message_of(x.error())));
    daemon = std::move(*x);
    REQUIRE(daemon->http_port() > 0);
    channel = grpc::CreateChannel(daemon->address(),
                                  grpc::InsecureChannelCredentials());
    platform = pb::Platform::NewStub(channel);
    inspect = pi::Inspect::NewStub(channel);
    http = std::make_unique<httplib::Client>("127.0.0.1",
                                             daemon->http_port());
    http->set_read_timeout(10, 0);
  }

  // Stops the daemon and starts it again on the same data directory.
  void restart() {
    http.reset();
    inspect.reset();
    platform.reset();
    channel.reset();
    daemon.reset();
    start();
  }

  static std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + 10s);
    return c;
  }

  void put(const std::string& id) {
    pb::PutJobRequest req;
    *req.mutable_spec() = test::two_pod_spec(id, {"recover", "dump"});
    pb::PutJobResponse resp;
    auto c = ctx();
    auto st = platform->PutJob(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  void annotate(const std::string& id, const std::string& key,
                const std::string& value) {
    pb::SetAnnotationsRequest req;
    req.set_jobid(id);
    (*req.mutable_set())[key] = value;
    pb::Annotations resp;
    auto c = ctx();
    auto st = platform->SetAnnotations(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  grpc::Status try_get(const std::string& id, pi::JobDetail& out) {
    pi::GetJobRequest req;
    req.set_jobid(id);
    auto c = ctx();
    return inspect->GetJob(c.get(), req, &out);
  }

  pi::JobDetail get(const std::string& id) {
    pi::JobDetail out;
    auto st = try_get(id, out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }

  grpc::Status at(const std::string& id, std::optional<uint64_t> seq,
                  std::optional<int64_t> time, pi::JobAt& out) {
    pi::GetJobAtRequest req;
    req.set_jobid(id);
    if (seq)
      req.set_seq(*seq);
    if (time)
      req.set_timems(*time);
    auto c = ctx();
    return inspect->GetJobAt(c.get(), req, &out);
  }

  grpc::Status events(const std::string& id, uint64_t from, uint32_t limit,
                      pi::ListEventsResponse& out) {
    pi::ListEventsRequest req;
    req.set_jobid(id);
    req.set_fromseq(from);
    req.set_limit(limit);
    auto c = ctx();
    return inspect->ListEvents(c.get(), req, &out);
  }

  grpc::Status incidents(const std::string& id,
                         pi::ListIncidentsResponse& out) {
    pi::ListIncidentsRequest req;
    req.set_jobid(id);
    auto c = ctx();
    return inspect->ListIncidents(c.get(), req, &out);
  }

  void wait_state(const std::string& id, const std::string& state) {
    for (int i = 0; i < 500; ++i) {
      if (get(id).state().recovery().state() == state)
        return;
      std::this_thread::sleep_for(10ms);
    }
    REQUIRE(get(id).state().recovery().state() == state);
  }

  httplib::Result get_http(const std::string& path) {
    auto res = http->Get(path.c_str());
    REQUIRE_MESSAGE(res, "no HTTP answer for " << path);
    return res;
  }

  std::string metrics() {
    auto res = get_http("/metrics");
    REQUIRE(res->status == 200);
    return res->body;
  }

  // True once /metrics has a line starting with `line` (within ~5 s: the
  // HTTP counter is updated just after the answer is sent).
  bool has_metric(const std::string& line) {
    for (int i = 0; i < 500; ++i) {
      if (metrics().find("\n" + line) != std::string::npos)
        return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // Waits until /metrics has a line starting with `line`.
  void wait_metric(const std::string& line) {
    REQUIRE_MESSAGE(has_metric(line), "no metric line " << line);
  }
};

std::string diff(const google::protobuf::Message& x,
                 const google::protobuf::Message& y) {
  google::protobuf::util::MessageDifferencer d;
  std::string out;
  d.ReportDifferencesToString(&out);
  d.Compare(x, y);
  return out;
}

int http_error(httplib::Result& res, std::string* status = nullptr) {
  auto body = json::parse(res->body);
  if (status != nullptr)
    *status = body["error"]["status"].get<std::string>();
  CHECK(body["error"]["code"].get<int>() == res->status);
  CHECK_FALSE(body["error"]["message"].get<std::string>().empty());
  return res->status;
}

} // namespace

TEST_CASE("inspect: a recovery through Inspect and HTTP: incidents with "
          "phase durations, replay equals the live state at that point") {
  inspect_fixture fx;
  fx.put("job");
  agent::client agent{fx.daemon->address(), "job"};
  test::attach_agent(fx, agent, "job");
  grpc::ClientContext wctx;
  pi::WatchEventsRequest wreq;
  wreq.set_jobid("job");
  auto watch = fx.inspect->WatchEvents(&wctx, wreq);
  fx.wait_metric("recoverd_event_watchers 1");
  auto first_watched = fx.get("job").seq() + 1;

  MESSAGE("fault at t0, stop at +100 ms, strategy at +300, result at +600");
  CHECK(agent.report_process_fault({{"8", "1"}}).code() == 0);
  auto stop = agent.next_signal(5s);
  REQUIRE(stop);
  CHECK(stop->signaltype() == "stopTrain");
  fx.wait_state("job", to_string(st::wait_stop_complete));
  *fx.now += 100;
  CHECK(agent.report_stop_complete(0).code() == 0);
  auto global = agent.next_signal(5s);
  REQUIRE(global);
  CHECK(global->signaltype() == "globalFault");
  fx.wait_state("job", to_string(st::wait_recover_strategy));
  auto mid = fx.get("job");
  CHECK(mid.waitingfor() == "strategy");
  REQUIRE(mid.has_activeflow());
  CHECK(mid.activeflow().active());
  CHECK(mid.activeflow().phases_size() == 2);
  CHECK(fx.metrics().find("\nrecoverd_active_flows{kind=\"recovery\",state=\""
                          + std::string{to_string(st::wait_recover_strategy)} + "\"} 1")
        != std::string::npos);
  *fx.now += 200;
  CHECK(agent.report_recover_strategy({"recover", "dump"}).code() == 0);
  auto change = agent.next_signal(5s);
  REQUIRE(change);
  CHECK(change->changestrategy() == "recover");
  fx.wait_state("job", to_string(st::wait_process_recover_status));
  *fx.now += 300;
  CHECK(agent.report_recover_status(0, "recover").code() == 0);
  fx.wait_state("job", "INIT");
  auto done = fx.get("job");

  MESSAGE("replay to the recorded points equals the live states then");
  pi::JobAt at;
  REQUIRE(fx.at("job", mid.seq(), {}, at).ok());
  CHECK(at.seq() == mid.seq());
  CHECK_MESSAGE(google::protobuf::util::MessageDifferencer::Equals(
                  at.state(), mid.state()),
                diff(at.state(), mid.state()));
  CHECK(at.event().seq() == mid.seq());
  REQUIRE(at.has_activeflow());
  CHECK(at.activeflow().state() == to_string(st::wait_recover_strategy));
  pi::JobAt at_time;
  REQUIRE(fx.at("job", {}, t0 + 100, at_time).ok());
  CHECK(at_time.seq() == mid.seq());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(at_time.state(),
                                                           mid.state()));
  pi::JobAt at_end;
  REQUIRE(fx.at("job", done.seq(), {}, at_end).ok());
  CHECK_MESSAGE(google::protobuf::util::MessageDifferencer::Equals(
                  at_end.state(), done.state()),
                diff(at_end.state(), done.state()));
  CHECK_FALSE(google::protobuf::util::MessageDifferencer::Equals(
    at_end.state(), mid.state()));

  MESSAGE("one incident with its phases and their durations");
  pi::ListIncidentsResponse incidents;
  REQUIRE(fx.incidents("job", incidents).ok());
  REQUIRE(incidents.incidents_size() == 1);
  const auto& x = incidents.incidents(0);
  CHECK(x.kind() == "recovery");
  CHECK_FALSE(x.active());
  CHECK(x.uuid() == stop->uuid());
  CHECK(x.strategy() == "recover");
  CHECK(x.outcome() == "recover-success");
  CHECK(x.startedms() == t0);
  CHECK(x.endedms() == t0 + 600);
  CHECK(x.durationms() == 600);
  CHECK(x.faultranks(0) == "8");
  std::vector<std::tuple<std::string, int64_t, int64_t>> phases;
  for (const auto& p : x.phases())
    phases.emplace_back(p.name(), p.sincestartms(), p.durationms());
  CHECK(phases
        == std::vector<std::tuple<std::string, int64_t, int64_t>>{
          {"fault_seen", 0, 0},
          {"stop_acknowledged", 100, 100},
          {"strategy_decided", 300, 200},
          {"result", 600, 300}});

  MESSAGE("ListEvents pages through everything; phases sit on their events");
  std::vector<pi::EventRecord> all;
  for (uint64_t next = 1; next != 0;) {
    pi::ListEventsResponse page;
    REQUIRE(fx.events("job", next, 7, page).ok());
    REQUIRE(page.events_size() > 0);
    CHECK(page.events_size() <= 7);
    for (const auto& e : page.events())
      all.push_back(e);
    next = page.nextseq();
  }
  REQUIRE(all.size() == done.seq());
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq() == i + 1);
    CHECK(all[i].event().seq() == i + 1);
    CHECK_FALSE(all[i].summary().empty());
  }
  CHECK(all[0].kind() == "job_put");
  for (const auto& p : x.phases())
    CHECK(all[p.seq() - 1].timems() == p.timems());
  CHECK(all[x.firstseq() - 1].summary().find("faultOccur") == 0);

  MESSAGE("the watch saw every event after it started, in order");
  for (auto seq = first_watched; seq <= done.seq(); ++seq) {
    pi::EventRecord e;
    REQUIRE(watch->Read(&e));
    CHECK(e.jobid() == "job");
    CHECK(e.seq() == seq);
    CHECK(e.position() > 0);
    CHECK(e.summary() == all[seq - 1].summary());
  }
  wctx.TryCancel();
  watch->Finish();

  MESSAGE("ListJobs and GetJob");
  pi::ListJobsResponse jobs;
  {
    auto c = inspect_fixture::ctx();
    REQUIRE(fx.inspect->ListJobs(c.get(), {}, &jobs).ok());
  }
  REQUIRE(jobs.jobs_size() == 1);
  CHECK(jobs.jobs(0).jobid() == "job");
  CHECK(jobs.jobs(0).recoverystate() == "INIT");
  CHECK(jobs.jobs(0).subscribed());
  CHECK(jobs.jobs(0).flows() == 1);
  CHECK_FALSE(jobs.jobs(0).has_activeflow());
  CHECK(jobs.jobs(0).lastincident().outcome() == "recover-success");
  CHECK(done.subscribers().attached());
  CHECK(done.subscribers().generation() == 1);
  CHECK(done.subscribers().role() == "agent");
  CHECK_FALSE(done.subscribers().peer().empty());
  CHECK(done.waitingfor().empty());
  CHECK(done.state().spec().pods_size() == 2);
  CHECK(done.lastincident().durationms() == 600);

  MESSAGE("HTTP says the same as gRPC");
  auto res = fx.get_http("/api/v1/jobs/job/incidents");
  CHECK(res->status == 200);
  CHECK(json::parse(res->body) == json::parse(convert::to_json(incidents)));
  res = fx.get_http("/api/v1/jobs/job/at?seq=" + std::to_string(mid.seq()));
  CHECK(res->status == 200);
  CHECK(json::parse(res->body) == json::parse(convert::to_json(at)));
  using google::protobuf::util::TimeUtil;
  auto rfc3339 = TimeUtil::ToString(TimeUtil::MillisecondsToTimestamp(t0 + 100));
  res = fx.get_http("/api/v1/jobs/job/at?time=" + rfc3339);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body)["seq"] == std::to_string(mid.seq()));
  res = fx.get_http("/api/v1/jobs");
  CHECK(res->status == 200);
  CHECK(json::parse(res->body) == json::parse(convert::to_json(jobs)));
  res = fx.get_http("/api/v1/jobs/job?pretty=1");
  CHECK(res->status == 200);
  CHECK(res->body.find("\n") != std::string::npos);
  auto detail = json::parse(res->body);
  CHECK(detail["jobId"] == "job");
  CHECK(detail["subscribers"]["attached"] == true);
  CHECK(detail["lastIncident"]["outcome"] == "recover-success");
  res = fx.get_http("/api/v1/jobs/job/events?from=2&limit=3");
  CHECK(res->status == 200);
  auto page = json::parse(res->body);
  REQUIRE(page["events"].size() == 3);
  CHECK(page["events"][0]["seq"] == "2");
  CHECK(page["nextSeq"] == "5");

  MESSAGE("/metrics has the expected series");
  for (const auto& line : std::vector<std::string>{
         "recoverd_grpc_requests_total{method=\"/Recover/ReportStopComplete\","
        "code=\"OK\"} 1",
        "recoverd_grpc_request_duration_seconds_count{method=\"/"
        "recoverd.inspection.v1.Inspect/GetJobAt\"} 3",
        "recoverd_grpc_open_streams{method=\"/Recover/"
        "SubscribeProcessManageSignal\"} 1",
        "recoverd_flows_finished_total{kind=\"recovery\",strategy=\"recover\","
        "outcome=\"recover-success\"} 1",
        "recoverd_jobs 1", "recoverd_jobs_registered 1",
        "recoverd_http_requests_total{route=\"/api/v1/jobs/{id}/incidents\","
        "code=\"200\"} 1",
        "recoverd_log_events_total " + std::to_string(done.seq()),
        "recoverd_journal_batch_size_bucket{le=\"+Inf\"}",
        "recoverd_journal_write_seconds_count"})
    CHECK_MESSAGE(fx.has_metric(line), line);
  auto text = fx.metrics();
  CHECK(text.find("\nrecoverd_active_flows{") == std::string::npos);
  CHECK(text.find("# TYPE recoverd_grpc_request_duration_seconds histogram")
        != std::string::npos);
}

TEST_CASE("inspect: bad input is refused clearly, unknown jobs are "
          "NOT_FOUND, deleted jobs keep their history") {
  inspect_fixture fx;
  fx.put("gone");
  {
    pb::JobRef ref;
    ref.set_jobid("gone");
    pb::DeleteJobResponse resp;
    auto c = inspect_fixture::ctx();
    REQUIRE(fx.platform->DeleteJob(c.get(), ref, &resp).ok());
  }
  pi::JobDetail detail;
  CHECK(fx.try_get("", detail).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  MESSAGE("an id with '/' is refused like PutJob refuses it (issue 11.7.8)");
  auto slash = fx.try_get("a/b", detail);
  CHECK(slash.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(slash.error_message().find("contains '/'") != std::string::npos);
  pi::ListEventsResponse slash_page;
  CHECK(fx.events("a/b", 1, 10, slash_page).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(fx.try_get("missing", detail).error_code()
        == grpc::StatusCode::NOT_FOUND);
  CHECK(fx.try_get("gone", detail).error_code()
        == grpc::StatusCode::NOT_FOUND);
  pi::ListEventsResponse page;
  CHECK(fx.events("missing", 1, 10, page).error_code()
        == grpc::StatusCode::NOT_FOUND);
  REQUIRE(fx.events("gone", 0, 0, page).ok());
  CHECK(page.events_size() == 2);
  CHECK(page.events(1).kind() == "job_deleted");
  CHECK(page.nextseq() == 0);
  CHECK(page.lastseq() == 2);
  pi::ListIncidentsResponse incidents;
  CHECK(fx.incidents("missing", incidents).error_code()
        == grpc::StatusCode::NOT_FOUND);
  REQUIRE(fx.incidents("gone", incidents).ok());
  CHECK(incidents.incidents_size() == 0);
  pi::JobAt at;
  auto st = fx.at("gone", {}, {}, at);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("seq or timeMs") != std::string::npos);
  CHECK(fx.at("gone", 0, {}, at).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  st = fx.at("gone", 3, {}, at);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().find("last event 2") != std::string::npos);
  CHECK(fx.at("gone", {}, t0 - 1, at).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(fx.at("gone", 1, {}, at).ok());
  CHECK(at.state().exists());
  REQUIRE(fx.at("gone", {}, t0, at).ok());
  CHECK(at.seq() == 2);
  CHECK_FALSE(at.state().exists());

  MESSAGE("over HTTP: 400 and 404 with a JSON error");
  std::string status;
  auto res = fx.get_http("/api/v1/jobs/missing");
  CHECK(http_error(res, &status) == 404);
  CHECK(status == "NOT_FOUND");
  res = fx.get_http("/api/v1/jobs/gone/events?from=abc");
  CHECK(http_error(res, &status) == 400);
  CHECK(status == "INVALID_ARGUMENT");
  CHECK(res->body.find("from: ") != std::string::npos);
  res = fx.get_http("/api/v1/jobs/gone/events?limit=-1");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v1/jobs/gone/at");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v1/jobs/gone/at?seq=1&time=1");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v1/jobs/gone/at?time=yesterday");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v1/jobs/gone/at?seq=9");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v1/jobs/missing/incidents");
  CHECK(http_error(res) == 404);
  res = fx.get_http("/api/v1/watch?job=%01");
  CHECK(http_error(res) == 400);
  res = fx.get_http("/api/v2/whatever");
  CHECK(http_error(res, &status) == 404);
  res = fx.get_http("/api/v1/jobs/gone/events");
  CHECK(res->status == 200);
  CHECK(json::parse(res->body)["events"].size() == 2);
  CHECK(fx.has_metric("recoverd_grpc_requests_total{method=\"/"
                      "recoverd.inspection.v1.Inspect/GetJob\",code=\""
                      "NOT_FOUND\"} 2"));
  CHECK(fx.has_metric("recoverd_http_requests_total{route=\"/api/v1/jobs/"
                      "{id}/at\",code=\"400\"} 4"));
}

TEST_CASE("inspect: watches per job and cluster-wide, server-sent events, "
          "and a slow watcher is dropped with RESOURCE_EXHAUSTED") {
  inspect_fixture fx{8};
  grpc::ClientContext a_ctx;
  pi::WatchEventsRequest a_req;
  a_req.set_jobid("a");
  auto watch_a = fx.inspect->WatchEvents(&a_ctx, a_req);
  grpc::ClientContext all_ctx;
  auto watch_all = fx.inspect->WatchEvents(&all_ctx, {});
  // Server-sent events for job b on an HTTP thread of the test.
  std::promise<std::string> sse_promise;
  auto sse_result = sse_promise.get_future();
  std::thread sse{[&] {
    httplib::Client c{"127.0.0.1", fx.daemon->http_port()};
    c.set_read_timeout(10, 0);
    std::string got;
    auto res = c.Get("/api/v1/watch?job=b",
                     [&](const char* data, size_t n) {
                       got.append(data, n);
                       // Done once an event for b came in full.
                       return got.find("\"jobId\":\"b\"") == std::string::npos
                              || got.find("\n\n", got.find("event: event"))
                                   == std::string::npos;
                     });
    sse_promise.set_value(got);
  }};
  fx.wait_metric("recoverd_event_watchers 3");
  fx.put("a");
  fx.put("b");
  fx.annotate("a", "k", "1");
  fx.annotate("b", "k", "2");
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    pi::EventRecord e;
    REQUIRE(watch_a->Read(&e));
    CHECK(e.jobid() == "a");
    CHECK(e.seq() == seq);
  }
  std::map<std::string, uint64_t> seen;
  uint64_t position = 0;
  for (int i = 0; i < 4; ++i) {
    pi::EventRecord e;
    REQUIRE(watch_all->Read(&e));
    CHECK(e.position() > position);
    position = e.position();
    CHECK(e.seq() == ++seen[e.jobid()]);
  }
  CHECK(seen == std::map<std::string, uint64_t>{{"a", 2}, {"b", 2}});
  REQUIRE(sse_result.wait_for(10s) == std::future_status::ready);
  sse.join();
  auto got = sse_result.get();
  CHECK(got.rfind(": watching\n\n", 0) == 0);
  auto data = got.find("data: ");
  REQUIRE(data != std::string::npos);
  auto record = json::parse(got.substr(data + 6, got.find('\n', data) - data - 6));
  CHECK(record["jobId"] == "b");
  CHECK(record["seq"] == "1");
  CHECK(record["kind"] == "job_put");
  CHECK(got.find("\"jobId\":\"a\"") == std::string::npos);
  a_ctx.TryCancel();
  watch_a->Finish();
  all_ctx.TryCancel();
  watch_all->Finish();
  fx.wait_metric("recoverd_event_watchers 0");

  MESSAGE("a watcher that does not read falls behind and is dropped");
  grpc::ChannelArguments args;
  // Keep the flow-control window small, so unread events pile up here.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto slow_channel = grpc::CreateCustomChannel(
    fx.daemon->address(), grpc::InsecureChannelCredentials(), args);
  auto slow_stub = pi::Inspect::NewStub(slow_channel);
  grpc::ClientContext slow_ctx;
  slow_ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  auto slow = slow_stub->WatchEvents(&slow_ctx, a_req);
  fx.wait_metric("recoverd_event_watchers 1");
  std::string big(100 * 1024, 'x');
  for (int i = 0; i < 24; ++i) {
    big[0] = static_cast<char>('a' + i % 2);
    fx.annotate("a", "big", big);
  }
  pi::EventRecord e;
  int read = 0;
  while (slow->Read(&e))
    ++read;
  auto st = slow->Finish();
  // A write its client never takes is cancelled rather than waited for.
  CHECK((st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED
         || st.error_code() == grpc::StatusCode::CANCELLED));
  CHECK(read < 24);
  CHECK(fx.has_metric("recoverd_event_watchers_dropped_total 1"));
  CHECK(fx.has_metric("recoverd_event_watchers 0"));
}

TEST_CASE("health: the standard gRPC health service answers SERVING") {
  inspect_fixture fx;
  grpc::GenericStub stub{fx.channel};
  // grpc.health.v1.HealthCheckRequest{service: ""} encodes as no bytes.
  grpc::ByteBuffer request;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&c, "/grpc.health.v1.Health/Check", grpc::StubOptions{},
                 &request, &response,
                 [&](grpc::Status st) { done.set_value(std::move(st)); });
  auto st = done.get_future().get();
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  std::vector<grpc::Slice> slices;
  REQUIRE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
  CHECK(bytes == std::string{"\x08\x01", 2});
}

namespace {

/// One request on the reflection stream (what grpcurl sends) and the bytes
/// of the one answer.
std::string ask_reflection(inspect_fixture& fx, const std::string& request) {
  grpc::GenericStub stub{fx.channel};
  grpc::CompletionQueue cq;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  auto call = stub.PrepareCall(
    &c, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&cq](intptr_t want) {
    void* got = nullptr;
    bool ok = false;
    REQUIRE(cq.Next(&got, &ok));
    CHECK(reinterpret_cast<intptr_t>(got) == want);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE(step(1));
  grpc::Slice slice{request};
  grpc::ByteBuffer buffer{&slice, 1};
  call->Write(buffer, reinterpret_cast<void*>(2));
  REQUIRE(step(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  REQUIRE(step(3));
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(5));
  step(5);
  CHECK_MESSAGE(st.ok(), st.error_message());
  std::vector<grpc::Slice> slices;
  REQUIRE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& x : slices)
    bytes.append(reinterpret_cast<const char*>(x.begin()), x.size());
  return bytes;
}

} // namespace

TEST_CASE("reflection: the server lists its services (what grpcurl asks)") {
  inspect_fixture fx;
  // ServerReflectionRequest{list_services: ""}: field 7, length 0.
  auto bytes = ask_reflection(fx, std::string{"\x3a\x00", 2});
  for (const char* service : {"Recover", "recoverd.platform.v1.Platform",
                              "recoverd.inspection.v1.Inspect",
                              "grpc.health.v1.Health"})
    CHECK_MESSAGE(bytes.find(service) != std::string::npos, service);
}

TEST_CASE("reflection: grpc.health.v1.Health is described, not only listed "
          "(grpcurl describe)") {
  inspect_fixture fx;
  // ServerReflectionRequest{file_containing_symbol: "grpc.health.v1.Health"}:
  // field 4, length-delimited.
  std::string symbol = "grpc.health.v1.Health";
  auto bytes = ask_reflection(
    fx, std::string{"\x22"} + static_cast<char>(symbol.size()) + symbol);
  // A FileDescriptorResponse (field 4) holding the file, not an
  // ErrorResponse (field 7, "Symbol not found").
  CHECK(bytes.find("Symbol not found") == std::string::npos);
  for (const char* part : {"health.proto", "HealthCheckRequest",
                           "HealthCheckResponse", "NOT_SERVING", "Watch"})
    CHECK_MESSAGE(bytes.find(part) != std::string::npos, part);
}

TEST_CASE("status: GET /api/v1/status and Inspect.GetStatus list every "
          "component of the running daemon") {
  inspect_fixture fx;
  fx.put("job-b");
  fx.put("job-a");
  const std::vector<std::string> daemon_parts{
    "job_registry", "journal", "event_hub", "inspector", "historian"};
  auto names = [](const json& body) {
    std::vector<std::string> result;
    for (const auto& x : body["components"])
      result.push_back(x["name"].get<std::string>());
    return result;
  };
  MESSAGE("HTTP: the daemon's components, healthy, jobs counted by state");
  auto res = fx.get_http("/api/v1/status");
  REQUIRE(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == "application/json");
  auto body = json::parse(res->body);
  CHECK(names(body) == daemon_parts);
  CHECK(body["healthy"] == true);
  for (const auto& x : body["components"]) {
    CAPTURE(x.dump());
    CHECK(x["answered"] == true);
    CHECK(x["problem"] == "");
    CHECK(x["kind"] == x["name"]);
  }
  // proto3 JSON renders uint64 as a string.
  CHECK(body["components"][0]["counters"]["jobs"] == "2");
  CHECK(body["components"][0]["counters"]["state.INIT"] == "2");
  CHECK(std::stoull(body["components"][1]["counters"]["records"]
                      .get<std::string>())
        >= 2);
  MESSAGE("HTTP: one job on request, every job with detailed=1");
  res = fx.get_http("/api/v1/status?job=job-a");
  REQUIRE(res->status == 200);
  body = json::parse(res->body);
  REQUIRE(body["components"].size() == 6);
  CHECK(body["components"][5]["name"] == "job/job-a");
  CHECK(body["components"][5]["kind"] == "job");
  CHECK(body["components"][5]["facts"]["recoveryState"] == "INIT");
  res = fx.get_http("/api/v1/status?detailed=1");
  REQUIRE(res->status == 200);
  body = json::parse(res->body);
  auto all = daemon_parts;
  all.push_back("job/job-a");
  all.push_back("job/job-b");
  CHECK(names(body) == all);
  CHECK(body["components"][1]["counters"].contains("maxBatch"));
  res = fx.get_http("/api/v1/status?job=missing");
  std::string status;
  CHECK(http_error(res, &status) == 404);
  CHECK(status == "NOT_FOUND");
  res = fx.get_http("/api/v1/status?job=%01");
  CHECK(http_error(res) == 400);
  MESSAGE("gRPC: the same");
  pi::GetStatusRequest req;
  pi::StatusResponse resp;
  auto c = fx.ctx();
  auto st = fx.inspect->GetStatus(c.get(), req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(resp.healthy());
  REQUIRE(resp.components_size() == 5);
  for (int i = 0; i < 5; ++i)
    CHECK(resp.components(i).name() == daemon_parts[i]);
  CHECK(resp.components(0).counters().at("jobs") == 2);
  req.set_jobid("job-b");
  resp.Clear();
  c = fx.ctx();
  st = fx.inspect->GetStatus(c.get(), req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  REQUIRE(resp.components_size() == 6);
  CHECK(resp.components(5).name() == "job/job-b");
  req.set_jobid("missing");
  c = fx.ctx();
  st = fx.inspect->GetStatus(c.get(), req, &resp);
  CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(fx.has_metric("recoverd_http_requests_total{route=\"/api/v1/status\""));
}

namespace {

// The agent reports rank 8 (node-1, device 0) faulty at the fixture's
// clock t; stop acknowledged at t + 100 ms, strategy at t + 300, recovered
// at t + 600.
void recover_rank_8(inspect_fixture& fx, agent::client& agent) {
  REQUIRE(agent.report_process_fault({{"8", "1"}}).code() == 0);
  REQUIRE(agent.next_signal(5s));
  fx.wait_state("job", to_string(st::wait_stop_complete));
  *fx.now += 100;
  REQUIRE(agent.report_stop_complete(0).code() == 0);
  REQUIRE(agent.next_signal(5s));
  fx.wait_state("job", to_string(st::wait_recover_strategy));
  *fx.now += 200;
  REQUIRE(agent.report_recover_strategy({"recover", "dump"}).code() == 0);
  REQUIRE(agent.next_signal(5s));
  fx.wait_state("job", to_string(st::wait_process_recover_status));
  *fx.now += 300;
  REQUIRE(agent.report_recover_status(0, "recover").code() == 0);
  fx.wait_state("job", "INIT");
}

pi::StatsResponse stats(inspect_fixture& fx, const std::string& job = {}) {
  pi::GetStatsRequest req;
  req.set_jobid(job);
  pi::StatsResponse resp;
  auto c = inspect_fixture::ctx();
  auto st = fx.inspect->GetStats(c.get(), req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  return resp;
}

// The goodput lines /metrics must have after `recover_rank_8`.
const std::vector<std::string> goodput_lines = {
  "recoverd_flow_duration_seconds_bucket{kind=\"recovery\","
  "strategy=\"recover\",outcome=\"recover-success\",le=\"1\"} 1",
  "recoverd_flow_duration_seconds_bucket{kind=\"recovery\","
  "strategy=\"recover\",outcome=\"recover-success\",le=\"+Inf\"} 1",
  "recoverd_flow_duration_seconds_sum{kind=\"recovery\",strategy=\"recover\","
  "outcome=\"recover-success\"} 0.6",
  "recoverd_incident_time_lost_seconds_count{cause=\"agent-report\"} 1",
  "recoverd_incident_time_lost_seconds_sum{cause=\"agent-report\"} 0.6",
  "recoverd_incidents{cause=\"agent-report\"} 1",
  "recoverd_fleet_mttr_seconds 0.6",
  "recoverd_fleet_time_lost_seconds 0.6",
  "recoverd_flows_finished_total{kind=\"recovery\",strategy=\"recover\","
  "outcome=\"recover-success\"} 1"};

// `promtool check metrics` on `text`: its exit status and output.
std::pair<int, std::string> promtool_check(const test::temp_dir& dir,
                                           const std::string& text) {
  auto file = dir / "metrics.txt";
  {
    std::ofstream out{file};
    out << text;
  }
  auto cmd = "/usr/bin/promtool check metrics < " + file + " 2>&1";
  std::string output;
  auto* p = ::popen(cmd.c_str(), "r");
  REQUIRE_MESSAGE(p != nullptr, "cannot run promtool (scripts/setup.sh)");
  char buf[512];
  while (auto n = std::fread(buf, 1, sizeof(buf), p))
    output.append(buf, n);
  auto status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

} // namespace

TEST_CASE("stats: GetStats and /api/v1/stats give the goodput of a scripted "
          "recovery; incidents carry time lost and attribution; the "
          "/metrics histograms survive a restart") {
  inspect_fixture fx;
  fx.put("job");
  agent::client agent{fx.daemon->address(), "job"};
  test::attach_agent(fx, agent, "job");
  recover_rank_8(fx, agent);

  MESSAGE("the incident: 600 ms lost, split by phase, started by the agent");
  pi::ListIncidentsResponse incidents;
  REQUIRE(fx.incidents("job", incidents).ok());
  REQUIRE(incidents.incidents_size() == 1);
  const auto& x = incidents.incidents(0);
  CHECK(x.timelostms() == 600);
  std::map<std::string, int64_t> by_phase{x.lostbyphase().begin(),
                                          x.lostbyphase().end()};
  CHECK(by_phase
        == std::map<std::string, int64_t>{{"fault_seen", 0},
                                          {"stop_acknowledged", 100},
                                          {"strategy_decided", 200},
                                          {"result", 300}});
  CHECK(x.attribution().source() == "agent-report");
  CHECK(x.attribution().node() == "node-1");
  CHECK(x.attribution().device() == "0");
  CHECK(x.attribution().level() == "normal");
  auto res = fx.get_http("/api/v1/jobs/job/incidents");
  REQUIRE(res->status == 200);
  auto incident = json::parse(res->body)["incidents"][0];
  CHECK(incident["timeLostMs"] == "600");
  CHECK(incident["lostByPhase"]["stop_acknowledged"] == "100");
  CHECK(incident["attribution"]["source"] == "agent-report");
  CHECK(incident["attribution"]["node"] == "node-1");

  MESSAGE("GetStats: one recovery of 600 ms");
  auto s = stats(fx);
  CHECK(s.fleet().incidents() == 1);
  CHECK(s.fleet().recoveries() == 1);
  CHECK(s.fleet().mttrms() == 600);
  CHECK(s.fleet().timelostms() == 600);
  CHECK(s.fleet().bycause().at("agent-report") == 1);
  CHECK(s.fleet().bycause().size() == 1);
  // The job was created at the pinned t0; "now" is the wall clock.
  CHECK(s.fleet().observedms() >= s.nowms() - t0);
  CHECK(s.fleet().ettr() > 0.0);
  CHECK(s.fleet().ettr() < 1.0);
  REQUIRE(s.jobs_size() == 1);
  CHECK(s.jobs(0).jobid() == "job");
  CHECK(s.jobs(0).mttrms() == 600);
  CHECK(s.jobs(0).incidents() == 1);

  MESSAGE("/api/v1/stats answers the agreed JSON");
  res = fx.get_http("/api/v1/stats");
  REQUIRE(res->status == 200);
  auto body = json::parse(res->body);
  CHECK(body["fleet"]["incidents"] == "1");
  CHECK(body["fleet"]["mttrMs"] == "600");
  CHECK(body["fleet"]["timeLostMs"] == "600");
  CHECK(body["fleet"]["byCause"] == json{{"agent-report", "1"}});
  CHECK(body["fleet"]["ettr"].is_number());
  CHECK(body["fleet"]["ettr"].get<double>() > 0.0);
  REQUIRE(body["jobs"].size() == 1);
  CHECK(body["jobs"][0]["jobId"] == "job");
  CHECK(body["jobs"][0]["mttrMs"] == "600");
  res = fx.get_http("/api/v1/stats?job=job");
  CHECK(res->status == 200);
  CHECK(json::parse(res->body)["jobs"].size() == 1);
  res = fx.get_http("/api/v1/stats?job=missing");
  CHECK(http_error(res) == 404);
  res = fx.get_http("/api/v1/stats?job=%01");
  CHECK(http_error(res) == 400);
  {
    pi::GetStatsRequest req;
    req.set_jobid("missing");
    pi::StatsResponse resp;
    auto c = inspect_fixture::ctx();
    CHECK(fx.inspect->GetStats(c.get(), req, &resp).error_code()
          == grpc::StatusCode::NOT_FOUND);
  }

  MESSAGE("/metrics: histograms with bounded labels, valid for promtool");
  for (const auto& line : goodput_lines)
    CHECK_MESSAGE(fx.has_metric(line), line);
  auto text = fx.metrics();
  CHECK(text.find("# TYPE recoverd_flow_duration_seconds histogram")
        != std::string::npos);
  CHECK(text.find("# TYPE recoverd_fleet_ettr gauge") != std::string::npos);
  auto [rc, output] = promtool_check(fx.dir, text);
  CHECK_MESSAGE(rc == 0, output);

  MESSAGE("after a restart on the same data the figures are the same");
  agent.stop();
  fx.restart();
  for (const auto& line : goodput_lines)
    CHECK_MESSAGE(fx.has_metric(line), line);
  auto again = stats(fx);
  CHECK(again.fleet().incidents() == 1);
  CHECK(again.fleet().mttrms() == 600);
  CHECK(again.fleet().timelostms() == 600);
  CHECK(again.fleet().bycause().at("agent-report") == 1);
}
