// The shared status request (style §15): every long-lived actor answers it,
// the status desk fans it out to all of them, and a component that does not
// answer in time is listed as such instead of failing the request.

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "actors/event_hub.hpp"
#include "actors/historian.hpp"
#include "actors/inspector.hpp"
#include "actors/job_registry.hpp"
#include "actors/journal.hpp"
#include "actors/status_desk.hpp"
#include "fixtures/actor_fixture.hpp"
#include "fixtures/jobs.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;

namespace {

using promises
  = std::vector<caf::typed_response_promise<component_status>>;

/// An event hub that takes status requests and never answers them (their
/// promises wait in `pending`), like a component stuck in a long operation.
event_hub_actor::behavior_type
silent_hub(event_hub_actor::pointer self, std::shared_ptr<promises> pending) {
  return {
    [](publish_atom, std::vector<published_event>&) {
      // nop
    },
    [](watch_atom, std::string&, event_sink_ptr&) { return ok_atom::value; },
    [](status_atom) { return hub_stats{}; },
    [](shutdown_atom) { return ok_atom::value; },
    [=](status_atom, status_verbosity) -> caf::result<component_status> {
      auto rp = self->make_response_promise<component_status>();
      pending->push_back(rp);
      return rp;
    },
  };
}

/// Requests a silent historian holds, unanswered.
struct held_questions {
  std::vector<caf::typed_response_promise<component_status>> status;
  std::vector<caf::typed_response_promise<job_at>> at;
  std::vector<caf::typed_response_promise<incident_list>> incidents;
  std::vector<caf::typed_response_promise<event_page>> events;
};

/// A historian that never answers, as if deep in a long job's post-mortem.
historian_actor::behavior_type
silent_historian(historian_actor::pointer self,
                 std::shared_ptr<held_questions> held) {
  return {
    [=](events_atom, std::string&, uint64_t,
        uint32_t) -> caf::result<event_page> {
      held->events.push_back(self->make_response_promise<event_page>());
      return held->events.back();
    },
    [=](incidents_atom, std::string&) -> caf::result<incident_list> {
      held->incidents.push_back(self->make_response_promise<incident_list>());
      return held->incidents.back();
    },
    [=](at_atom, std::string&, history_point&) -> caf::result<job_at> {
      held->at.push_back(self->make_response_promise<job_at>());
      return held->at.back();
    },
    [=](status_atom, status_verbosity) -> caf::result<component_status> {
      held->status.push_back(self->make_response_promise<component_status>());
      return held->status.back();
    },
  };
}

/// An inspector that never answers, as if deep in its first fold of a huge
/// log: it holds every status request it gets.
inspector_actor::behavior_type
silent_inspector(inspector_actor::pointer self,
                 std::shared_ptr<held_questions> held) {
  auto refused = [] { return make_error(errc::overloaded, "silent"); };
  return {
    [=](list_atom, std::string&) -> caf::result<std::vector<job_view>> {
      return refused();
    },
    [=](get_atom, std::string&) -> caf::result<job_view> { return refused(); },
    [=](metrics_atom) -> caf::result<cluster_stats> { return refused(); },
    [=](goodput_atom, std::string&) -> caf::result<goodput_report> {
      return refused();
    },
    [=](digest_atom, history_atom) -> caf::result<uint64_t> {
      return refused();
    },
    [](history_atom) {
      // nop
    },
    [](sweep_atom) {
      // nop
    },
    [=](status_atom, status_verbosity) -> caf::result<component_status> {
      held->status.push_back(self->make_response_promise<component_status>());
      return held->status.back();
    },
  };
}

/// Which of the fixture's components never answers.
enum class silent { none, hub, historian, inspector };

/// The daemon's long-lived actors over a real event log, on the test thread.
struct status_fixture : test::actor_fixture {
  test::temp_dir dir;
  std::unique_ptr<storage::event_log> log;
  journal_actor journal_hdl;
  job_registry_actor registry;
  event_hub_actor hub;
  historian_actor historian_hdl;
  inspector_actor inspector_hdl;
  status_desk_actor desk_hdl;
  std::shared_ptr<promises> pending = std::make_shared<promises>();
  std::shared_ptr<held_questions> held = std::make_shared<held_questions>();

  /// @param quiet The component that never answers, if any.
  explicit status_fixture(silent quiet = silent::none) {
    storage::event_log_options opts;
    opts.path = dir / "db";
    auto x = storage::event_log::open(opts);
    REQUIRE(x);
    log = std::move(*x);
    journal_hdl = sys().spawn(recoverd::journal, log.get(), journal_config{});
    registry_config cfg;
    cfg.max_jobs = 100;
    cfg.job.clock = [] { return int64_t{1'700'000'000'000}; };
    registry = sys().spawn(job_registry, cfg, journal_hdl,
                           std::vector<initial_job>{},
                           std::vector<job_digest>{},
                           std::vector<deleted_job>{},
                           static_cast<const storage::event_log*>(log.get()));
    if (quiet == silent::hub)
      hub = sys().spawn(silent_hub, pending);
    else
      hub = sys().spawn(event_hub, watcher_gauge{});
    const auto* reader = static_cast<const storage::event_log*>(log.get());
    if (quiet == silent::historian)
      historian_hdl = sys().spawn(silent_historian, held);
    else
      historian_hdl = sys().spawn(recoverd::historian, reader);
    if (quiet == silent::inspector)
      inspector_hdl = sys().spawn(silent_inspector, held);
    else
      inspector_hdl
        = sys().spawn(recoverd::inspector, reader, registry, journal_hdl, hub,
                      std::chrono::milliseconds{0});
    desk_hdl = sys().spawn(status_desk,
                           status_components{registry, journal_hdl, hub,
                                             inspector_hdl, historian_hdl});
    run();
  }

  ~status_fixture() override {
    self->send_exit(desk_hdl, caf::exit_reason::user_shutdown);
    self->send_exit(inspector_hdl, caf::exit_reason::user_shutdown);
    self->send_exit(historian_hdl, caf::exit_reason::user_shutdown);
    self->send_exit(hub, caf::exit_reason::user_shutdown);
    self->send_exit(registry, caf::exit_reason::user_shutdown);
    self->send_exit(journal_hdl, caf::exit_reason::user_shutdown);
    run();
  }

  /// Creates job `id` and, if asked, registers it.
  void put(const std::string& id, bool registered = false) {
    request<put_result>(registry, put_atom::value, test::make_job(id));
    if (registered) {
      REQUIRE(request<biz_status>(registry, init_atom::value,
                                  client_info{id, "taskd", "test"})
                .code
              == 0);
      auto res = request<biz_status>(registry, register_atom::value,
                                     client_info{id, "taskd", "test"});
      REQUIRE(res.code == 0);
    }
  }

  /// The status of one actor through the shared protocol only.
  component_status status(const status_client_actor& hdl,
                          status_verbosity v = status_verbosity::info) {
    return request<component_status>(hdl, status_atom::value, v);
  }

  /// A fan-out that waits on a silent component: sent and run until only
  /// its timeout is left, `meanwhile` called, the timers fired.
  std::vector<component_status>
  fan_out_held(const status_query& q, const std::function<void()>& meanwhile) {
    auto res = self->request(desk_hdl, caf::infinite, status_atom::value, q);
    run();
    meanwhile();
    fire_timers();
    std::vector<component_status> xs;
    res.receive([&](std::vector<component_status>& x) { xs = std::move(x); },
                [](caf::error& err) { FAIL(message_of(err)); });
    return xs;
  }

  std::vector<component_status> fan_out(status_query q) {
    return request<std::vector<component_status>>(desk_hdl,
                                                  status_atom::value, q);
  }
};

std::vector<std::string> names(const std::vector<component_status>& xs) {
  std::vector<std::string> result;
  for (const auto& x : xs)
    result.push_back(x.name);
  return result;
}

} // namespace

TEST_CASE_FIXTURE(status_fixture,
                  "status: every long-lived actor answers the shared request") {
  put("a", true);
  put("b");
  MESSAGE("the registry counts its jobs by state");
  auto reg = status(registry);
  CHECK(reg.name == "job_registry");
  CHECK(reg.kind == "job_registry");
  CHECK(reg.healthy());
  CHECK(reg.counters["jobs"] == 2);
  CHECK(reg.counters["registered"] == 1);
  CHECK(reg.counters["state.INIT"] == 2);
  CHECK(reg.counters["unanswered"] == 0);
  CHECK(reg.counters.count("pendingRegistrations") == 0);
  CHECK(status(registry, status_verbosity::detailed)
          .counters.count("pendingRegistrations")
        == 1);
  MESSAGE("the journal reports what it wrote");
  auto jr = status(journal_hdl);
  CHECK(jr.name == "journal");
  CHECK(jr.healthy());
  CHECK(jr.counters["records"] >= 3);
  CHECK(jr.counters["lastPosition"] == log->last_position());
  CHECK(jr.facts["sync"] == "always");
  MESSAGE("the hub and the inspector");
  auto hs = status(hub);
  CHECK(hs.name == "event_hub");
  CHECK(hs.counters["watchers"] == 0);
  CHECK(hs.counters["published"] == 0); // the journal was given no hub
  auto is = status(inspector_hdl, status_verbosity::detailed);
  CHECK(is.name == "inspector");
  CHECK(is.counters["unfolded"] == log->last_position());
  MESSAGE("the historian, before and after a question of each kind");
  auto hi = status(historian_hdl);
  CHECK(hi.name == "historian");
  CHECK(hi.healthy());
  CHECK(hi.counters["asked"] == 0);
  CHECK(hi.counters["at_events_read"] == 0);
  auto page = request<event_page>(historian_hdl, events_atom::value,
                                  std::string{"a"}, uint64_t{1}, uint32_t{2});
  CHECK(page.events.size() == 2);
  history_point first;
  first.seq = 1;
  auto at = request<job_at>(historian_hdl, at_atom::value, std::string{"a"},
                            first);
  CHECK(at.state.seq == 1);
  CHECK(!at.state.registered);
  auto incidents = request<incident_list>(historian_hdl, incidents_atom::value,
                                          std::string{"a"});
  CHECK(incidents.incidents.empty());
  CHECK(incidents.last_seq == log->last_seq("a").value());
  hi = status(historian_hdl);
  CHECK(hi.counters["asked"] == 3);
  CHECK(hi.counters["at_events_read"] == 1);
  CHECK(hi.counters["incident_histories"] == 1);
  CHECK(hi.counters["incident_events_read"] == incidents.last_seq);
  MESSAGE("a job, through the registry and in the registry's list");
  auto ja = request<component_status>(registry, status_atom::value,
                                      status_verbosity::info,
                                      std::string{"a"});
  CHECK(ja.name == "job/a");
  CHECK(ja.kind == "job");
  CHECK(ja.facts["recoveryState"] == "INIT");
  CHECK(ja.counters["registered"] == 1);
  CHECK(ja.counters["seq"] >= 2);
  auto err = request_error<component_status>(registry, status_atom::value,
                                             status_verbosity::info,
                                             std::string{"nope"});
  CHECK(errc_of(err) == errc::unknown_job);
  auto all = request<std::vector<component_status>>(
    registry, status_atom::value, status_verbosity::detailed,
    list_atom::value);
  CHECK(names(all) == std::vector<std::string>{"job/a", "job/b"});
  CHECK(all[1].counters["registered"] == 0);
  CHECK(all[1].counters["pods"] == 2);
}

TEST_CASE_FIXTURE(status_fixture,
                  "inspector: folds what was appended every second, asked "
                  "or not") {
  put("a", true);
  put("b");
  auto before = status(inspector_hdl, status_verbosity::detailed);
  REQUIRE(log->last_position() > 0);
  CHECK(before.counters["unfolded"] == log->last_position());
  CHECK(before.counters["histories"] == 0);
  MESSAGE("its timer fires: nothing is left to fold, nobody asked");
  fire_timers();
  auto after = status(inspector_hdl, status_verbosity::detailed);
  CHECK(after.counters["unfolded"] == 0);
  CHECK(after.counters["position"] == log->last_position());
  CHECK(after.counters["histories"] == 2);
  MESSAGE("and again after more appends: the timer was armed again");
  put("c");
  CHECK(status(inspector_hdl, status_verbosity::detailed)
          .counters["unfolded"]
        > 0);
  fire_timers();
  auto again = status(inspector_hdl, status_verbosity::detailed);
  CHECK(again.counters["unfolded"] == 0);
  CHECK(again.counters["histories"] == 3);
}

TEST_CASE_FIXTURE(status_fixture,
                  "status: the journal reports a storage failure as a "
                  "problem") {
  put("a");
  CHECK(status(journal_hdl).healthy());
  log->inject_write_failure("Input/output error");
  auto err = request_error<put_result>(registry, put_atom::value,
                                       test::make_job("b"));
  CHECK(errc_of(err) == errc::storage_failure);
  auto jr = status(journal_hdl);
  CHECK(jr.answered);
  CHECK(!jr.healthy());
  CHECK(jr.problem.find("appends are refused") != std::string::npos);
  CHECK(jr.problem.find("Input/output error") != std::string::npos);
}

TEST_CASE_FIXTURE(status_fixture,
                  "status: the status desk's fan-out lists every component, "
                  "and jobs only on request") {
  put("b", true);
  put("a");
  status_query q;
  auto xs = fan_out(q);
  CHECK(names(xs)
        == std::vector<std::string>{"job_registry", "journal", "event_hub",
                                    "inspector", "historian"});
  for (const auto& x : xs) {
    CAPTURE(x.name);
    CHECK(x.healthy());
  }
  CHECK(xs[0].counters["jobs"] == 2);
  MESSAGE("one job");
  q.job_id = "b";
  xs = fan_out(q);
  REQUIRE(xs.size() == 6);
  CHECK(xs[5].name == "job/b");
  CHECK(xs[5].counters["registered"] == 1);
  MESSAGE("every job, ordered by id");
  q.job_id.clear();
  q.every_job = true;
  q.verbosity = status_verbosity::detailed;
  xs = fan_out(q);
  CHECK(names(xs)
        == std::vector<std::string>{"job_registry", "journal", "event_hub",
                                    "inspector", "historian", "job/a",
                                    "job/b"});
  CHECK(xs[1].counters.count("maxBatch") == 1);
  // The log's memory against its bound (32 MB of block cache by default).
  CHECK(xs[1].counters["blockCacheCapacity"] == uint64_t{32} << 20);
  CHECK(xs[1].counters.count("memtableBytes") == 1);
  MESSAGE("a job that is not live, or a bad id, is an error");
  q = status_query{};
  q.job_id = "missing";
  auto err = request_error<std::vector<component_status>>(
    desk_hdl, status_atom::value, q);
  CHECK(errc_of(err) == errc::unknown_job);
  q.every_job = true;
  err = request_error<std::vector<component_status>>(desk_hdl,
                                                     status_atom::value, q);
  CHECK(errc_of(err) == errc::unknown_job);
  q.job_id = std::string(1, '\x01');
  err = request_error<std::vector<component_status>>(desk_hdl,
                                                     status_atom::value, q);
  CHECK(errc_of(err) == errc::invalid_argument);
}

TEST_CASE("status: a component that does not answer in time is listed as "
          "unanswered; the others still are") {
  status_fixture fx{silent::hub};
  fx.put("a");
  status_query q;
  q.timeout = std::chrono::milliseconds(1500);
  auto xs = fx.fan_out_held(q, [&] {
    MESSAGE("the hub holds the request; the fan-out waits for it");
    CHECK(fx.pending->size() == 1);
  });
  REQUIRE(names(xs)
          == std::vector<std::string>{"job_registry", "journal", "event_hub",
                                      "inspector", "historian"});
  CHECK(xs[0].healthy());
  CHECK(xs[0].counters["jobs"] == 1);
  CHECK(xs[1].healthy());
  CHECK(!xs[2].answered);
  CHECK(xs[2].kind == "event_hub");
  CHECK(xs[2].problem == "did not answer within 1500 ms");
  CHECK(xs[3].healthy());
  CHECK(xs[4].healthy());
}

TEST_CASE("historian: a long post-mortem holds up none of the inspector's "
          "answers, and shows in the fan-out") {
  status_fixture fx{silent::historian};
  fx.put("a", true);
  fx.put("b");
  MESSAGE("a GetJobAt and a ListIncidents reach the historian; it holds them");
  history_point first;
  first.seq = 1;
  fx.self->send(fx.historian_hdl, at_atom::value, std::string{"a"}, first);
  fx.self->send(fx.historian_hdl, incidents_atom::value, std::string{"a"});
  fx.run();
  CHECK(fx.held->at.size() == 1);
  CHECK(fx.held->incidents.size() == 1);
  MESSAGE("meanwhile the inspector answers: jobs, one job, /metrics, goodput");
  auto jobs = fx.request<std::vector<job_view>>(fx.inspector_hdl,
                                                list_atom::value,
                                                std::string{});
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].job.model.spec.job_id == "a");
  auto one = fx.request<job_view>(fx.inspector_hdl, get_atom::value,
                                  std::string{"b"});
  CHECK(one.job.model.spec.job_id == "b");
  auto stats = fx.request<cluster_stats>(fx.inspector_hdl,
                                         metrics_atom::value);
  CHECK(stats.jobs == 2);
  CHECK(stats.registered == 1);
  auto goodput = fx.request<goodput_report>(fx.inspector_hdl,
                                            goodput_atom::value,
                                            std::string{});
  CHECK(goodput.jobs.size() == 2);
  MESSAGE("the fan-out lists the historian as unanswered, the rest healthy");
  status_query q;
  q.timeout = std::chrono::milliseconds(1500);
  auto xs = fx.fan_out_held(q,
                            [&] { CHECK(fx.held->status.size() == 1); });
  REQUIRE(names(xs)
          == std::vector<std::string>{"job_registry", "journal", "event_hub",
                                      "inspector", "historian"});
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(xs[i].name);
    CHECK(xs[i].healthy());
  }
  CHECK(!xs[4].answered);
  CHECK(xs[4].kind == "historian");
  CHECK(xs[4].problem == "did not answer within 1500 ms");
  MESSAGE("the historian's questions are still held: nothing waited on them");
  CHECK(fx.held->at.size() == 1);
  CHECK(fx.held->incidents.size() == 1);
}

TEST_CASE("status: a stuck inspector is listed as unanswered, and GetStatus "
          "still answers") {
  status_fixture fx{silent::inspector};
  fx.put("a");
  status_query q;
  q.timeout = std::chrono::milliseconds(1500);
  q.job_id = "a";
  auto xs = fx.fan_out_held(q, [&] {
    MESSAGE("the inspector holds its request; the desk waits for it");
    CHECK(fx.held->status.size() == 1);
  });
  REQUIRE(names(xs)
          == std::vector<std::string>{"job_registry", "journal", "event_hub",
                                      "inspector", "historian", "job/a"});
  CHECK(!xs[3].answered);
  CHECK(xs[3].kind == "inspector");
  CHECK(xs[3].problem == "did not answer within 1500 ms");
  for (size_t i : {0, 1, 2, 4, 5}) {
    CAPTURE(xs[i].name);
    CHECK(xs[i].healthy());
  }
  MESSAGE("the desk answers the shared request too");
  auto desk = fx.status(fx.desk_hdl);
  CHECK(desk.name == "status_desk");
  CHECK(desk.counters["rounds"] == 1);
}
