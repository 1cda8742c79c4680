#include <doctest/doctest.h>

#include <numeric>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "actors/job_registry.hpp"
#include "actors/journal.hpp"
#include "actors/log.hpp"
#include "actors/node_registry.hpp"
#include "fixtures/actor_fixture.hpp"
#include "fixtures/eventually.hpp"
#include "fixtures/jobs.hpp"
#include "fixtures/log_capture.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/node_codec.hpp"
#include "storage/replay.hpp"

using namespace recoverd;

namespace {

using signal_sink = test::recording_sink<process_signal>;
using annotations_sink = test::recording_sink<annotations_view>;

/// A registry over a real event log in a temp dir, all on the test thread.
struct registry_fixture : test::actor_fixture {
  test::temp_dir dir;
  std::unique_ptr<storage::event_log> log;
  journal_actor journal_hdl;
  job_registry_actor registry;
  int64_t now = 1'700'000'000'000;

  registry_fixture() {
    open();
    start({}, {});
  }

  ~registry_fixture() override {
    stop();
  }

  void open() {
    storage::event_log_options opts;
    opts.path = dir / "db";
    auto x = storage::event_log::open(opts);
    REQUIRE(x);
    log = std::move(*x);
  }

  registry_config config(size_t max_jobs = 100) {
    registry_config cfg;
    cfg.max_jobs = max_jobs;
    cfg.job.waits.keepalive = std::chrono::seconds(5);
    cfg.job.snapshot_every = 3;
    cfg.job.clock = [this] { return now; };
    cfg.retention = std::chrono::hours{1};
    return cfg;
  }

  /// Checks that listing `after` shows the jobs of `before`, line by line,
  /// as they were (the subscription aside).
  static void same_listing(const std::vector<job_summary>& after,
                           const std::vector<job_summary>& before) {
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      CHECK(after[i].job_id == before[i].job_id);
      CHECK(after[i].ns == before[i].ns);
      CHECK(after[i].name == before[i].name);
      CHECK(after[i].registered == before[i].registered);
      CHECK(after[i].recovery_state == before[i].recovery_state);
      CHECK(after[i].pods == before[i].pods);
      CHECK(after[i].ranks == before[i].ranks);
      CHECK(after[i].last_seq == before[i].last_seq);
    }
  }

  /// Whether firing the due timers moves job `id` to another state.
  bool timers_move(const std::string& id) {
    auto before = request<job_status>(registry, get_atom::value, id);
    fire_timers();
    auto after = request<job_status>(registry, get_atom::value, id);
    return after.recovery_state != before.recovery_state;
  }

  /// Whether a restart leaves dormant the jobs that may stay so, their
  /// digests current or not, and stores the digests it computed (as the
  /// daemon does); otherwise only a clean stop's digests leave jobs dormant.
  bool dormant_start = false;

  void start(std::vector<initial_job> initial, std::vector<deleted_job> deleted,
             size_t max_jobs = 100, std::vector<job_digest> dormant = {}) {
    journal_config jc;
    jc.retry_interval = millis{0}; // resume at the next append
    journal_hdl = sys().spawn(recoverd::journal, log.get(), jc);
    registry = sys().spawn(job_registry, config(max_jobs), journal_hdl,
                           std::move(initial), std::move(dormant),
                           std::move(deleted),
                           static_cast<const storage::event_log*>(log.get()));
    run();
  }

  void stop() {
    if (registry)
      self->send_exit(registry, caf::exit_reason::user_shutdown);
    if (journal_hdl)
      self->send_exit(journal_hdl, caf::exit_reason::user_shutdown);
    registry = nullptr;
    journal_hdl = nullptr;
    run();
  }

  /// Stops the actors, replays the log, and starts again (a daemon restart).
  /// With `digests`, a clean stop: the jobs' digests are stored first, and
  /// the jobs they still describe start dormant.
  void restart(size_t max_jobs = 100, bool digests = false) {
    if (digests)
      stored_digests = request<uint64_t>(registry, digest_atom::value);
    stop();
    auto all = storage::replay_all(*log, 0, digests || dormant_start);
    REQUIRE(all);
    std::vector<initial_job> jobs;
    for (auto& j : all->live)
      jobs.push_back({j.state, j.tail});
    dormant_at_start = all->dormant.size();
    folded_dormant_at_start = all->fresh_digests.size();
    start(std::move(jobs), all->deleted, max_jobs, std::move(all->dormant));
    if (!all->fresh_digests.empty())
      stored_digests = request<uint64_t>(journal_hdl, digest_atom::value,
                                         std::move(all->fresh_digests));
  }

  /// Digests the last `restart(..., true)` stored (or the last restart
  /// with `dormant_start`), the jobs it left dormant, and how many of those
  /// it folded for want of a current digest.
  uint64_t stored_digests = 0;
  size_t dormant_at_start = 0;
  size_t folded_dormant_at_start = 0;

  put_result put(const job_spec& spec) {
    return request<put_result>(registry, put_atom::value, spec);
  }

  biz_status init(const std::string& id) {
    return request<biz_status>(registry, init_atom::value,
                               client_info{id, "taskd", "test"});
  }

  biz_status reg(const std::string& id) {
    return request<biz_status>(registry, register_atom::value,
                               client_info{id, "taskd", "test"});
  }

  /// Sets annotation "k" of job `id` to `value`, as the platform.
  void annotate_k(const std::string& id, const std::string& value) {
    request<annotations_view>(registry, annotate_atom::value, id,
                              string_map{{"k", value}},
                              std::vector<std::string>{},
                              std::string{"platform"});
  }

  std::shared_ptr<signal_sink> subscribe(const std::string& id) {
    auto sink = std::make_shared<signal_sink>();
    request<ok_atom>(registry, subscribe_atom::value,
                     client_info{id, "taskd", "test"},
                     signal_sink_ptr{sink});
    return sink;
  }

  /// Puts, inits and registers job `id`; returns its agent stream.
  std::shared_ptr<signal_sink> registered(const std::string& id) {
    put(test::make_job(id));
    init(id);
    reg(id);
    return subscribe(id);
  }

  biz_status report(const std::string& id, flow_input in) {
    return request<biz_status>(registry, report_atom::value,
                               client_info{id, "", "test"}, std::move(in));
  }

  /// Reports a fault of `ranks` of job `id`, whose agent stream is `agent`;
  /// returns the uuid of the flow it starts (or joins).
  std::string fault(const std::string& id, signal_sink& agent,
                    std::vector<fault_rank> ranks) {
    flow_input in;
    in.kind = report_kind::process;
    in.faults = std::move(ranks);
    CHECK(report(id, in).code == 0);
    REQUIRE_FALSE(agent.items.empty());
    return agent.items.back().uuid;
  }

  /// A flow of job `id` that stop-complete 404 kills; returns its uuid.
  std::string killed_flow(const std::string& id, signal_sink& agent) {
    auto uuid = fault(id, agent, {{"8", "1"}});
    flow_input stop;
    stop.kind = report_kind::stop;
    stop.report.code = 404;
    CHECK(report(id, stop).code == 0);
    return uuid;
  }

  std::vector<std::string> event_kinds(const std::string& id) {
    auto xs = log->read(id, 1, 1000);
    REQUIRE(xs);
    std::vector<std::string> result;
    for (const auto& x : *xs) {
      auto ev = storage::decode_event(x.bytes);
      REQUIRE(ev);
      result.emplace_back(kind_name(ev->body));
    }
    return result;
  }
};

} // namespace

TEST_CASE_FIXTURE(registry_fixture, "put, get, list, and every change is an "
                                    "event in the log") {
  auto created = put(test::make_job("b"));
  CHECK(created.created);
  CHECK(created.job.last_seq == 1);
  CHECK(created.job.created_at_ms == now);
  auto updated = put(test::make_job("b"));
  CHECK_FALSE(updated.created);
  put(test::make_job("a"));
  auto status = request<job_status>(registry, get_atom::value, std::string{"b"});
  CHECK(status.spec.pods.size() == 2);
  CHECK(status.last_seq == 2);
  auto list = request<std::vector<job_summary>>(registry, list_atom::value,
                                                std::string{});
  REQUIRE(list.size() == 2);
  CHECK(list[0].job_id == "a");
  CHECK(list[1].job_id == "b");
  CHECK(list[1].ranks == 16);
  auto other_ns = request<std::vector<job_summary>>(
    registry, list_atom::value, std::string{"elsewhere"});
  CHECK(other_ns.empty());
  auto err = request_error<job_status>(registry, get_atom::value,
                                       std::string{"nope"});
  CHECK(errc_of(err) == errc::unknown_job);
  CHECK(event_kinds("b") == std::vector<std::string>{"job_put", "job_put"});
}

TEST_CASE_FIXTURE(registry_fixture, "an invalid spec is refused and creates "
                                    "nothing") {
  auto spec = test::make_job("x");
  spec.pods[1].devices[0].rank_id = "0";
  auto err = request_error<put_result>(registry, put_atom::value, spec);
  CHECK(errc_of(err) == errc::invalid_argument);
  auto list = request<std::vector<job_summary>>(registry, list_atom::value,
                                                std::string{});
  CHECK(list.empty());
  CHECK(event_kinds("x").empty());
}

TEST_CASE_FIXTURE(registry_fixture, "Init and Register: reference codes") {
  CHECK(init("ghost").code == 502);
  CHECK(reg("ghost").code == 408);
  put(test::make_job("j"));
  CHECK(reg("j").code == 408);
  CHECK(init("j").code == 0);
  auto ok = reg("j");
  CHECK(ok.code == 0);
  CHECK(ok.info == "register success");
  CHECK(reg("j").code == 0);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.registered);
  CHECK(status.process_recover_label == "on");
  CHECK(event_kinds("j")
        == std::vector<std::string>{"job_put", "job_inited", "job_registered"});
}

TEST_CASE_FIXTURE(registry_fixture, "the job cap refuses new jobs and, after "
                                    "a restart with a lower cap, "
                                    "registrations") {
  put(test::make_job("a"));
  put(test::make_job("b"));
  CHECK(init("a").code == 0);
  CHECK(init("b").code == 0);
  CHECK(reg("a").code == 0);
  restart(1);
  auto err = request_error<put_result>(registry, put_atom::value,
                                       test::make_job("c"));
  CHECK(errc_of(err) == errc::job_cap_reached);
  auto refused = reg("b");
  CHECK(refused.code == 500);
  CHECK(refused.info == "out of max serve jobs, reuse registry for jobId=b");
  MESSAGE("an already registered job still answers 0");
  CHECK(reg("a").code == 0);
}

TEST_CASE_FIXTURE(registry_fixture, "subscribe: keep-alives, take-over, and "
                                    "a client that goes away") {
  put(test::make_job("j"));
  auto err = request_error<ok_atom>(
    registry, subscribe_atom::value, client_info{"j", "t", ""},
    signal_sink_ptr{std::make_shared<signal_sink>()});
  CHECK(errc_of(err) == errc::not_registered);
  CHECK(message_of(err) == "jobId=j not registed");
  init("j");
  reg("j");
  auto first = subscribe("j");
  CHECK(first->items.empty());
  fire_timers();
  REQUIRE(first->items.size() == 1);
  CHECK(first->items[0].signal_type == "keep-alive");
  CHECK(first->items[0].job_id == "j");
  CHECK(first->items[0].uuid.empty());
  fire_timers();
  CHECK(first->items.size() == 2);
  MESSAGE("a second subscriber takes over; the first ends with OK");
  auto second = subscribe("j");
  CHECK(first->finished);
  CHECK_FALSE(first->final_error);
  fire_timers();
  CHECK(first->items.size() == 2);
  CHECK(second->items.size() == 1);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.subscribed);
  CHECK(status.recovery_state == "INIT");
  MESSAGE("the client goes away");
  second->client_gone();
  run();
  status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK_FALSE(status.subscribed);
  CHECK(event_kinds("j")
        == std::vector<std::string>{"job_put", "job_inited", "job_registered",
                                    "subscriber_attached",
                                    "subscriber_detached",
                                    "subscriber_attached",
                                    "subscriber_detached"});
}

TEST_CASE_FIXTURE(registry_fixture, "a fault joining a wait arms no second "
                                    "timer; the wait's own timer still ends it") {
  put(test::make_job("j"));
  init("j");
  reg("j");
  auto agent = subscribe("j");
  auto report = [&](const std::string& rank) {
    flow_input in;
    in.kind = report_kind::process;
    in.faults = {{rank, "1"}};
    return request<biz_status>(registry, report_atom::value,
                               client_info{"j", "", "test"}, std::move(in));
  };
  CHECK(report("0").code == 0);
  REQUIRE(agent->items.size() == 1);
  CHECK(agent->items[0].signal_type == "stopTrain");
  auto waiting = request<job_status>(registry, get_atom::value, std::string{"j"});
  auto timers = sched.clock().schedule().size();
  for (auto rank : {"1", "2", "3"})
    CHECK(report(rank).code == 0);
  CHECK(sched.clock().schedule().size() == timers);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.recovery_state == waiting.recovery_state);
  CHECK(status.last_seq == waiting.last_seq + 3);
  MESSAGE("the wait's timer fires and moves the flow on (the stop signal's "
          "timer, due first, arms it when it fires)");
  for (int i = 0; i < 2 && status.recovery_state == waiting.recovery_state;
       ++i) {
    fire_timers();
    status = request<job_status>(registry, get_atom::value, std::string{"j"});
  }
  CHECK(status.recovery_state != waiting.recovery_state);
}

TEST_CASE_FIXTURE(registry_fixture,
                  "flow timers do not pile up: waits that "
                  "end before their deadline leave a timer "
                  "on its way, not one each") {
  auto agent = registered("j");
  auto idle = sched.clock().schedule().size(); // the keep-alive
  // Each flow waits for the stop signal to be read, then for stop-complete
  // (15 minutes), and ends at once: the timers of both waits used to stay
  // in memory until due.
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(killed_flow("j", *agent).empty());
    now += 1000;
  }
  CHECK(sched.clock().schedule().size() <= idle + 1);
  MESSAGE("a later wait still ends at its deadline: the timer due first arms "
          "it");
  fault("j", *agent, {{"0", "1"}});
  auto waiting
    = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(waiting.recovery_state != "INIT");
  auto status = waiting;
  for (int i = 0; i < 3 && status.recovery_state == waiting.recovery_state;
       ++i) {
    fire_timers();
    status = request<job_status>(registry, get_atom::value, std::string{"j"});
  }
  CHECK(status.recovery_state != waiting.recovery_state);
}

TEST_CASE_FIXTURE(registry_fixture, "annotation watchers see the current view "
                                    "and every change") {
  put(test::make_job("j"));
  auto sink = std::make_shared<annotations_sink>();
  request<ok_atom>(registry, watch_atom::value, std::string{"j"},
                   annotations_sink_ptr{sink});
  REQUIRE(sink->items.size() == 1);
  CHECK(sink->items[0].annotations.empty());
  auto view = request<annotations_view>(
    registry, annotate_atom::value, std::string{"j"},
    string_map{{"ProcessRecoverStrategy", "recover"}},
    std::vector<std::string>{}, std::string{"platform"});
  CHECK(view.annotations.at("ProcessRecoverStrategy") == "recover");
  REQUIRE(sink->items.size() == 2);
  CHECK(sink->items[1].annotations.at("ProcessRecoverStrategy") == "recover");
  init("j");
  reg("j");
  REQUIRE(sink->items.size() == 3);
  CHECK(sink->items[2].process_recover_label == "on");
  MESSAGE("no change, no message");
  request<annotations_view>(registry, annotate_atom::value, std::string{"j"},
                            string_map{{"ProcessRecoverStrategy", "recover"}},
                            std::vector<std::string>{},
                            std::string{"platform"});
  CHECK(sink->items.size() == 3);
  auto got = request<annotations_view>(registry, get_atom::value,
                                       annots_atom::value, std::string{"j"});
  CHECK(got.annotations.size() == 1);
}

TEST_CASE_FIXTURE(registry_fixture, "delete ends streams; Register then "
                                    "answers 402; a re-put continues the "
                                    "sequence") {
  put(test::make_job("j"));
  init("j");
  reg("j");
  auto agent = subscribe("j");
  auto watcher = std::make_shared<annotations_sink>();
  request<ok_atom>(registry, watch_atom::value, std::string{"j"},
                   annotations_sink_ptr{watcher});
  auto seq = request<uint64_t>(registry, delete_atom::value, std::string{"j"});
  CHECK(seq == 6);
  CHECK(agent->finished);
  CHECK_FALSE(agent->final_error);
  CHECK(watcher->finished);
  CHECK(errc_of(request_error<job_status>(registry, get_atom::value,
                                          std::string{"j"}))
        == errc::unknown_job);
  CHECK(reg("j").code == 402);
  CHECK(init("j").code == 502);
  CHECK(errc_of(request_error<uint64_t>(registry, delete_atom::value,
                                        std::string{"j"}))
        == errc::unknown_job);
  auto again = put(test::make_job("j"));
  CHECK(again.created);
  CHECK(again.job.last_seq == 7);
  CHECK_FALSE(again.job.registered);
  MESSAGE("and after a restart the same holds");
  restart();
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.last_seq == 7);
}

TEST_CASE_FIXTURE(registry_fixture, "a restart rebuilds jobs, annotations "
                                    "and registrations from the log") {
  auto spec = test::make_job("j");
  spec.annotations = {{"a", "1"}};
  put(spec);
  init("j");
  reg("j");
  subscribe("j");
  request<annotations_view>(registry, annotate_atom::value, std::string{"j"},
                            string_map{{"b", "2"}}, std::vector<std::string>{},
                            std::string{"platform"});
  auto before = request<job_status>(registry, get_atom::value, std::string{"j"});
  restart();
  auto after = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(after.last_seq == before.last_seq);
  CHECK(after.registered);
  CHECK(after.inited);
  CHECK_FALSE(after.subscribed);
  CHECK(after.spec.annotations == string_map{{"a", "1"}, {"b", "2"}});
  CHECK(after.spec.pods.size() == before.spec.pods.size());
  CHECK(reg("j").code == 0);
  MESSAGE("snapshots were written (every 3 events) and replay used one");
  auto snap = log->snapshot("j");
  REQUIRE(snap);
  CHECK(snap->has_value());
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->from_snapshot);
  CHECK(replayed->events_replayed < after.last_seq);
  CHECK(replayed->state.seq == after.last_seq);
  MESSAGE("a new subscription continues the generation count");
  auto sink = subscribe("j");
  fire_timers();
  CHECK(sink->items.size() == 1);
}

TEST_CASE_FIXTURE(registry_fixture, "a storage failure is reported, changes "
                                    "nothing, refuses changes while it lasts "
                                    "and is not sticky") {
  put(test::make_job("j"));
  log->inject_write_failure("Input/output error");
  auto err = request_error<biz_status>(registry, init_atom::value,
                                       client_info{"j", "t", ""});
  CHECK(errc_of(err) == errc::storage_failure);
  CHECK(message_of(err).find("Input/output error") != std::string::npos);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK_FALSE(status.inited);
  CHECK(status.last_seq == 1);
  MESSAGE("while the cause lasts, every change is refused");
  err = request_error<put_result>(registry, put_atom::value,
                                  test::make_job("k"));
  CHECK(errc_of(err) == errc::storage_failure);
  CHECK(errc_of(request_error<job_status>(registry, get_atom::value,
                                          std::string{"k"}))
        == errc::unknown_job);
  auto stats = request<journal_stats>(journal_hdl, status_atom::value);
  CHECK_FALSE(stats.failure.empty());
  CHECK(stats.resumed == 0);
  MESSAGE("once the disk recovers, the journal resumes and writes again");
  log->inject_write_failure("");
  put(test::make_job("k"));
  CHECK(request<job_status>(registry, get_atom::value, std::string{"k"})
          .last_seq
        == 1);
  CHECK(request<biz_status>(registry, init_atom::value,
                            client_info{"j", "t", ""})
          .code
        == 0);
  stats = request<journal_stats>(journal_hdl, status_atom::value);
  CHECK(stats.failure.empty());
  CHECK(stats.resumed == 1);
  MESSAGE("nothing refused reached the log; what was acknowledged is there");
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->state.seq == 2);
  CHECK(replayed->state.inited);
}

TEST_CASE_FIXTURE(registry_fixture, "the journal groups concurrent appends "
                                    "into one write") {
  std::vector<caf::typed_response_promise<uint64_t>> unused;
  for (int i = 0; i < 10; ++i)
    self->send(journal_hdl, append_atom::value,
               std::vector<log_record>{{"job" + std::to_string(i), 1, "x"}},
               std::vector<snapshot_record>{});
  run();
  auto stats = request<journal_stats>(journal_hdl, status_atom::value);
  CHECK(stats.batches == 1);
  CHECK(stats.records == 10);
  CHECK(stats.max_batch == 10);
  CHECK(stats.last_position == 10);
  CHECK(log->last_position() == 10);
}

TEST_CASE_FIXTURE(registry_fixture, "device faults are recorded per job and "
                                    "refused for unknown jobs") {
  put(test::make_job("j", 2, 2));
  request<device_faults_outcome>(
    registry, faults_atom::value,
    job_device_faults{"j", "UnHealthy",
                      {{"n1", "0", {"80E01801"}, "RestartBusiness"}}});
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.health_state == "UnHealthy");
  REQUIRE(status.device_faults.size() == 1);
  auto err = request_error<device_faults_outcome>(
    registry, faults_atom::value, job_device_faults{"zz", "Healthy", {}});
  CHECK(errc_of(err) == errc::unknown_job);
  err = request_error<device_faults_outcome>(
    registry, faults_atom::value, job_device_faults{"j", "Sleepy", {}});
  CHECK(errc_of(err) == errc::invalid_argument);
  MESSAGE("an unknown device is skipped and named, the snapshot recorded");
  auto outcome = request<device_faults_outcome>(
    registry, faults_atom::value,
    job_device_faults{"j", "Healthy", {{"n7", "0", {"X"}, ""}}});
  REQUIRE(outcome.ignored.size() == 1);
  CHECK(outcome.ignored[0].find("\"n7\"") != std::string::npos);
  status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.health_state == "Healthy");
  CHECK(status.device_faults.empty());
}

TEST_CASE_FIXTURE(registry_fixture, "retention: a deleted job's history is "
                                    "removed once it is older than the "
                                    "retention, and then it is forgotten") {
  put(test::make_job("keep"));
  put(test::make_job("j"));
  init("j");
  reg("j");
  auto deleted_at = now;
  auto seq = request<uint64_t>(registry, delete_atom::value, std::string{"j"});
  REQUIRE(seq == 4);
  CHECK(reg("j").code == 402);
  auto purge_now = [&] {
    return request<purge_stats>(registry, purge_atom::value);
  };
  MESSAGE("exactly the retention is not longer ago than the retention");
  now = deleted_at + 3'600'000;
  CHECK(purge_now().jobs == 0);
  CHECK(reg("j").code == 402);
  MESSAGE("a restart keeps the deletion time from the log");
  restart();
  CHECK(reg("j").code == 402);
  now += 1;
  auto stats = purge_now();
  CHECK(stats.jobs == 1);
  CHECK(stats.events == 4);
  CHECK(stats.index_entries == 4);
  CHECK(stats.snapshots == 1); // snapshots every 3 events
  CHECK(reg("j").code == 408);
  auto history = log->read("j", 1, 100);
  REQUIRE(history);
  CHECK(history->empty());
  auto ids = log->job_ids();
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"keep"});
  CHECK(event_kinds("keep") == std::vector<std::string>{"job_put"});
  auto tail = log->tail(1, 100);
  REQUIRE(tail);
  CHECK(tail->size() == 1);
  MESSAGE("nothing left to purge; after a restart the job is still unknown");
  CHECK(purge_now().jobs == 0);
  restart();
  CHECK(reg("j").code == 408);
  CHECK(request<job_status>(registry, get_atom::value, std::string{"keep"})
          .last_seq
        == 1);
  MESSAGE("a new job of that id starts a new history");
  auto again = put(test::make_job("j"));
  CHECK(again.created);
  CHECK(again.job.last_seq == 1);
}

TEST_CASE_FIXTURE(registry_fixture, "retention runs at start-up and then "
                                    "every sweep interval") {
  put(test::make_job("a"));
  put(test::make_job("b"));
  request<uint64_t>(registry, delete_atom::value, std::string{"a"});
  MESSAGE("the daemon is down for two hours");
  now += 2 * 3'600'000;
  restart();
  CHECK(reg("a").code == 408);
  auto a = log->read("a", 1, 10);
  REQUIRE(a);
  CHECK(a->empty());
  MESSAGE("b is deleted now and purged by the hourly sweep after the retention");
  request<uint64_t>(registry, delete_atom::value, std::string{"b"});
  fire_timers(); // an hour passes on the timer, but not on the clock
  CHECK(reg("b").code == 402);
  now += 3'600'001;
  fire_timers();
  CHECK(reg("b").code == 408);
  auto b = log->read("b", 1, 10);
  REQUIRE(b);
  CHECK(b->empty());
}

TEST_CASE_FIXTURE(registry_fixture, "retention: a sweep over more live jobs "
                                    "than one purge step examines reaches "
                                    "every one of them") {
  restart(1000); // a cap above the jobs below
  for (int i = 0; i < 600; ++i)
    put(test::make_job("a" + std::to_string(1000 + i)));
  // Last in id order: only a sweep that went through every step reaches it.
  put(test::make_job("zz"));
  init("zz");
  reg("zz");
  auto annotate = [&](const std::string& value) {
    annotate_k("zz", value);
  };
  annotate("1");
  annotate("2");
  now += 2 * 3'600'000;
  annotate("3"); // seq 6: a snapshot
  auto stats = request<purge_stats>(registry, purge_atom::value);
  CHECK(stats.live_jobs == 1);
  CHECK(stats.live_events == 5);
  auto first = log->first_seq("zz");
  REQUIRE(first);
  CHECK(*first == 6);
}

TEST_CASE_FIXTURE(registry_fixture, "retention: a live job loses its events "
                                    "older than the retention before its "
                                    "latest snapshot and keeps its state "
                                    "across a restart; newer events and jobs "
                                    "without a snapshot lose nothing") {
  auto annotate = [&](const std::string& id, const std::string& value) {
    request<annotations_view>(registry, annotate_atom::value, id,
                              string_map{{"k", value}},
                              std::vector<std::string>{},
                              std::string{"platform"});
  };
  auto purge_now = [&] {
    return request<purge_stats>(registry, purge_atom::value);
  };
  put(test::make_job("j"));
  init("j");
  reg("j");
  annotate("j", "1");
  annotate("j", "2");
  put(test::make_job("nosnap"));
  MESSAGE("nothing is older than the retention yet");
  auto stats = purge_now();
  CHECK(stats.live_jobs == 0);
  CHECK(stats.live_events == 0);
  MESSAGE("two hours later j gets a snapshot (seq 6) and one more event");
  now += 2 * 3'600'000;
  annotate("j", "3");
  annotate("j", "4");
  put(test::make_job("fresh"));
  for (int i = 0; i < 4; ++i)
    annotate("fresh", std::to_string(i));
  auto snap = log->snapshot("j");
  REQUIRE(snap);
  REQUIRE(snap->has_value());
  REQUIRE((*snap)->seq == 6);
  auto before = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(before.last_seq == 7);
  stats = purge_now();
  CHECK(stats.live_jobs == 1);
  CHECK(stats.live_events == 5);
  CHECK(stats.index_entries == 5);
  CHECK(stats.jobs == 0);
  auto first = log->first_seq("j");
  REQUIRE(first);
  CHECK(*first == 6);
  CHECK(event_kinds("nosnap") == std::vector<std::string>{"job_put"});
  CHECK(event_kinds("fresh").size() == 5);
  MESSAGE("a restart replays j from its snapshot");
  restart();
  auto after = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(after.last_seq == before.last_seq);
  CHECK(after.spec.annotations == before.spec.annotations);
  CHECK(after.created_at_ms == before.created_at_ms);
  auto again = request<biz_status>(registry, register_atom::value,
                                   client_info{"j", "taskd", "test"});
  CHECK(again.code == 0);
  annotate("j", "5");
  after = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(after.last_seq == 8);
  MESSAGE("the next sweep finds nothing more to remove");
  stats = purge_now();
  CHECK(stats.live_events == 0);
}

TEST_CASE_FIXTURE(registry_fixture, "snapshots stay every N events across "
                                    "restarts, so the replayed tail stays "
                                    "short") {
  auto annotate = [&](const std::string& value) {
    annotate_k("j", value);
  };
  auto snapshot_seq = [&] {
    auto snap = log->snapshot("j");
    REQUIRE(snap);
    return snap->has_value() ? (*snap)->seq : 0;
  };
  put(test::make_job("j"));
  annotate("2");
  annotate("3");
  CHECK(snapshot_seq() == 3); // every 3 events
  annotate("4");
  annotate("5");
  restart();
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->events_replayed == 2);
  MESSAGE("the third event after the snapshot writes the next one");
  annotate("6");
  CHECK(snapshot_seq() == 6);
  restart();
  replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->from_snapshot);
  CHECK(replayed->events_replayed == 0);
  CHECK(replayed->state.spec.annotations.at("k") == "6");
}


TEST_CASE_FIXTURE(registry_fixture, "a snapshot after a spec change holds "
                                    "the new spec, not the bytes kept from "
                                    "the one before") {
  auto annotate = [&](const std::string& value) {
    annotate_k("j", value);
  };
  auto snapshot = [&] {
    auto snap = log->snapshot("j");
    REQUIRE(snap);
    REQUIRE(snap->has_value());
    auto state = storage::decode_snapshot((*snap)->bytes);
    REQUIRE(state);
    return std::make_pair((*snap)->seq, state->spec.annotations.at("k"));
  };
  put(test::make_job("j"));
  annotate("a");
  init("j"); // seq 3: a snapshot, of events that keep the spec
  CHECK(snapshot() == std::make_pair(uint64_t{3}, std::string{"a"}));
  annotate("b");
  reg("j");
  subscribe("j"); // seq 6: the same, after the spec changed
  CHECK(snapshot() == std::make_pair(uint64_t{6}, std::string{"b"}));
  restart();
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->events_replayed == 0);
  CHECK(replayed->state.spec.annotations.at("k") == "b");
}

TEST_CASE_FIXTURE(registry_fixture, "a large job's snapshots wait until the "
                                    "events since weigh half of one, across "
                                    "restarts") {
  auto annotate = [&](const std::string& value) {
    annotate_k("j", value);
  };
  auto latest = [&] {
    auto snap = log->snapshot("j");
    REQUIRE(snap);
    REQUIRE(snap->has_value());
    return **snap;
  };
  put(test::make_job("j", 128)); // 1,024 ranks
  annotate("2");
  annotate("3");
  MESSAGE("the first snapshot follows the count (every 3 events)");
  auto first = latest();
  REQUIRE(first.seq == 3);
  REQUIRE(first.bytes.size() > small_snapshot_bytes);
  annotate("4");
  annotate("5");
  annotate("6");
  CHECK(latest().seq == 3); // a small job's would be at 6
  restart();
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->tail.events == 3);
  CHECK(replayed->tail.snapshot_bytes == first.bytes.size());
  CHECK(replayed->tail.bytes > 0);
  MESSAGE("after the restart the job still counts those bytes");
  size_t n = 6;
  while (latest().seq == 3 && n < 500)
    annotate(std::to_string(++n));
  auto second = latest().seq;
  REQUIRE(second > 6);
  CHECK(second == n);
  // The events after the first snapshot, up to the one that wrote the next.
  std::vector<uint64_t> sizes;
  auto err = log->for_each("j", 4, [&](uint64_t seq, std::string_view bytes) {
    if (seq <= second)
      sizes.push_back(bytes.size());
    return caf::error{};
  });
  REQUIRE_FALSE(err);
  REQUIRE(sizes.size() == second - 3);
  auto total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  CHECK(total * 2 >= first.bytes.size());
  CHECK((total - sizes.back()) * 2 < first.bytes.size());
}

TEST_CASE_FIXTURE(registry_fixture, "the fleet's node registry: once its "
                                    "table is large, a snapshot waits until "
                                    "the events since weigh half of one") {
  nodes_config cfg;
  cfg.snapshot_every = 4;
  cfg.clock = [this] { return now; };
  auto nodes = sys().spawn(node_registry, initial_nodes{}, cfg, journal_hdl);
  // Every event's size (one per observation: a snapshot removes the events
  // it folds, the one written with it at once), and every snapshot's, by
  // seq.
  std::map<uint64_t, size_t> event_bytes;
  std::map<uint64_t, size_t> snapshot_bytes;
  uint64_t recorded = 0;
  auto fault_on = [&](const std::string& node) {
    node_fault f;
    f.source = node_fault_source::agent_report;
    f.job_id = "j";
    f.device = "3";
    f.codes = {"1"};
    f.time_ms = now;
    node_fault_seen seen{node, std::move(f)};
    event_bytes[++recorded]
      = storage::encode_node_event(node_event{seen}).size();
    caf::anon_send(nodes, observe_atom::value,
                   std::vector<node_observation>{std::move(seen)});
    REQUIRE(test::eventually([&] {
      auto st = request<component_status>(nodes, status_atom::value,
                                          status_verbosity::detailed);
      return st.counters["recorded"] == recorded;
    }));
    auto s = log->read_fleet(storage::node_stream);
    REQUIRE(s);
    for (const auto& e : s->events)
      CHECK(event_bytes[e.seq] == e.bytes.size());
    if (s->snapshot)
      snapshot_bytes[s->snapshot->seq] = s->snapshot->bytes.size();
  };
  for (int i = 0; i < 200; ++i)
    fault_on("node-" + std::to_string(1000 + i));
  self->send_exit(nodes, caf::exit_reason::user_shutdown);
  MESSAGE("every 4 events while the snapshot is up to 4 KiB");
  REQUIRE(snapshot_bytes.size() >= 3);
  auto prev = snapshot_bytes.begin();
  CHECK(prev->first == 4);
  for (auto next = std::next(prev); next != snapshot_bytes.end();
       prev = next++) {
    CAPTURE(prev->first);
    CAPTURE(next->first);
    if (prev->second <= small_snapshot_bytes) {
      CHECK(next->first == prev->first + 4);
      continue;
    }
    MESSAGE("then once the events after it weigh half of it");
    uint64_t total = 0;
    for (auto seq = prev->first + 1; seq <= next->first; ++seq) {
      REQUIRE(event_bytes.count(seq) == 1);
      total += event_bytes[seq];
    }
    CHECK(next->first > prev->first + 4);
    CHECK(total * 2 >= prev->second);
    CHECK((total - event_bytes[next->first]) * 2 < prev->second);
  }
  CHECK(prev->second > small_snapshot_bytes); // the table did grow past it
}

TEST_CASE_FIXTURE(registry_fixture, "log: a finished flow logs one line with "
                                    "its uuid, outcome, strategy, fault "
                                    "ranks and duration; a failed one warns") {
  auto agent = registered("j");
  auto report = [&](flow_input in) { return this->report("j", std::move(in)); };
  auto state = [&] {
    return request<job_status>(registry, get_atom::value, std::string{"j"})
      .recovery_state;
  };
  // Fires timers (the fault flush wait, the HCCL delay) until `to`.
  auto reach = [&](flow_state to) {
    for (int i = 0; i < 5 && state() != to_string(to); ++i)
      fire_timers();
    REQUIRE(state() == to_string(to));
  };
  log_capture logs;
  MESSAGE("a recovery that succeeds: one info line (a normal fault takes "
          "the whole pod: 8 ranks)");
  auto uuid = fault("j", *agent, {{"3", "1"}, {"4", "1"}});
  // The default generator's form: the time in upper-case hex, '-', then 32
  // random lower-case hex digits.
  CHECK(std::regex_match(uuid, std::regex{"[1-9A-F][0-9A-F]*-[0-9a-f]{32}"}));
  now += 1500;
  flow_input stop;
  stop.kind = report_kind::stop;
  CHECK(report(stop).code == 0);
  reach(st::wait_recover_strategy);
  flow_input strategies;
  strategies.kind = report_kind::strategy;
  strategies.strategies = {"recover", "dump"};
  CHECK(report(strategies).code == 0);
  reach(st::wait_process_recover_status);
  CHECK(logs.lines(" ended: ").empty());
  flow_input status;
  status.kind = report_kind::status;
  status.report.strategy = "recover";
  CHECK(report(status).code == 0);
  REQUIRE(state() == to_string(st::init));
  auto ended = logs.lines(" ended: ");
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].find(" info job j flow " + uuid
                      + " ended: outcome recover-success, strategy recover, "
                        "8 fault ranks, 1500 ms")
        != std::string::npos);
  MESSAGE("stop-complete 404 kills the job: one warn line");
  uuid = killed_flow("j", *agent);
  CHECK_FALSE(uuid.empty());
  REQUIRE(state() == to_string(st::init));
  ended = logs.lines(" ended: ");
  REQUIRE(ended.size() == 2);
  CHECK(ended[1].find(" warning job j flow " + uuid
                      + " ended: outcome killed, strategy none, 1 fault "
                        "ranks, 0 ms")
        != std::string::npos);
}

TEST_CASE_FIXTURE(registry_fixture, "log: in JSON, a job's lines have job, "
                                    "uuid and state fields") {
  auto agent = registered("j");
  log_capture logs{"json"};
  auto uuid = killed_flow("j", *agent);
  auto ended = logs.lines(" ended: ");
  REQUIRE(ended.size() == 1);
  auto line = nlohmann::json::parse(ended[0]);
  CHECK(line["level"] == "warning");
  CHECK(line["job"] == "j");
  CHECK(line["uuid"] == uuid);
  CHECK(line["state"] == "INIT");
  CHECK(line["msg"].get<std::string>().find("outcome killed")
        != std::string::npos);
  MESSAGE("a signal's line names the flow and the state it was sent in");
  auto sent = logs.lines("sent killMaster");
  REQUIRE(sent.size() == 1);
  auto sent_line = nlohmann::json::parse(sent[0]);
  CHECK(sent_line["job"] == "j");
  CHECK(sent_line["uuid"] == uuid);
  CHECK(sent_line["state"].get<std::string>() != "INIT");
  MESSAGE("a line of no job has no such fields");
  ES_INFO("a line of no job");
  auto plain = logs.lines("a line of no job");
  REQUIRE(plain.size() == 1);
  CHECK_FALSE(nlohmann::json::parse(plain[0]).contains("job"));
}

TEST_CASE_FIXTURE(registry_fixture, "redeliver: a new agent stream in a wait "
                                    "gets the awaited signal again, same "
                                    "uuid, also after a restart; the flow "
                                    "does not move by itself") {
  auto agent = registered("j");
  auto report = [&](flow_input in) { return this->report("j", std::move(in)); };
  flow_input fault;
  fault.kind = report_kind::process;
  fault.faults = {{"0", "1"}};
  CHECK(report(fault).code == 0);
  REQUIRE(agent->items.size() == 1);
  auto stop = agent->items[0];
  CHECK(stop.signal_type == "stopTrain");
  auto waiting = request<job_status>(registry, get_atom::value, std::string{"j"});
  REQUIRE(waiting.recovery_state == to_string(st::wait_stop_complete));
  auto timers = sched.clock().schedule().size();
  MESSAGE("the agent re-subscribes: stopTrain again, nothing else happens");
  auto second = subscribe("j");
  REQUIRE(second->items.size() == 1);
  CHECK(second->items[0] == stop);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.recovery_state == waiting.recovery_state);
  // Only the take-over was written: no second delivery step.
  auto kinds = event_kinds("j");
  REQUIRE(status.last_seq == waiting.last_seq + 2);
  CHECK(kinds[kinds.size() - 2] == "subscriber_detached");
  CHECK(kinds.back() == "subscriber_attached");
  // The new stream's keep-alive is the one timer added.
  CHECK(sched.clock().schedule().size() == timers + 1);
  MESSAGE("a restart replays it; the next stream gets it too");
  restart();
  auto third = subscribe("j");
  REQUIRE_FALSE(third->items.empty());
  CHECK(third->items[0] == stop);
  status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.recovery_state == waiting.recovery_state);
  MESSAGE("the report it waits for moves the flow on");
  flow_input done;
  done.kind = report_kind::stop;
  CHECK(report(done).code == 0);
  status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.recovery_state != waiting.recovery_state);
  MESSAGE("left the wait: a new stream gets only what is pending now");
  auto fourth = subscribe("j");
  for (const auto& sig : fourth->items)
    CHECK(sig.signal_type != "stopTrain");
}

TEST_CASE_FIXTURE(registry_fixture, "redeliver: a new worker stream of a "
                                    "link switch gets the SwitchRankList "
                                    "again while its result is awaited") {
  using switch_sink = test::recording_sink<switch_rank_list>;
  put(test::make_job("j"));
  init("j");
  reg("j");
  auto agent = subscribe("j");
  auto first = std::make_shared<switch_sink>();
  request<ok_atom>(registry, worker_atom::value, std::string{"j"},
                   switch_sink_ptr{first});
  auto started = request<biz_status>(
    registry, switch_atom::value, std::string{"j"},
    std::vector<nic_op>{{"n0", "0", true}}, std::string{"op"});
  REQUIRE(started.code == 0);
  REQUIRE_FALSE(agent->items.empty());
  CHECK(agent->items.back().signal_type == "stopTrain");
  flow_input paused;
  paused.kind = report_kind::stop;
  CHECK(request<biz_status>(registry, report_atom::value,
                            client_info{"j", "", "test"}, paused)
          .code
        == 0);
  REQUIRE(first->items.size() == 1);
  CHECK(first->items[0].ranks == std::vector<std::string>{"0"});
  auto waiting = request<job_status>(registry, get_atom::value, std::string{"j"});
  REQUIRE(waiting.recovery_state == to_string(st::wait_switch_nic_finished));
  MESSAGE("the worker reconnects: the list again, nothing else happens");
  first->client_gone();
  auto second = std::make_shared<switch_sink>();
  request<ok_atom>(registry, worker_atom::value, std::string{"j"},
                   switch_sink_ptr{second});
  REQUIRE(second->items.size() == 1);
  CHECK(second->items[0].ranks == first->items[0].ranks);
  CHECK(second->items[0].to_backup == first->items[0].to_backup);
  auto status = request<job_status>(registry, get_atom::value, std::string{"j"});
  CHECK(status.recovery_state == waiting.recovery_state);
  CHECK(status.last_seq == waiting.last_seq);
  MESSAGE("the agent stream does not get the worker's list");
  auto again = subscribe("j");
  for (const auto& sig : again->items)
    CHECK(sig.signal_type != "SwitchRankList");
}

// Found by tools/dst --actor: a re-created job started its subscription
// counter at 0 while the log's fold continued it, so generations repeated
// and the live job differed from its replay.
TEST_CASE_FIXTURE(registry_fixture, "a re-created job continues the "
                                    "subscription counter of its deleted "
                                    "history, as its replay does") {
  put(test::make_job("j"));
  init("j");
  reg("j");
  subscribe("j");
  auto before = request<job_inspection>(registry, inspect_atom::value,
                                        std::string{"j"});
  REQUIRE(before.model.subscriber_generation == 1);
  request<uint64_t>(registry, delete_atom::value, std::string{"j"});
  put(test::make_job("j"));
  auto live = request<job_inspection>(registry, inspect_atom::value,
                                      std::string{"j"});
  CHECK(live.model.subscriber_generation == 1);
  auto replayed = storage::replay_job(*log, "j");
  REQUIRE(replayed);
  CHECK(replayed->state.subscriber_generation
        == live.model.subscriber_generation);
  CHECK(replayed->state.seq == live.model.seq);
  init("j");
  reg("j");
  subscribe("j");
  live = request<job_inspection>(registry, inspect_atom::value,
                                 std::string{"j"});
  CHECK(live.model.subscriber_generation == 2);
  CHECK(live.live.generation == 2);
}

TEST_CASE_FIXTURE(registry_fixture, "a clean stop leaves idle jobs dormant; a "
                                    "dormant job is replayed when first asked "
                                    "for") {
  registered("idle");
  auto other = test::make_job("other");
  other.ns = "elsewhere";
  put(other);
  auto busy_agent = registered("busy");
  fault("busy", *busy_agent, {{"0", "1"}}); // a timed wait
  auto summaries = [&](const std::string& ns) {
    return request<std::vector<job_summary>>(registry, list_atom::value, ns);
  };
  auto before = summaries("");
  auto idle_before
    = request<job_status>(registry, get_atom::value, std::string{"idle"});
  REQUIRE(before.size() == 3);
  restart(3, true);
  CHECK(stored_digests == 2); // not "busy": its wait is timed
  CHECK(dormant_at_start == 2);
  auto counters = [&] {
    return request<component_status>(registry, status_atom::value,
                                     status_verbosity::info)
      .counters;
  };
  CHECK(counters().at("jobs") == 3);
  CHECK(counters().at("dormant") == 2);
  MESSAGE("the listing is the same, without the closed streams");
  auto after = summaries("");
  same_listing(after, before);
  for (const auto& x : after)
    CHECK_FALSE(x.subscribed);
  auto elsewhere = summaries("elsewhere");
  REQUIRE(elsewhere.size() == 1);
  CHECK(elsewhere[0].job_id == "other");
  CHECK(counters().at("dormant") == 2); // listing wakes no job
  MESSAGE("dormant jobs count against the cap and keep their registration");
  auto err = request_error<put_result>(registry, put_atom::value,
                                       test::make_job("new"));
  CHECK(errc_of(err) == errc::job_cap_reached);
  CHECK(reg("idle").code == 0);
  CHECK(counters().at("dormant") == 1);
  MESSAGE("the woken job is the one that was stopped");
  auto idle_after
    = request<job_status>(registry, get_atom::value, std::string{"idle"});
  CHECK(idle_after.last_seq == idle_before.last_seq);
  CHECK(idle_after.registered);
  CHECK(idle_after.inited);
  CHECK(idle_after.spec.pods.size() == idle_before.spec.pods.size());
  auto agent = subscribe("idle");
  fire_timers();
  CHECK_FALSE(agent->items.empty());
  MESSAGE("a change to a dormant job continues its sequence");
  auto view = request<annotations_view>(
    registry, annotate_atom::value, std::string{"other"},
    string_map{{"b", "2"}}, std::vector<std::string>{},
    std::string{"platform"});
  CHECK(view.seq == before[2].last_seq + 1);
  CHECK(counters().at("dormant") == 0);
  MESSAGE("the job in a timed wait was replayed at start-up: its timer runs");
  CHECK(timers_move("busy"));
  MESSAGE("deleting a dormant job works as for any job");
  restart(3, true);
  CHECK(dormant_at_start == 3);
  request<uint64_t>(registry, delete_atom::value, std::string{"idle"});
  CHECK(counters().at("jobs") == 2);
  CHECK(reg("idle").code == 402);
}

TEST_CASE_FIXTURE(registry_fixture, "with no current digest (a crash), "
                                    "jobs without a timed wait start dormant, "
                                    "folded for their digest, which start-up "
                                    "stores; asked for, they are replayed") {
  registered("idle");
  auto busy_agent = registered("busy");
  fault("busy", *busy_agent, {{"0", "1"}}); // a timed wait
  auto before
    = request<std::vector<job_summary>>(registry, list_atom::value,
                                        std::string{});
  auto idle_before
    = request<job_status>(registry, get_atom::value, std::string{"idle"});
  auto counters = [&] {
    return request<component_status>(registry, status_atom::value,
                                     status_verbosity::info)
      .counters;
  };
  dormant_start = true;
  restart(); // no digests: every job folded
  CHECK(dormant_at_start == 1);
  CHECK(folded_dormant_at_start == 1);
  CHECK(stored_digests == 1); // "idle"'s, computed at start-up
  CHECK(counters().at("jobs") == 2);
  CHECK(counters().at("dormant") == 1); // "busy" has its actor: a timer
  MESSAGE("the listing from the computed digest is the one before, pods and "
          "ranks included");
  auto after
    = request<std::vector<job_summary>>(registry, list_atom::value,
                                        std::string{});
  same_listing(after, before);
  for (const auto& x : after)
    CHECK(x.pods > 0);
  CHECK(counters().at("dormant") == 1); // listing wakes no job
  MESSAGE("another crash: the stored digest is current, no fold");
  restart();
  CHECK(dormant_at_start == 1);
  CHECK(folded_dormant_at_start == 0);
  MESSAGE("asked for, the dormant job is replayed in full, and runs flows");
  REQUIRE(counters().at("dormant") == 1);
  auto idle_after
    = request<job_status>(registry, get_atom::value, std::string{"idle"});
  CHECK(counters().at("dormant") == 0);
  CHECK(idle_after.last_seq == idle_before.last_seq);
  CHECK(idle_after.registered);
  CHECK(idle_after.inited);
  CHECK(idle_after.spec.pods.size() == idle_before.spec.pods.size());
  auto agent = subscribe("idle");
  fault("idle", *agent, {{"0", "1"}});
  auto faulted
    = request<job_status>(registry, get_atom::value, std::string{"idle"});
  CHECK(faulted.recovery_state != idle_after.recovery_state);
  MESSAGE("the job in a timed wait was spawned: its timer runs");
  CHECK(timers_move("busy"));
}
