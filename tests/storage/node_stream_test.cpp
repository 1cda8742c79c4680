// The fleet's node stream in a real RocksDB: kept apart from every job
// (no job id lists it, the cluster-wide order does not hold it, a job named
// like it does not touch it), bounded by its snapshots, replayed at
// start-up, and its records round-trip.

#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/event_log.hpp"
#include "storage/node_codec.hpp"

using namespace recoverd;
using namespace recoverd::storage;

namespace {

std::unique_ptr<event_log> open_log(const std::string& path) {
  event_log_options opts;
  opts.path = path;
  opts.write_buffer_size = 64 * 1024;
  auto log = event_log::open(opts);
  REQUIRE_MESSAGE(log, (log ? "" : message_of(log.error())));
  return std::move(*log);
}

node_event separation(const std::string& node, int64_t at) {
  node_fault f;
  f.source = node_fault_source::fault_center;
  f.job_id = "jobA";
  f.device = "1";
  f.codes = {"c1", "c2"};
  f.level = "SeparateNPU";
  f.time_ms = at;
  return node_fault_seen{node, std::move(f)};
}

log_record node_rec(uint64_t seq, const node_event& e) {
  return {node_stream, seq, encode_node_event(e)};
}

} // namespace

TEST_CASE("node records round-trip; bad bytes are refused") {
  std::vector<node_event> evs{
    separation("x", 10),
    node_stress_verdict{"y", "jobB", true, true, "2", 20},
    node_cleared{"x", "alice", 30},
  };
  for (const auto& e : evs) {
    auto back = decode_node_event(encode_node_event(e));
    REQUIRE_MESSAGE(back, (back ? "" : message_of(back.error())));
    CHECK(back->index() == e.index());
    CHECK(node_of(*back) == node_of(e));
    CHECK(time_of(*back) == time_of(e));
  }
  auto f = decode_node_event(encode_node_event(evs[0]));
  CHECK(std::get<node_fault_seen>(*f).fault.codes
        == std::vector<std::string>{"c1", "c2"});
  CHECK(std::get<node_fault_seen>(*f).fault.level == "SeparateNPU");
  CHECK_FALSE(decode_node_event("\xff\xff garbage"));
  node_table t;
  for (const auto& e : evs)
    t = recoverd::apply(t, e);
  node_table back;
  REQUIRE_FALSE(decode_node_snapshot(encode_node_snapshot(t), back));
  REQUIRE(back.nodes.size() == 2);
  CHECK(back.nodes["x"].faults == 1);
  CHECK(back.nodes["x"].cleared_by == "alice");
  CHECK(back.nodes["y"].reason == quarantine_reason::stress_test);
  CHECK(back.nodes["x"].recent.size() == 1);
}

TEST_CASE("the node stream lives apart from the jobs and survives a "
          "reopen; a snapshot removes the events it folds") {
  test::temp_dir dir;
  {
    auto log = open_log(dir / "db");
    fleet_records fleet;
    fleet.events = {node_rec(1, separation("x", 10)),
                    node_rec(2, separation("y", 20))};
    // A job named like the stream: its events are a job's, not the fleet's.
    std::vector<log_record> jobs{{node_stream, 1, "job bytes"}};
    REQUIRE_FALSE(log->append(jobs, {}, fleet));
    CHECK(log->last_position() == 1);
    auto ids = log->job_ids();
    REQUIRE(ids);
    CHECK(*ids == std::vector<std::string>{node_stream});
  }
  auto log = open_log(dir / "db");
  auto s = log->read_fleet(node_stream);
  REQUIRE(s);
  CHECK_FALSE(s->snapshot);
  REQUIRE(s->events.size() == 2);
  CHECK(s->events[1].seq == 2);
  node_registry_config cfg;
  auto replayed = replay_nodes(*log, cfg);
  REQUIRE(replayed);
  CHECK(replayed->seq == 2);
  CHECK(replayed->tail.events == 2);
  CHECK(replayed->table.nodes.size() == 2);
  CHECK(replayed->table.nodes["x"].quarantined());
  MESSAGE("a snapshot at seq 3 with event 3 removes events 1..3");
  auto t = recoverd::apply(replayed->table, node_cleared{"x", "op", 30});
  fleet_records next;
  next.events = {node_rec(3, node_cleared{"x", "op", 30})};
  next.snapshots = {{node_stream, 3, encode_node_snapshot(t)}};
  REQUIRE_FALSE(log->append({}, {}, next));
  fleet_records after;
  after.events = {node_rec(4, separation("z", 40))};
  REQUIRE_FALSE(log->append({}, {}, after));
  s = log->read_fleet(node_stream);
  REQUIRE(s);
  REQUIRE(s->snapshot);
  CHECK(s->snapshot->seq == 3);
  REQUIRE(s->events.size() == 1);
  CHECK(s->events[0].seq == 4);
  replayed = replay_nodes(*log, cfg);
  REQUIRE(replayed);
  CHECK(replayed->seq == 4);
  CHECK(replayed->tail.events == 1);
  CHECK(replayed->table.nodes.size() == 3);
  CHECK_FALSE(replayed->table.nodes["x"].quarantined());
  CHECK(replayed->table.nodes["z"].quarantined());
  MESSAGE("the job's events are untouched");
  auto job = log->read(node_stream, 1, 10);
  REQUIRE(job);
  REQUIRE(job->size() == 1);
  CHECK((*job)[0].bytes == "job bytes");
}

TEST_CASE("an undecodable node record stops the replay with its seq") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  fleet_records fleet;
  fleet.events = {node_rec(1, separation("x", 10)),
                  {node_stream, 2, "\xff\xff not a record"}};
  REQUIRE_FALSE(log->append({}, {}, fleet));
  auto replayed = replay_nodes(*log, node_registry_config{});
  REQUIRE_FALSE(replayed);
  CHECK(message_of(replayed.error()).find("node stream event 2")
        != std::string::npos);
}
