// The signal a wait waits on (`flow_part::awaited`): held from its delivery
// until the state moves on, and kept by the event and snapshot records, so
// that a restarted daemon can give it again to a new stream (design §4.1).

#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "fixtures/jobs.hpp"
#include "storage/event_codec.hpp"

using namespace recoverd;

namespace {

timeouts fast_waits() {
  timeouts w;
  w.fault_flush = millis{0};
  w.resource_release = millis{0};
  w.hccl_convergence = millis{0};
  w.restart_all = millis{0};
  return w;
}

// A job whose every event goes through the record codec, as the journal
// writes it and start-up reads it: `live` applies the decided events,
// `replayed` the decoded records.
struct recorded_job {
  job_model live;
  job_model replayed;
  int64_t now = 1'000'000;

  recorded_job() {
    run(put_cmd{test::make_job("j")});
    run(init_cmd{{"j", "taskd", "p"}});
    run(register_cmd{{"j", "taskd", "p"}});
  }

  void run(const command& cmd) {
    auto d = decide(live, cmd);
    REQUIRE_MESSAGE(d, (d ? "" : message_of(d.error())));
    for (auto& body : d->events) {
      event ev{live.seq + 1, now, body};
      auto back = storage::decode_event(storage::encode_event(ev));
      REQUIRE(back);
      live = apply(std::move(live), ev);
      replayed = apply(std::move(replayed), std::move(*back));
    }
    ++now;
  }

  void feed(flow_input in) {
    in.now_ms = now;
    in.fresh_uuid = "UUID-" + std::to_string(now);
    run(flow_cmd{std::move(in), fast_waits()});
  }

  // Confirms delivery of the pending signal, as the job actor does.
  process_signal deliver() {
    REQUIRE(live.rec.flow.outbox);
    auto sig = *live.rec.flow.outbox;
    flow_input in;
    in.name = send_result_event(sig);
    in.delivered = sig;
    feed(std::move(in));
    return sig;
  }

  void report(report_kind kind, int code = 0, std::string strategy = "",
              std::vector<std::string> strategies = {}) {
    flow_input in;
    in.name = ev::receive_report;
    in.kind = kind;
    in.report.code = code;
    in.report.strategy = std::move(strategy);
    in.strategies = std::move(strategies);
    feed(std::move(in));
  }

  // The awaited signal, which the replayed state and a snapshot of it must
  // hold alike.
  std::optional<process_signal> awaited() {
    CHECK(replayed.rec == live.rec);
    auto snap = storage::decode_snapshot(storage::encode_snapshot(live));
    REQUIRE(snap);
    CHECK(snap->rec == live.rec);
    return live.rec.flow.awaited;
  }
};

} // namespace

TEST_CASE("redeliver: a delivered signal is awaited until its wait ends, and "
          "the records keep it") {
  recorded_job j;
  CHECK_FALSE(j.awaited());
  flow_input fault;
  fault.name = ev::fault_occur;
  fault.faults = {{"8", "1"}};
  j.feed(fault);
  REQUIRE(j.live.rec.flow.state == st::notify_stop_train);
  MESSAGE("pending in the outbox: not awaited yet");
  CHECK_FALSE(j.awaited());
  auto stop = j.deliver();
  REQUIRE(j.live.rec.flow.state == st::wait_stop_complete);
  auto held = j.awaited();
  REQUIRE(held);
  CHECK(*held == stop);
  CHECK(held->signal_type == "stopTrain");
  CHECK(held->uuid == j.live.rec.flow.uuid);
  CHECK_FALSE(j.live.rec.flow.outbox);

  MESSAGE("a fault joining the wait keeps it");
  flow_input more;
  more.name = ev::fault_absorbed;
  more.faults = {{"9", "1"}};
  j.feed(more);
  REQUIRE(j.awaited());
  CHECK(*j.awaited() == stop);

  MESSAGE("the stop report ends the wait: nothing awaited while globalFault "
          "is pending");
  j.report(report_kind::stop);
  REQUIRE(j.live.rec.flow.outbox);
  CHECK_FALSE(j.awaited());
  auto global = j.deliver();
  REQUIRE(j.live.rec.flow.state == st::wait_recover_strategy);
  REQUIRE(j.awaited());
  CHECK(j.awaited()->signal_type == "globalFault");
  CHECK(j.awaited()->uuid == stop.uuid);

  j.report(report_kind::strategy, 0, "", {"recover"});
  CHECK_FALSE(j.awaited());
  auto change = j.deliver();
  REQUIRE(j.awaited());
  CHECK(j.awaited()->change_strategy == "recover");
  CHECK(*j.awaited() == change);

  MESSAGE("the flow ends: nothing awaited");
  j.report(report_kind::status, 0, "recover");
  CHECK(j.live.rec.flow.state == st::init);
  CHECK_FALSE(j.awaited());
}

TEST_CASE("redeliver: a record without the field (written before it existed) "
          "reads as nothing awaited") {
  recorded_job j;
  flow_input fault;
  fault.name = ev::fault_occur;
  fault.faults = {{"8", "1"}};
  j.feed(fault);
  j.deliver();
  REQUIRE(j.live.rec.flow.awaited);
  auto old = j.live;
  old.rec.flow.awaited.reset();
  auto back = storage::decode_snapshot(storage::encode_snapshot(old));
  REQUIRE(back);
  CHECK_FALSE(back->rec.flow.awaited);
  CHECK(back->rec == old.rec);
}
