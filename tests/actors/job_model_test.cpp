#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "actors/model/text.hpp"
#include "actors/model/validate.hpp"
#include "fixtures/jobs.hpp"

using namespace recoverd;

namespace {

// Applies what `cmd` decides, stamping seq and time like the job actor.
job_model step(job_model m, const command& cmd, biz_status* status = nullptr) {
  auto d = decide(m, cmd);
  REQUIRE_MESSAGE(d, (d ? "" : message_of(d.error())));
  for (auto& body : d->events)
    m = apply(m, event{m.seq + 1, 1000 + static_cast<int64_t>(m.seq), body});
  if (status)
    *status = d->status;
  return m;
}

std::string validation_error(const job_spec& spec) {
  auto err = validate(spec);
  REQUIRE(err);
  CHECK(errc_of(err) == errc::invalid_argument);
  return message_of(err);
}

bool starts_with(const std::string& x, const std::string& prefix) {
  return x.rfind(prefix, 0) == 0;
}

job_model registered_job(const std::string& id = "j") {
  job_model m;
  m = step(m, put_cmd{test::make_job(id)});
  m = step(m, init_cmd{{id, "taskd", "p"}});
  return step(m, register_cmd{{id, "taskd", "p"}});
}

} // namespace

TEST_CASE("a valid spec passes validation") {
  CHECK_FALSE(validate(test::make_job("j")));
}

TEST_CASE("invalid specs are rejected with the offending field named") {
  auto spec = test::make_job("j", 2, 2);
  SUBCASE("empty job id") {
    spec.job_id = "";
    CHECK(starts_with(validation_error(spec), "jobId:"));
  }
  SUBCASE("control character in job id") {
    spec.job_id = std::string{"a\0b", 3};
    CHECK(starts_with(validation_error(spec), "jobId:"));
  }
  SUBCASE("unknown strategy") {
    spec.recover_strategies = {"retry", "bogus"};
    auto msg = validation_error(spec);
    CHECK(starts_with(msg, "recoverStrategies[1]:"));
    CHECK(msg.find("bogus") != std::string::npos);
  }
  SUBCASE("graceful fault tolerance with process-level recovery") {
    spec.graceful_fault_tolerance = true;
    spec.process_recover_enable = true;
    CHECK(starts_with(validation_error(spec), "gracefulFaultTolerance:"));
  }
  SUBCASE("graceful fault tolerance alone is fine") {
    spec.graceful_fault_tolerance = true;
    spec.process_recover_enable = false;
    CHECK_FALSE(validate(spec));
  }
  SUBCASE("duplicate rank ids") {
    spec.pods[1].devices[0].rank_id = "0";
    auto msg = validation_error(spec);
    CHECK(starts_with(msg, "pods[1].devices[0].rankId:"));
    CHECK(msg.find("n0/0") != std::string::npos);
  }
  SUBCASE("a rank on two devices of one pod") {
    spec.pods[0].devices[1].rank_id = "0";
    CHECK(starts_with(validation_error(spec), "pods[0].devices[1].rankId:"));
  }
  SUBCASE("duplicate pod ranks") {
    spec.pods[1].pod_rank = 0;
    CHECK(starts_with(validation_error(spec), "pods[1].podRank:"));
  }
  SUBCASE("negative pod rank") {
    spec.pods[0].pod_rank = -1;
    CHECK(starts_with(validation_error(spec), "pods[0].podRank:"));
  }
  SUBCASE("non-numeric rank") {
    spec.pods[0].devices[0].rank_id = "eight";
    CHECK(starts_with(validation_error(spec), "pods[0].devices[0].rankId:"));
  }
  SUBCASE("non-canonical rank numerals (issue 11.7.3)") {
    for (const char* x : {"01", "00", "+1", "-1", " 1", "1 ", "1e3", "0x1",
                          "1234567890"}) {
      CAPTURE(x);
      spec.pods[0].devices[1].rank_id = x;
      auto msg = validation_error(spec);
      CHECK(starts_with(msg, "pods[0].devices[1].rankId:"));
      CHECK(msg.find("canonical") != std::string::npos);
    }
  }
  SUBCASE("\"1\" and \"01\": one rank twice, refused") {
    spec.pods[0].devices[0].rank_id = "1";
    spec.pods[0].devices[1].rank_id = "01";
    CHECK(starts_with(validation_error(spec), "pods[0].devices[1].rankId:"));
  }
  SUBCASE("one device of one node in two pods") {
    spec.pods[1].node_name = spec.pods[0].node_name;
    auto msg = validation_error(spec);
    CHECK(starts_with(msg, "pods[1].devices[0].deviceId:"));
    CHECK(msg.find("already in pods[0]") != std::string::npos);
  }
  SUBCASE("two pods on one node with different devices are fine") {
    spec.pods[1].node_name = spec.pods[0].node_name;
    for (auto& d : spec.pods[1].devices)
      d.device_id = "x" + d.device_id;
    CHECK_FALSE(validate(spec));
  }
  SUBCASE("an id with '/'") {
    spec.job_id = "a/b";
    CHECK(validation_error(spec).find("contains '/'") != std::string::npos);
  }
  SUBCASE("duplicate device in a pod") {
    spec.pods[0].devices[1].device_id = "0";
    CHECK(starts_with(validation_error(spec), "pods[0].devices[1].deviceId:"));
  }
  SUBCASE("missing node name and uid") {
    spec.pods[0].node_name = "";
    CHECK(starts_with(validation_error(spec), "pods[0].nodeName:"));
    spec.pods[0].node_name = "n0";
    spec.pods[0].uid = "";
    CHECK(starts_with(validation_error(spec), "pods[0].uid:"));
  }
  SUBCASE("unknown enum values") {
    spec.fault_scheduling = "sometimes";
    CHECK(starts_with(validation_error(spec), "faultScheduling:"));
    spec.fault_scheduling = "";
    spec.sub_healthy_strategy = "panic";
    CHECK(starts_with(validation_error(spec), "subHealthyStrategy:"));
    spec.sub_healthy_strategy = "";
    spec.framework = "jax";
    CHECK(starts_with(validation_error(spec), "framework:"));
  }
  SUBCASE("a repeated strategy") {
    spec.recover_strategies = {"dump", "dump"};
    CHECK(starts_with(validation_error(spec), "recoverStrategies[1]:"));
  }
}

TEST_CASE("effective strategies follow the reference's order and additions") {
  auto spec = test::make_job("j");
  spec.recover_strategies = {"dump", "retry", "recover-in-place"};
  CHECK(effective_strategies(spec)
        == std::vector<std::string>{"retry", "recover-in-place", "dump",
                                    "exit"});
  spec.fault_scheduling = "force";
  spec.pod_rescheduling = true;
  spec.recover_strategies = {"exit", "elastic-training"};
  CHECK(effective_strategies(spec)
        == std::vector<std::string>{"elastic-training", "exit",
                                    "job-rescheduling", "pod-rescheduling"});
  spec.recover_strategies = {};
  spec.fault_scheduling = "";
  spec.pod_rescheduling = false;
  CHECK(effective_strategies(spec) == std::vector<std::string>{"exit"});
}

TEST_CASE("platform mode comes from the flag or the strategy annotation") {
  auto spec = test::make_job("j");
  CHECK_FALSE(make_init_config(spec).platform_mode);
  spec.annotations["ProcessRecoverStrategy"] = "";
  CHECK(make_init_config(spec).platform_mode);
  spec.annotations.clear();
  spec.platform_mode = true;
  CHECK(make_init_config(spec).platform_mode);
}

TEST_CASE("put creates, updates, keeps annotations, and re-creates") {
  job_model m;
  auto spec = test::make_job("j");
  spec.annotations = {{"a", "1"}};
  m = step(m, put_cmd{spec});
  CHECK(m.exists);
  CHECK(m.seq == 1);
  CHECK(m.created_at_ms == 1000);
  MESSAGE("an update with no annotations keeps the current ones");
  auto update = spec;
  update.annotations.clear();
  update.pods[0].uid = "rescheduled";
  auto d = decide(m, put_cmd{update});
  REQUIRE(d);
  REQUIRE(d->events.size() == 1);
  CHECK_FALSE(std::get<job_put>(d->events[0]).created);
  m = step(m, put_cmd{update});
  CHECK(m.spec.pods[0].uid == "rescheduled");
  CHECK(m.spec.annotations.at("a") == "1");
  CHECK(m.created_at_ms == 1000);
  MESSAGE("delete empties the state but keeps id and sequence");
  m = step(m, delete_cmd{});
  CHECK_FALSE(m.exists);
  CHECK(m.seq == 3);
  CHECK(m.spec.job_id == "j");
  CHECK(m.spec.pods.empty());
  m = step(m, put_cmd{spec});
  CHECK(m.exists);
  CHECK(m.seq == 4);
  CHECK_FALSE(m.registered);
  MESSAGE("an invalid put changes nothing");
  auto bad = spec;
  bad.recover_strategies = {"x"};
  CHECK_FALSE(decide(m, put_cmd{bad}));
}

TEST_CASE("Init answers 0, 403, and keeps the first configuration") {
  job_model m;
  auto spec = test::make_job("j");
  spec.process_recover_enable = false;
  m = step(m, put_cmd{spec});
  biz_status status;
  auto before = m.seq;
  m = step(m, init_cmd{{"j", "taskd", ""}}, &status);
  CHECK(status.code == 403);
  CHECK(status.info.find("job(uid=j)") != std::string::npos);
  CHECK(m.seq == before);
  CHECK_FALSE(m.inited);
  MESSAGE("hot switch is refused at PutJob: recoverd does not do it");
  spec.sub_healthy_strategy = "hotSwitch";
  auto refused = decide(m, put_cmd{spec});
  REQUIRE_FALSE(refused);
  CHECK(message_of(to_error(refused.error())).find("hotSwitch is not supported")
        != std::string::npos);
  spec.sub_healthy_strategy = "";
  spec.process_recover_enable = true;
  m = step(m, put_cmd{spec});
  m = step(m, init_cmd{{"j", "taskd", ""}}, &status);
  CHECK(status.code == 0);
  CHECK(status.info == "job(uid=j) init success");
  CHECK(m.inited);
  MESSAGE("a second Init after the annotations changed keeps the old config");
  m = step(m, annotate_cmd{{{"ProcessRecoverStrategy", "retry"}}, {}});
  auto seq = m.seq;
  m = step(m, init_cmd{{"j", "taskd", ""}}, &status);
  CHECK(status.code == 0);
  CHECK(m.seq == seq);
  CHECK_FALSE(m.init.platform_mode);
}

TEST_CASE("Register answers 408 before Init, 500 at the cap, then 0") {
  job_model m;
  m = step(m, put_cmd{test::make_job("j")});
  biz_status status;
  m = step(m, register_cmd{{"j", "t", ""}}, &status);
  CHECK(status.code == 408);
  CHECK(status.info == "jobId=j not inited");
  m = step(m, init_cmd{{"j", "t", ""}});
  m = step(m, register_cmd{{"j", "t", ""}, true}, &status);
  CHECK(status.code == 500);
  CHECK_FALSE(m.registered);
  m = step(m, register_cmd{{"j", "t", ""}}, &status);
  CHECK(status.code == 0);
  CHECK(status.info == "register success");
  CHECK(m.registered);
  CHECK(m.rec.job.label == "on");
  MESSAGE("idempotent, and no new event");
  auto seq = m.seq;
  m = step(m, register_cmd{{"j", "t", ""}, true}, &status);
  CHECK(status.code == 0);
  CHECK(m.seq == seq);
}

TEST_CASE("Subscribe needs registration and takes over the older stream") {
  job_model m;
  m = step(m, put_cmd{test::make_job("j")});
  auto err = decide(m, subscribe_cmd{{"j", "t", ""}, 0});
  REQUIRE_FALSE(err);
  CHECK(errc_of(err.error()) == errc::not_registered);
  CHECK(message_of(err.error()) == "jobId=j not registed");
  m = registered_job();
  auto d = decide(m, subscribe_cmd{{"j", "t", "peer"}, 0});
  REQUIRE(d);
  REQUIRE(d->events.size() == 1);
  CHECK(std::get<subscriber_attached>(d->events[0]).generation == 1);
  m = step(m, subscribe_cmd{{"j", "t", "peer"}, 0});
  d = decide(m, subscribe_cmd{{"j", "t", "peer2"}, 1});
  REQUIRE(d);
  REQUIRE(d->events.size() == 2);
  CHECK(std::get<subscriber_detached>(d->events[0]).reason == "taken over");
  CHECK(std::get<subscriber_attached>(d->events[1]).generation == 2);
  MESSAGE("subscribing does not reset the job");
  m = step(m, subscribe_cmd{{"j", "t", "peer2"}, 1});
  CHECK(m.registered);
  CHECK(m.rec.flow.state == st::init);
}

TEST_CASE("a stale detach is ignored; a live one is recorded") {
  auto m = registered_job();
  auto d = decide(m, detach_cmd{1, 2, "cancelled"});
  REQUIRE(d);
  CHECK(d->events.empty());
  d = decide(m, detach_cmd{2, 2, "cancelled"});
  REQUIRE(d);
  CHECK(d->events.size() == 1);
}

TEST_CASE("annotations: only real changes are events; bad input is refused") {
  job_model m;
  auto spec = test::make_job("j");
  spec.annotations = {{"a", "1"}, {"b", "2"}};
  m = step(m, put_cmd{spec});
  auto d = decide(m, annotate_cmd{{{"a", "1"}}, {"zzz"}});
  REQUIRE(d);
  CHECK(d->events.empty());
  m = step(m, annotate_cmd{{{"a", "9"}, {"c", ""}}, {"b"}});
  CHECK(m.spec.annotations == string_map{{"a", "9"}, {"c", ""}});
  CHECK_FALSE(decide(m, annotate_cmd{{{"", "x"}}, {}}));
  CHECK_FALSE(decide(m, annotate_cmd{{{"a", "x"}}, {"a"}}));
  CHECK_FALSE(decide(m, annotate_cmd{{}, {""}}));
}

TEST_CASE("device faults: validated against the topology, deduplicated") {
  job_model m;
  m = step(m, put_cmd{test::make_job("j", 2, 2)});
  job_device_faults f{"j", "UnHealthy",
                      {{"n1", "1", {"80E01801"}, "RestartBusiness"}}};
  m = step(m, faults_cmd{f});
  CHECK(m.health_state == "UnHealthy");
  CHECK(m.device_faults.size() == 1);
  auto seq = m.seq;
  m = step(m, faults_cmd{f});
  CHECK(m.seq == seq);
  m = step(m, faults_cmd{{"j", "Healthy", {}}});
  CHECK(m.health_state == "Healthy");
  CHECK(m.device_faults.empty());
  CHECK_FALSE(decide(m, faults_cmd{{"j", "Fine", {}}}));
  // A bad entry is skipped and named, not a reason to refuse the snapshot
  // (spec §3.4: per-device validation).
  for (const auto& bad : {device_fault{"n9", "1", {"X"}, ""},
                          device_fault{"n0", "7", {"X"}, ""},
                          device_fault{"n0", "1", {}, ""}}) {
    auto d = decide(m, faults_cmd{{"j", "Healthy", {bad}}});
    REQUIRE(d);
    CHECK(d->ignored.size() == 1);
    CHECK(d->events.empty()); // nothing kept: the state is already so
  }
}

TEST_CASE("device faults: the snapshot and the flow step it causes are one "
          "decision, the same as two") {
  auto m = registered_job();
  const auto& node = m.spec.pods.front().node_name;
  const auto& dev = m.spec.pods.front().devices.front().device_id;
  job_device_faults f{"j", "UnHealthy",
                      {{node, dev, {"80E01801"}, "RestartBusiness"}}};
  flow_input stamps;
  stamps.now_ms = 1000;
  stamps.fresh_uuid = "u-1";
  auto fold_all = [](job_model x, std::vector<event_body>& bodies) {
    for (auto& body : bodies) {
      auto seq = x.seq + 1;
      x = apply(std::move(x), event{seq, 1000, std::move(body)});
    }
    return x;
  };
  MESSAGE("without stamps: the snapshot alone");
  auto alone = decide(m, faults_cmd{f});
  REQUIRE(alone);
  REQUIRE(alone->events.size() == 1);
  MESSAGE("the old way: the snapshot applied, then the step it causes");
  auto [name, fresh] = fault_center_input(m.rec, m.spec, m.init,
                                          m.device_faults, f.faults,
                                          f.health_state);
  REQUIRE(name != flow_event::none);
  auto two = fold_all(m, alone->events);
  auto in = stamps;
  in.name = name;
  in.faults = fresh;
  auto second = decide(two, flow_cmd{in, timeouts{}});
  REQUIRE(second);
  REQUIRE(second->events.size() == 1);
  auto old_path = std::get<flow_stepped>(second->events[0]).path;
  two = fold_all(std::move(two), second->events);
  MESSAGE("with stamps: both events in one decision");
  auto both = decide(m, faults_cmd{f, stamps, timeouts{}});
  REQUIRE(both);
  REQUIRE(both->events.size() == 2);
  CHECK(std::holds_alternative<device_faults_reported>(both->events[0]));
  REQUIRE(std::holds_alternative<flow_stepped>(both->events[1]));
  CHECK(std::get<flow_stepped>(both->events[1]).path == old_path);
  auto one = fold_all(m, both->events);
  CHECK(one.seq == two.seq);
  CHECK(one.device_faults.size() == 1);
  CHECK(one.rec.flow.state == two.rec.flow.state);
  CHECK(one.rec.flow.uuid == two.rec.flow.uuid);
  CHECK(one.rec.flow.faults == two.rec.flow.faults);
  MESSAGE("the same snapshot again: nothing, not even a step");
  auto again = decide(one, faults_cmd{f, stamps, timeouts{}});
  REQUIRE(again);
  CHECK(again->events.empty());
}

TEST_CASE("apply is pure: the same events give the same state") {
  auto a = registered_job();
  auto b = registered_job();
  CHECK(a.seq == b.seq);
  CHECK(a.updated_at_ms == b.updated_at_ms);
  CHECK(a.registered == b.registered);
  CHECK(to_summary(a, false).ranks == 16);
  CHECK(to_summary(a, false).pods == 2);
}

TEST_CASE("validate_job_id is the one check of client job ids") {
  CHECK_FALSE(validate_job_id("job-1"));
  CHECK(starts_with(message_of(validate_job_id("")), "jobId:"));
  CHECK(starts_with(message_of(validate_job_id("", "jobID")), "jobID:"));
  auto slash = message_of(validate_job_id("a/b"));
  CHECK(slash.find("contains '/'") != std::string::npos);
  auto huge = std::string(200, 'x') + "/" + std::string(10000, 'y');
  CHECK(message_of(validate_job_id(huge)).size() < 1000);
}

TEST_CASE("canonical ranks and strategy names") {
  CHECK(is_canonical_rank("0"));
  CHECK(is_canonical_rank("10"));
  CHECK(is_canonical_rank("999999999"));
  for (const char* x : {"", "01", "+1", "-0", " 1", "1 ", "1.0", "1234567890"})
    CHECK_FALSE(is_canonical_rank(x));
  CHECK(is_strategy_name("retry"));
  CHECK(is_strategy_name("downgrade"));
  CHECK_FALSE(is_strategy_name("teleport"));
  CHECK_FALSE(is_strategy_name("Retry"));
  CHECK(strategy_names_text().find("recover-in-place") != std::string::npos);
}

TEST_CASE("reports are checked before the machine sees them (issue 11.7)") {
  auto spec = test::make_job("j", 2, 8);
  flow_input in;
  SUBCASE("an empty ReportProcessFault") {
    in.kind = report_kind::process;
    auto err = validate_report(spec, in);
    REQUIRE(err);
    CHECK(err.code() == errc::invalid_argument);
    CHECK(starts_with(err.message(), "faultRanks:"));
    in.faults = {{"8", "1"}};
    CHECK_FALSE(validate_report(spec, in));
  }
  SUBCASE("an unknown strategy, named with the known ones") {
    in.kind = report_kind::strategy;
    in.strategies = {"recover", "teleport"};
    auto err = validate_report(spec, in);
    REQUIRE(err);
    CHECK(starts_with(err.message(), "strategies[1]:"));
    CHECK(err.message().find("\"teleport\"") != std::string::npos);
    CHECK(err.message().find(strategy_names_text()) != std::string::npos);
    in.strategies = {std::string(5000, 'z')};
    CHECK(validate_report(spec, in).message().size() < 1000);
    in.strategies = {"retry", "recover", "dump", "exit", "downgrade"};
    CHECK_FALSE(validate_report(spec, in));
    in.strategies = {};
    CHECK_FALSE(validate_report(spec, in));
  }
  SUBCASE("ReportStopComplete's faultRanks must be ranks of the job") {
    in.kind = report_kind::stop;
    CHECK_FALSE(validate_report(spec, in));
    in.faults = {{"8", "1"}, {"15", ""}};
    CHECK_FALSE(validate_report(spec, in));
    in.faults = {{"8", "1"}, {"99", "1"}};
    CHECK(starts_with(validate_report(spec, in).message(),
                      "faultRanks[1].rankId:"));
    in.faults = {{"08", "1"}};
    CHECK(validate_report(spec, in).message().find("canonical")
          != std::string::npos);
    in.faults = {{"8", "x"}};
    CHECK(starts_with(validate_report(spec, in).message(),
                      "faultRanks[0].faultType:"));
  }
}

TEST_CASE("device faults beyond the per-request cap are refused, the state "
          "unchanged (issue 11.7.6)") {
  CHECK_FALSE(check_device_fault_count(0));
  CHECK_FALSE(check_device_fault_count(max_device_faults_per_request));
  auto err = check_device_fault_count(max_device_faults_per_request + 1);
  REQUIRE(err);
  CHECK(err.code() == errc::invalid_argument);
  CHECK(err.message().find(std::to_string(max_device_faults_per_request))
        != std::string::npos);
  auto m = registered_job();
  faults_cmd cmd;
  cmd.faults.job_id = "j";
  cmd.faults.health_state = "UnHealthy";
  cmd.faults.faults.assign(max_device_faults_per_request + 1,
                           device_fault{"n0", "0", {"81078603"}, ""});
  auto d = decide(m, cmd);
  REQUIRE_FALSE(d);
  CHECK(d.error().code() == errc::invalid_argument);
  cmd.faults.faults.resize(max_device_faults_per_request);
  auto ok = step(m, cmd);
  CHECK(ok.device_faults.size() == max_device_faults_per_request);
}

TEST_CASE("SwitchNicTrack: the same device twice is refused with 413 "
          "(issue 11.7.5)") {
  auto m = registered_job();
  std::vector<std::string> ranks;
  std::vector<bool> ops;
  auto twice = validate_switch(m.rec, m.spec, true, true,
                               {{"n1", "3", true}, {"n1", "3", false}}, ranks,
                               ops);
  CHECK(twice.code == 413);
  CHECK(twice.info == "device:3 of node:n1 is listed twice");
  ranks.clear();
  ops.clear();
  auto two = validate_switch(m.rec, m.spec, true, true,
                             {{"n1", "3", true}, {"n1", "4", true}}, ranks,
                             ops);
  CHECK(two.code == 0);
  CHECK(ranks == std::vector<std::string>{"11", "12"});
}

TEST_CASE("escape_control: client text cannot break a log line") {
  CHECK(escape_control("taskd") == "taskd");
  CHECK(escape_control("a\nb") == "a\\nb");
  CHECK(escape_control("a\r\n2026 INFO forged") == "a\\r\\n2026 INFO forged");
  CHECK(escape_control(std::string{"\x1b[2J\t\x7f", 6}) == "\\x1b[2J\\t\\x7f");
  CHECK(escape_control("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(has_control("a\nb"));
  CHECK_FALSE(has_control("a b"));
}

TEST_CASE("snapshot_due: every N events; a snapshot over 4 KiB also waits "
          "until the events since weigh half of it") {
  MESSAGE("no snapshot, or a small one: the event count alone");
  CHECK_FALSE(snapshot_due({19, 100, 0}, 20));
  CHECK(snapshot_due({20, 100, 0}, 20));
  CHECK(snapshot_due({20, 10, small_snapshot_bytes}, 20));
  CHECK_FALSE(snapshot_due({1'000, 1'000'000, 0}, 0)); // 0: never
  MESSAGE("a 290 KB snapshot (16,384 ranks) waits for 145 KB of events");
  uint64_t large = 290'000;
  CHECK_FALSE(snapshot_due({20, 2'000, large}, 20));
  CHECK_FALSE(snapshot_due({1'449, 144'900, large}, 20));
  CHECK(snapshot_due({1'450, 145'000, large}, 20));
  MESSAGE("and still for N events, however large they are");
  CHECK_FALSE(snapshot_due({3, 500'000, large}, 20));
  MESSAGE("the bound: 4 KiB follows the count, a byte more waits");
  CHECK(snapshot_due({20, 100, 4'096}, 20));
  CHECK_FALSE(snapshot_due({20, 2'048, 4'097}, 20));
  CHECK(snapshot_due({20, 2'049, 4'097}, 20));
}

TEST_CASE("touches_spec: an event it calls spec-free leaves the spec as it "
          "was") {
  // What a snapshot copy set aside relies on (see `snapshot_after`).
  auto same_spec = [](const job_spec& x, const job_spec& y) {
    auto pods_equal = [](const pod& a, const pod& b) {
      auto devices_equal = [](const device& c, const device& d) {
        return c.device_id == d.device_id && c.rank_id == d.rank_id;
      };
      return a.pod_rank == b.pod_rank && a.uid == b.uid
             && a.node_name == b.node_name
             && std::equal(a.devices.begin(), a.devices.end(),
                           b.devices.begin(), b.devices.end(),
                           devices_equal);
    };
    return x.job_id == y.job_id && x.annotations == y.annotations
           && x.recover_strategies == y.recover_strategies
           && std::equal(x.pods.begin(), x.pods.end(), y.pods.begin(),
                         y.pods.end(), pods_equal);
  };
  auto m = registered_job();
  auto moved = test::make_job("j");
  moved.pods.front().node_name = "elsewhere";
  flow_stepped plain;
  plain.input.kind = report_kind::process;
  flow_stepped annotating = plain;
  annotating.annotations["reset"] = "{}";
  flow_stepped unannotating = plain;
  unannotating.removed_annotations = {"reset"};
  device_faults_reported faults;
  faults.health_state = "UnHealthy";
  std::vector<std::pair<event_body, bool>> bodies = {
    {job_inited{}, false},
    {job_registered{"taskd"}, false},
    {subscriber_attached{7, "taskd", "peer"}, false},
    {subscriber_detached{7, "gone"}, false},
    {faults, false},
    {plain, false},
    {annotating, true},
    {unannotating, true},
    {annotations_changed{{{"k", "v"}}, {}, "op"}, true},
    {job_put{moved, false}, true},
    {job_deleted{}, true},
  };
  for (auto& [body, touches] : bodies) {
    CAPTURE(kind_name(body));
    CHECK(touches_spec(body) == touches);
    auto before = m.spec;
    m = apply(std::move(m), event{m.seq + 1, 2000, body});
    // Each spec-touching event of this history does change the spec.
    CHECK(same_spec(before, m.spec) == !touches);
  }
}

TEST_CASE("rank_index: decimal ranks, odd ids and repeats are found as the "
          "spec says") {
  auto spec = test::make_job("j", 2, 4); // ranks "0" .. "7"
  spec.pods[1].devices[0].rank_id = "007";     // not canonical: by its text
  spec.pods[1].devices[1].rank_id = "x9";      // not a number
  spec.pods[1].devices[2].rank_id = "123456";  // far beyond the ranks
  spec.pods[1].devices[3].rank_id = "2";       // a repeat: the first counts
  rank_index ranks{spec};
  CHECK(ranks.size() == 7);
  for (int r = 0; r < 4; ++r) {
    const auto* at = ranks.find(std::to_string(r));
    REQUIRE(at != nullptr);
    CHECK(at->pod_index == 0);
    CHECK(at->device_index == static_cast<uint32_t>(r));
  }
  for (auto [id, device] : {std::pair<const char*, uint32_t>{"007", 0},
                            {"x9", 1},
                            {"123456", 2}}) {
    CAPTURE(id);
    const auto* at = ranks.find(id);
    REQUIRE(at != nullptr);
    CHECK(at->pod_index == 1);
    CHECK(at->device_index == device);
  }
  for (const char* id : {"7", "4", "8", "07", "", "-1", "1234567890123",
                         "123457", "2 "})
    CHECK_MESSAGE(ranks.find(id) == nullptr, id);
  CHECK(ranks.find("2")->pod_index == 0);
}
