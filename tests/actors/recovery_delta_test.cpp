// The change a step records: diff and patch are inverse, a change names
// only what changed (not every rank of the job), and records of both
// versions decode to the same state.

#include <random>

#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "actors/model/recovery_delta.hpp"
#include "events.pb.h"
#include "fixtures/jobs.hpp"
#include "storage/event_codec.hpp"

using namespace recoverd;

namespace {

recovery busy(int ranks) {
  recovery r;
  r.flow.state = st::wait_stop_complete;
  r.flow.uuid = "U-1";
  for (int k = 0; k < ranks; ++k) {
    r.flow.faults[std::to_string(k)] = fault_type::normal;
    r.flow.origin_uids[k] = "uid-" + std::to_string(k);
  }
  r.flow.fault_pods = {0, 1};
  r.flow.decided = {"recover"};
  process_signal sig;
  sig.uuid = "U-1";
  sig.signal_type = "stopTrain";
  r.flow.outbox = sig;
  r.flow.deadline_ms = 42;
  r.flow.deadline_event = ev::receive_timeout;
  r.action.kind = om_kind::switch_nic;
  r.action.switch_ops = {true, false};
  r.job.label = "on";
  r.job.reset_json = "{}";
  r.job.unhealthy_nodes = {{"n1", 7}};
  return r;
}

} // namespace

TEST_CASE("patching a state with its diff gives the other state") {
  auto before = busy(8);
  SUBCASE("a few fields") {
    auto after = before;
    after.flow.state = st::wait_recover_strategy;
    after.flow.outbox.reset();
    after.flow.faults["9"] = fault_type::uce;
    after.flow.faults.erase("0");
    after.job.retry_time = 3;
    auto d = diff(before, recovery{after});
    CHECK(d.replaces(recovery_field::state));
    CHECK(d.replaces(recovery_field::outbox));
    CHECK(d.replaces(recovery_field::retry_time));
    CHECK_FALSE(d.replaces(recovery_field::uuid));
    CHECK_FALSE(d.replaces(recovery_field::faults));
    CHECK(d.faults_set.size() == 1);
    CHECK(d.faults_removed == std::vector<std::string>{"0"});
    auto patched = before;
    patch(patched, d);
    CHECK(patched == after);
  }
  SUBCASE("a flow's end") {
    auto after = before;
    after.flow = {};
    after.action = {};
    ++after.job.flows;
    auto d = diff(before, recovery{after});
    CHECK(d.replaces(recovery_field::faults));
    CHECK(d.faults_set.empty());
    // The outcome is named with every count it ends, changed or not.
    CHECK(d.replaces(recovery_field::last_outcome));
    auto patched = before;
    patch(patched, std::move(d));
    CHECK(patched == after);
  }
  SUBCASE("nothing") {
    CHECK(diff(before, recovery{before}).empty());
  }
  SUBCASE("a changed type of one rank") {
    auto after = before;
    after.flow.faults["3"] = fault_type::uce;
    auto d = diff(before, recovery{after});
    CHECK(d.changed == 0);
    CHECK(d.faults_set.size() == 1);
    auto patched = before;
    patch(patched, d);
    CHECK(patched == after);
  }
}

TEST_CASE("a step's record does not grow with the job's ranks") {
  auto event_bytes = [](int ranks) {
    auto before = busy(ranks);
    auto after = before;
    after.flow.faults["100000"] = fault_type::normal;
    after.flow.state = st::notify_stop_train;
    flow_stepped x;
    x.input.name = ev::fault_absorbed;
    x.input.faults = {{"100000", "1"}};
    x.path = {before.flow.state, after.flow.state};
    x.change = diff(before, std::move(after));
    return storage::encode_event(event{7, 1, std::move(x)}).size();
  };
  auto small = event_bytes(16);
  auto large = event_bytes(16384);
  MESSAGE("step record: " << small << " B at 16 ranks, " << large
                          << " B at 16384 ranks");
  CHECK(small == large);
  CHECK(large < 200);
}

TEST_CASE("records round-trip a step's change, and a version 1 record "
          "(whole state after the step) reads as a change of every field") {
  auto before = busy(4);
  auto after = before;
  after.flow.state = st::init;
  after.flow.faults["7"] = fault_type::network;
  after.job.last_outcome = "recover-success";
  flow_stepped x;
  x.input.name = ev::receive_report;
  x.input.kind = report_kind::status;
  x.input.report = {0, "recover", {}};
  x.path = {before.flow.state, st::init};
  x.change = diff(before, recovery{after});
  auto bytes = storage::encode_event(event{9, 5, x});
  auto back = storage::decode_event(bytes);
  REQUIRE(back);
  const auto& y = std::get<flow_stepped>(back->body);
  CHECK(y.input.kind == report_kind::status);
  CHECK(y.input.report.strategy == "recover");
  CHECK(y.change.changed == x.change.changed);
  auto patched = before;
  patch(patched, y.change);
  CHECK(patched == after);

  SUBCASE("version 1") {
    recoverd::events::v1::Event old;
    REQUIRE(old.ParseFromString(bytes));
    old.set_version(1);
    auto* m = old.mutable_flowstepped();
    m->clear_changed();
    m->clear_change();
    m->clear_faultsset();
    m->clear_faultsremoved();
    // What version 1 wrote: the whole state, from a snapshot of it.
    job_model holder;
    holder.rec = after;
    recoverd::events::v1::Snapshot snap;
    REQUIRE(snap.ParseFromString(storage::encode_snapshot(holder)));
    *m->mutable_after() = snap.state().recovery();
    auto v1 = storage::decode_event(old.SerializeAsString());
    REQUIRE(v1);
    auto from_v1 = recovery{};
    patch(from_v1, std::get<flow_stepped>(v1->body).change);
    CHECK(from_v1 == after);
  }
  SUBCASE("an unknown field name is refused, naming it") {
    recoverd::events::v1::Event bad;
    REQUIRE(bad.ParseFromString(bytes));
    bad.mutable_flowstepped()->add_changed("teleport");
    auto r = storage::decode_event(bad.SerializeAsString());
    REQUIRE_FALSE(r);
    CHECK(message_of(r.error()).find("teleport") != std::string::npos);
  }
}

TEST_CASE("an absorbed fault's change, found from the ranks it names, is the "
          "step's diff") {
  // Random running flows on a 32-rank job and random fault reports joining
  // them: the fast path (`absorb`, no copy of the state) must record exactly
  // what diffing the full step records, field by field and entry by entry.
  auto spec = test::make_job("absorb", 4, 8);
  rank_index ranks{spec};
  std::mt19937 rng{20261203};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const char* types[] = {"0", "1", "2", "9"};
  for (int round = 0; round < 500; ++round) {
    init_config init;
    init.strategies = {"recover"};
    if (pick(2) == 0)
      init.strategies.push_back("recover-in-place");
    recovery current;
    current.flow.state = st::wait_recover_strategy;
    current.flow.uuid = "U";
    current.flow.health = pick(2) == 0 ? "Healthy" : "UnHealthy";
    for (int k = pick(12); k > 0; --k) {
      auto rank = pick(40); // some ranks the job does not have
      current.flow.faults[std::to_string(rank)]
        = pick(2) == 0 ? fault_type::normal : fault_type::uce;
      current.flow.fault_pods.insert(rank / 8);
      if (pick(3) != 0)
        current.flow.origin_uids[rank / 8] = "old-" + std::to_string(rank);
      if (pick(2) == 0)
        current.flow.in_place_pods.insert(rank / 8);
    }
    flow_input in;
    in.name = ev::fault_absorbed;
    in.kind = pick(4) == 0 ? report_kind::none : report_kind::process;
    for (int k = pick(4); k > 0; --k)
      in.faults.push_back({std::to_string(pick(40)), types[pick(4)]});
    auto stepped = step(current, spec, init, in, timeouts{}, {}, &ranks);
    REQUIRE(stepped);
    auto slow = diff(current, recovery{stepped->after});
    auto fast = absorb(current, spec, init, in, ranks);
    CAPTURE(round);
    CHECK(fast.changed == slow.changed);
    CHECK(fast.faults_set == slow.faults_set);
    CHECK(fast.faults_removed == slow.faults_removed);
    auto patched = current;
    patch(patched, fast);
    CHECK(patched == stepped->after);
  }
}
