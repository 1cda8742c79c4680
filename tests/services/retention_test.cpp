// The retention of a live job through the daemon: after a recovery, its old
// events go at a sweep, its incidents are still listed (Inspect and HTTP),
// reads of removed events answer clearly, and a restart replays the job from
// its snapshot with the same state and the same incidents.

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include <caf/scoped_actor.hpp>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actors/error.hpp"
#include "actors/model/recovery.hpp"
#include "agent.hpp"
#include "fixtures/eventually.hpp"
#include "fixtures/flow_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "inspect.grpc.pb.h"
#include "platform.grpc.pb.h"
#include "services/app.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;
namespace pb = recoverd::platform::v1;
namespace pi = recoverd::inspection::v1;
using namespace std::chrono_literals;
using json = nlohmann::json;
using google::protobuf::util::MessageDifferencer;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;
constexpr int64_t hour = 3'600'000;

/// A daemon with a clock the test moves, restartable on the same log.
struct retention_fixture {
  test::temp_dir dir;
  std::shared_ptr<std::atomic<int64_t>> now
    = std::make_shared<std::atomic<int64_t>>(t0);
  std::unique_ptr<app> daemon;
  std::unique_ptr<pb::Platform::Stub> platform;
  std::unique_ptr<pi::Inspect::Stub> inspect;
  std::unique_ptr<httplib::Client> http;

  retention_fixture() {
    start();
  }

  void start() {
    app_options opts;
    opts.listen = "127.0.0.1:0";
    opts.http_listen = "127.0.0.1:0";
    opts.data_dir = dir / "db";
    opts.worker_threads = 2;
    opts.registry.retention = std::chrono::hours{1};
    opts.dormant_start = dormant_start;
    opts.history_store_interval = store_interval;
    // A snapshot after every event: whatever is old lies before one.
    opts.registry.job.snapshot_every = 1;
    auto clock = now;
    opts.registry.job.clock = [clock] { return clock->load(); };
    auto& w = opts.registry.job.waits;
    test::quick_waits(w);
    w.report = 5s;
    w.notify = 5s;
    auto x = app::start(opts);
    REQUIRE_MESSAGE(x, (x ? "" : message_of(x.error())));
    daemon = std::move(*x);
    auto channel = grpc::CreateChannel(daemon->address(),
                                       grpc::InsecureChannelCredentials());
    platform = pb::Platform::NewStub(channel);
    inspect = pi::Inspect::NewStub(channel);
    http = std::make_unique<httplib::Client>("127.0.0.1", daemon->http_port());
    http->set_read_timeout(10, 0);
  }

  /// Whether start-up leaves jobs with a current digest dormant.
  bool dormant_start = true;
  /// How often the inspector stores the folds that changed.
  std::chrono::milliseconds store_interval{60'000};

  void restart() {
    daemon->stop();
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

  pi::JobDetail get(const std::string& id) {
    pi::GetJobRequest req;
    req.set_jobid(id);
    pi::JobDetail out;
    auto c = ctx();
    auto st = inspect->GetJob(c.get(), req, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }

  void wait_state(const std::string& id, const std::string& state) {
    for (int i = 0; i < 500; ++i) {
      if (get(id).state().recovery().state() == state)
        return;
      std::this_thread::sleep_for(10ms);
    }
    REQUIRE(get(id).state().recovery().state() == state);
  }

  pi::ListIncidentsResponse incidents(const std::string& id) {
    pi::ListIncidentsRequest req;
    req.set_jobid(id);
    pi::ListIncidentsResponse out;
    auto c = ctx();
    auto st = inspect->ListIncidents(c.get(), req, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }

  pi::ListEventsResponse events(const std::string& id, uint64_t from) {
    pi::ListEventsRequest req;
    req.set_jobid(id);
    req.set_fromseq(from);
    req.set_limit(1000);
    pi::ListEventsResponse out;
    auto c = ctx();
    auto st = inspect->ListEvents(c.get(), req, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }

  grpc::Status at(const std::string& id, uint64_t seq, pi::JobAt& out) {
    pi::GetJobAtRequest req;
    req.set_jobid(id);
    req.set_seq(seq);
    auto c = ctx();
    return inspect->GetJobAt(c.get(), req, &out);
  }

  purge_stats purge() {
    caf::scoped_actor self{daemon->system()};
    purge_stats result;
    bool answered = false;
    self->request(daemon->registry(), caf::infinite, purge_atom::value)
      .receive(
        [&](purge_stats& x) {
          result = x;
          answered = true;
        },
        [&](caf::error& err) { FAIL("purge failed: " << message_of(err)); });
    REQUIRE(answered);
    return result;
  }

  void remove(const std::string& id) {
    pb::JobRef req;
    req.set_jobid(id);
    pb::DeleteJobResponse resp;
    auto c = ctx();
    auto st = platform->DeleteJob(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  /// A counter of the status of `component` (the historian, the
  /// inspector).
  template <class Handle>
  uint64_t counter(const Handle& component, const std::string& name) {
    caf::scoped_actor self{daemon->system()};
    uint64_t result = 0;
    self
      ->request(component, caf::infinite, status_atom::value,
                status_verbosity::info)
      .receive(
        [&](component_status& x) { result = x.counters.at(name); },
        [&](caf::error& err) { FAIL("no status: " << message_of(err)); });
    return result;
  }

  /// The events the historian has decoded for ListIncidents so far.
  uint64_t incident_events_read() {
    return counter(daemon->historian(), "incident_events_read");
  }

  /// A counter of the inspector's status.
  uint64_t inspector_counter(const std::string& name) {
    return counter(daemon->inspector(), name);
  }

  std::string metrics() {
    auto res = http->Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return res->body;
  }
};

// Runs one recovery of `id` from fault to success.
void recover_once(retention_fixture& fx, agent::client& agent,
                  const std::string& id) {
  CHECK(agent.report_process_fault({{"8", "1"}}).code() == 0);
  auto stop = agent.next_signal(5s);
  REQUIRE(stop);
  fx.wait_state(id, to_string(st::wait_stop_complete));
  CHECK(agent.report_stop_complete(0).code() == 0);
  REQUIRE(agent.next_signal(5s));
  fx.wait_state(id, to_string(st::wait_recover_strategy));
  CHECK(agent.report_recover_strategy({"recover", "dump"}).code() == 0);
  REQUIRE(agent.next_signal(5s));
  fx.wait_state(id, to_string(st::wait_process_recover_status));
  CHECK(agent.report_recover_status(0, "recover").code() == 0);
  fx.wait_state(id, "INIT");
}

bool same_incidents(const pi::ListIncidentsResponse& x,
                    const pi::ListIncidentsResponse& y) {
  if (x.incidents_size() != y.incidents_size())
    return false;
  for (int i = 0; i < x.incidents_size(); ++i)
    if (!MessageDifferencer::Equals(x.incidents(i), y.incidents(i)))
      return false;
  return true;
}

} // namespace

TEST_CASE("retention: a live job's old events go, its incidents stay, and "
          "a restart replays it from its snapshot") {
  retention_fixture fx;
  fx.put("job");
  fx.put("other");
  pi::ListIncidentsResponse before;
  uint64_t cut = 0;
  {
    agent::client agent{fx.daemon->address(), "job"};
    test::attach_agent(fx, agent, "job");
    MESSAGE("one recovery at t0");
    recover_once(fx, agent, "job");
    before = fx.incidents("job");
    REQUIRE(before.incidents_size() == 1);
    CHECK(before.incidents(0).outcome() == "recover-success");
    MESSAGE("a sweep now removes nothing: nothing is older than 1 h");
    auto none = fx.purge();
    CHECK(none.live_events == 0);
    MESSAGE("two hours later one more event, and a sweep");
    *fx.now += 2 * hour;
    fx.annotate("job", "k", "v");
    cut = fx.get("job").seq();
    auto stats = fx.purge();
    CHECK(stats.live_jobs == 1);
    CHECK(stats.live_events == cut - 1);
    CHECK(stats.incidents == 1);
    MESSAGE("the incident is still listed, the same");
    auto after = fx.incidents("job");
    CHECK(same_incidents(after, before));
    CHECK(after.lastseq() == cut);
    MESSAGE("events start at the first kept one");
    auto page = fx.events("job", 1);
    CHECK(page.firstseq() == cut);
    REQUIRE(page.events_size() == 1);
    CHECK(page.events(0).seq() == cut);
    auto other = fx.events("other", 1);
    CHECK(other.firstseq() == 1);
    CHECK(other.events_size() == 1); // no snapshot before t0 + 1 h: kept
    MESSAGE("a state before it is OUT_OF_RANGE naming that seq");
    pi::JobAt at;
    auto st = fx.at("job", 1, at);
    CHECK(st.error_code() == grpc::StatusCode::OUT_OF_RANGE);
    CHECK(st.error_message().find("seq " + std::to_string(cut))
          != std::string::npos);
    REQUIRE(fx.at("job", cut, at).ok());
    CHECK(at.seq() == cut);
    MESSAGE("HTTP lists the incident too; /metrics counts the removal");
    auto res = fx.http->Get("/api/v1/jobs/job/incidents");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(json::parse(res->body)["incidents"].size() == 1);
    auto res_at = fx.http->Get("/api/v1/jobs/job/at?seq=1");
    REQUIRE(res_at);
    CHECK(res_at->status == 400);
    CHECK(fx.metrics().find("\nrecoverd_retention_purged_events_total{job="
                            "\"live\"} "
                            + std::to_string(cut - 1) + "\n")
          != std::string::npos);
  }
  auto state_before = fx.get("job").state();
  auto metrics_before = fx.metrics();
  MESSAGE("restart, replaying every job: from the snapshot");
  fx.dormant_start = false;
  fx.restart();
  CHECK(fx.daemon->replayed().from_snapshot >= 1);
  CHECK(fx.daemon->replayed().dormant == 0);
  auto state_after = fx.get("job").state();
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  CHECK_MESSAGE(d.Compare(state_before, state_after), diff);
  MESSAGE("restart after the clean stop: the job is dormant, then replayed "
          "from the snapshot when asked for");
  fx.dormant_start = true;
  fx.restart();
  CHECK(fx.daemon->replayed().dormant == fx.daemon->replayed().jobs);
  CHECK(fx.daemon->replayed().jobs >= 1);
  CHECK(fx.daemon->replayed().events == 0);
  state_after = fx.get("job").state();
  CHECK_MESSAGE(d.Compare(state_before, state_after), diff);
  CHECK(same_incidents(fx.incidents("job"), before));
  CHECK(fx.events("job", 1).firstseq() == cut);
  MESSAGE("the figures of /metrics do not change with the retention");
  auto finished = [](const std::string& text) {
    std::string lines;
    for (const auto* name :
         {"\nrecoverd_flows_finished_total{", "\nrecoverd_jobs ",
          "\nrecoverd_jobs_registered ", "\nrecoverd_flow_duration_seconds_",
          "\nrecoverd_incident_time_lost_seconds_", "\nrecoverd_incidents{",
          "\nrecoverd_fleet_mttr_seconds ",
          "\nrecoverd_fleet_time_lost_seconds "}) {
      for (auto i = text.find(name); i != std::string::npos;
           i = text.find(name, i + 1))
        lines += text.substr(i, text.find('\n', i + 1) - i);
    }
    return lines;
  };
  CHECK(finished(fx.metrics()) == finished(metrics_before));
  CHECK(finished(metrics_before).find("recoverd_flows_finished_total{")
        != std::string::npos);
  CHECK(finished(metrics_before)
          .find("recoverd_incident_time_lost_seconds_count{cause=\"agent-"
                "report\"} 1")
        != std::string::npos);
}

TEST_CASE("incidents: a repeated ListIncidents reads only the events "
          "appended since; a purge or a job put again after its history "
          "went starts it over") {
  retention_fixture fx;
  fx.put("job");
  agent::client agent{fx.daemon->address(), "job"};
  test::attach_agent(fx, agent, "job");
  recover_once(fx, agent, "job");
  auto first = fx.incidents("job");
  REQUIRE(first.incidents_size() == 1);
  MESSAGE("the first ask reads the job's every event");
  CHECK(fx.incident_events_read() == first.lastseq());
  MESSAGE("asked again with nothing new: the same, nothing read");
  CHECK(same_incidents(fx.incidents("job"), first));
  CHECK(fx.incident_events_read() == first.lastseq());
  MESSAGE("one more recovery: only its events are read");
  recover_once(fx, agent, "job");
  auto second = fx.incidents("job");
  REQUIRE(second.incidents_size() == 2);
  CHECK(MessageDifferencer::Equals(second.incidents(0), first.incidents(0)));
  CHECK(second.incidents(1).outcome() == "recover-success");
  CHECK(fx.incident_events_read() == second.lastseq());
  MESSAGE("a fresh inspector (after a restart) folds the same");
  fx.restart();
  CHECK(same_incidents(fx.incidents("job"), second));
  auto read = fx.incident_events_read();
  CHECK(read == second.lastseq());
  MESSAGE("a purge moves the first event: folded again from it, the same "
          "incidents (kept ones first)");
  *fx.now += 2 * hour;
  fx.annotate("job", "k", "v");
  auto stats = fx.purge();
  REQUIRE(stats.live_events > 0);
  auto purged = fx.incidents("job");
  CHECK(same_incidents(purged, second));
  auto stored = purged.lastseq() - stats.live_events;
  CHECK(fx.incident_events_read() == read + stored);
  MESSAGE("a job asked for, deleted, its history removed and put again "
          "under the same id: its seqs start over, and so does the fold");
  fx.put("other");
  auto before = fx.incidents("other");
  CHECK(before.incidents_size() == 0);
  read = fx.incident_events_read();
  fx.remove("other");
  *fx.now += 2 * hour;
  auto gone = fx.purge();
  REQUIRE(gone.jobs == 1);
  fx.put("other");
  auto again = fx.incidents("other");
  CHECK(again.incidents_size() == 0);
  REQUIRE(again.lastseq() == before.lastseq());
  CHECK(fx.incident_events_read() == read + again.lastseq());
}

TEST_CASE("inspector: a job put again after its history went counts from its "
          "new first event") {
  retention_fixture fx;
  fx.put("keep");
  fx.put("other");
  fx.annotate("other", "k", "v");
  auto jobs_line = [&] {
    auto m = fx.metrics();
    auto at = m.find("\nrecoverd_jobs ");
    REQUIRE(at != std::string::npos);
    return m.substr(at + 1, m.find('\n', at + 1) - at - 1);
  };
  CHECK(jobs_line() == "recoverd_jobs 2");
  MESSAGE("deleted, its history removed: one job left");
  fx.remove("other");
  CHECK(jobs_line() == "recoverd_jobs 1");
  *fx.now += 2 * hour;
  REQUIRE(fx.purge().jobs == 1);
  MESSAGE("put again under the same id: its seqs start over at 1, below "
          "those of its old life the inspector folded");
  fx.put("other");
  CHECK(fx.events("other", 1).lastseq() == 1);
  CHECK(jobs_line() == "recoverd_jobs 2");
  pi::GetStatsRequest req;
  req.set_jobid("other");
  pi::StatsResponse resp;
  auto c = fx.ctx();
  auto st = fx.inspect->GetStats(c.get(), req, &resp);
  CHECK_MESSAGE(st.ok(), st.error_message());
  MESSAGE("and a fresh inspector (after a restart) agrees");
  fx.restart();
  CHECK(jobs_line() == "recoverd_jobs 2");
}

TEST_CASE("inspector: a clean stop stores every job's fold; the next start "
          "takes them up and reads only the events after them") {
  retention_fixture fx;
  fx.put("job");
  fx.put("other");
  fx.annotate("other", "k", "v");
  {
    agent::client agent{fx.daemon->address(), "job"};
    test::attach_agent(fx, agent, "job");
    recover_once(fx, agent, "job");
  }
  auto before = fx.metrics();
  auto incidents_before = fx.incidents("job");
  REQUIRE(incidents_before.incidents_size() == 1);
  CHECK(fx.inspector_counter("restored") == 0);
  const auto other_events = fx.get("other").seq();
  MESSAGE("a clean stop, then a start: both folds taken up, no event read");
  fx.restart();
  // The figures ask for the first fold.
  auto after = fx.metrics();
  CHECK(fx.inspector_counter("restored") == 2);
  CHECK(fx.inspector_counter("first_fold_events") == 0);
  auto figures = [](const std::string& text) {
    std::string lines;
    for (const auto* name :
         {"\nrecoverd_flows_finished_total{", "\nrecoverd_jobs ",
          "\nrecoverd_jobs_registered ", "\nrecoverd_flow_duration_seconds_",
          "\nrecoverd_incident_time_lost_seconds_", "\nrecoverd_incidents{",
          "\nrecoverd_fleet_mttr_seconds "}) {
      for (auto i = text.find(name); i != std::string::npos;
           i = text.find(name, i + 1))
        lines += text.substr(i, text.find('\n', i + 1) - i);
    }
    return lines;
  };
  CHECK(figures(after) == figures(before));
  CHECK(figures(before).find("recoverd_flows_finished_total{")
        != std::string::npos);
  CHECK(figures(before).find("recoverd_jobs_registered 1")
        != std::string::npos);
  CHECK(same_incidents(fx.incidents("job"), incidents_before));
  MESSAGE("two more events and a clean stop; then one written behind the "
          "daemon's back, as a later run that crashed leaves it: the next "
          "start takes up both folds and reads that one event");
  fx.annotate("other", "k", "w");
  fx.annotate("other", "k", "x");
  fx.daemon->stop();
  fx.daemon.reset();
  {
    storage::event_log_options opts;
    opts.path = fx.dir / "db";
    auto log = storage::event_log::open(opts);
    REQUIRE(log);
    auto seq = other_events + 3;
    event ev{seq, t0, job_registered{"agent"}};
    REQUIRE_FALSE((*log)->append({{"other", seq, storage::encode_event(ev)}}));
  }
  fx.start();
  fx.metrics();
  CHECK(fx.inspector_counter("restored") == 2);
  CHECK(fx.inspector_counter("first_fold_events") == 1);
  CHECK(fx.metrics().find("\nrecoverd_jobs_registered 2\n")
        != std::string::npos);
}

TEST_CASE("inspector: the folds that changed are stored every interval, "
          "without a stop") {
  retention_fixture fx;
  fx.store_interval = 100ms;
  fx.restart();
  fx.put("job");
  fx.put("other");
  fx.annotate("other", "k", "v");
  const auto seq = fx.get("other").seq();
  auto stored_seq = [&](const std::string& id) -> uint64_t {
    storage::event_log::reader reader{fx.daemon->log()};
    auto h = reader.history(id);
    REQUIRE(h);
    return *h ? (*h)->seq : 0;
  };
  CHECK(test::eventually(
    [&] { return stored_seq("other") == seq && stored_seq("job") == 1; }));
  CHECK(test::eventually([&] { return fx.inspector_counter("unsaved") == 0; }));
  CHECK(fx.inspector_counter("stored") >= 2);
  CHECK(fx.inspector_counter("store_failures") == 0);
  MESSAGE("a job that changes is stored again at its new last event");
  fx.annotate("other", "k", "w");
  CHECK(test::eventually([&] { return stored_seq("other") == seq + 1; }));
  CHECK(stored_seq("job") == 1);
}
