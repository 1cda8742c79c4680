#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/job_model.hpp"
#include "fixtures/jobs.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/encoding.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"

using namespace recoverd;
using namespace recoverd::storage;

namespace {

std::unique_ptr<event_log> open_log(const std::string& path, bool sync = true) {
  event_log_options opts;
  opts.path = path;
  opts.sync = sync;
  opts.write_buffer_size = 64 * 1024; // tiny: exercise flushes
  auto log = event_log::open(opts);
  REQUIRE_MESSAGE(log, (log ? "" : message_of(log.error())));
  return std::move(*log);
}

log_record rec(const std::string& job, uint64_t seq) {
  return {job, seq, job + "#" + std::to_string(seq)};
}

} // namespace

TEST_CASE("keys sort by job, then by sequence number") {
  CHECK(event_key("a", 2) < event_key("a", 10));
  CHECK(event_key("a", 255) < event_key("a", 256));
  CHECK(event_key("a", UINT64_MAX) < event_key("ab", 0));
  CHECK(event_key("a", UINT64_MAX) < job_upper_bound("a"));
  auto key = event_key("job-1", 77);
  auto parsed = parse_event_key(key);
  REQUIRE(parsed);
  CHECK(parsed->first == "job-1");
  CHECK(parsed->second == 77);
  CHECK_FALSE(parse_event_key("short"));
}

TEST_CASE("append, read, tail, snapshot, and a reopen that finds everything") {
  test::temp_dir dir;
  auto path = dir / "db";
  {
    auto log = open_log(path);
    CHECK(log->incarnation() == 1);
    CHECK(log->last_position() == 0);
    MESSAGE("one batch across two jobs, interleaved");
    REQUIRE_FALSE(log->append({rec("a", 1), rec("b", 1), rec("a", 2)}));
    REQUIRE_FALSE(log->append({rec("b", 2)}, {{"a", 2, "snap-a-2"}}));
    CHECK(log->last_position() == 4);
    auto a = log->read("a", 1, 100);
    REQUIRE(a);
    REQUIRE(a->size() == 2);
    CHECK((*a)[0].seq == 1);
    CHECK((*a)[0].bytes == "a#1");
    CHECK((*a)[1].bytes == "a#2");
    auto from2 = log->read("a", 2, 100);
    REQUIRE(from2);
    REQUIRE(from2->size() == 1);
    CHECK((*from2)[0].seq == 2);
    auto limited = log->read("b", 1, 1);
    REQUIRE(limited);
    CHECK(limited->size() == 1);
    MESSAGE("the global order is the append order");
    auto tail = log->tail(1, 100);
    REQUIRE(tail);
    REQUIRE(tail->size() == 4);
    CHECK((*tail)[0].job_id == "a");
    CHECK((*tail)[1].job_id == "b");
    CHECK((*tail)[2].job_id == "a");
    CHECK((*tail)[2].seq == 2);
    CHECK((*tail)[3].bytes == "b#2");
    CHECK((*tail)[3].position == 4);
    auto tail3 = log->tail(3, 100);
    REQUIRE(tail3);
    CHECK(tail3->size() == 2);
    auto snap = log->snapshot("a");
    REQUIRE(snap);
    REQUIRE(snap->has_value());
    CHECK((*snap)->seq == 2);
    CHECK((*snap)->bytes == "snap-a-2");
    auto none = log->snapshot("b");
    REQUIRE(none);
    CHECK_FALSE(none->has_value());
  }
  MESSAGE("reopen");
  auto log = open_log(path);
  CHECK(log->incarnation() == 2);
  CHECK(log->last_position() == 4);
  auto ids = log->job_ids();
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"a", "b"});
  auto last_a = log->last_seq("a");
  REQUIRE(last_a);
  CHECK(*last_a == 2);
  auto last_x = log->last_seq("x");
  REQUIRE(last_x);
  CHECK(*last_x == 0);
  auto b = log->read("b", 1, 100);
  REQUIRE(b);
  CHECK(b->size() == 2);
  auto snap = log->snapshot("a");
  REQUIRE(snap);
  CHECK((*snap)->bytes == "snap-a-2");
  MESSAGE("appends continue the global order");
  REQUIRE_FALSE(log->append({rec("c", 1)}));
  auto tail = log->tail(5, 10);
  REQUIRE(tail);
  REQUIRE(tail->size() == 1);
  CHECK(tail->front().job_id == "c");
}

TEST_CASE("job ids that prefix each other stay apart") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  REQUIRE_FALSE(log->append({rec("a", 1), rec("ab", 1), rec("a", 2)}));
  auto a = log->read("a", 1, 100);
  REQUIRE(a);
  CHECK(a->size() == 2);
  auto last = log->last_seq("a");
  REQUIRE(last);
  CHECK(*last == 2);
  auto ids = log->job_ids();
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"a", "ab"});
}

TEST_CASE("a second open of the same directory fails with a clear message") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  event_log_options opts;
  opts.path = dir / "db";
  auto second = event_log::open(opts);
  REQUIRE_FALSE(second);
  CHECK(errc_of(second.error()) == errc::storage_failure);
  CHECK(message_of(second.error()).find("in use by another recoverd")
        != std::string::npos);
}

TEST_CASE("a read-only open sees the data while the writer holds the lock") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  REQUIRE_FALSE(log->append({rec("a", 1)}));
  event_log_options opts;
  opts.path = dir / "db";
  opts.read_only = true;
  auto reader = event_log::open(opts);
  REQUIRE_MESSAGE(reader, (reader ? "" : message_of(reader.error())));
  auto a = (*reader)->read("a", 1, 10);
  REQUIRE(a);
  CHECK(a->size() == 1);
  CHECK((*reader)->append({rec("a", 2)}));
  opts.path = dir / "missing";
  auto missing = event_log::open(opts);
  CHECK_FALSE(missing);
}

TEST_CASE("a write failure is reported and nothing is written") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  REQUIRE_FALSE(log->append({rec("a", 1)}));
  log->inject_write_failure("No space left on device");
  auto err = log->append({rec("a", 2)});
  REQUIRE(err);
  CHECK(errc_of(err) == errc::storage_failure);
  CHECK(message_of(err).find("No space left") != std::string::npos);
  CHECK(log->last_position() == 1);
  auto last = log->last_seq("a");
  REQUIRE(last);
  CHECK(*last == 1);
}

TEST_CASE("the batch sync policy syncs the WAL on demand") {
  test::temp_dir dir;
  auto log = open_log(dir / "db", false);
  REQUIRE_FALSE(log->append({rec("a", 1)}));
  CHECK_FALSE(log->sync_wal());
}

TEST_CASE("event records round-trip through the codec") {
  auto spec = test::make_job("j1", 2, 2);
  spec.annotations = {{"k", "v"}};
  std::vector<event> evs{
    {1, 1000, job_put{spec, true}},
    {2, 1001, annotations_changed{{{"a", "b"}}, {"k"}, "platform"}},
    {3, 1002, job_inited{make_init_config(spec), "taskd"}},
    {4, 1003, job_registered{"taskd"}},
    {5, 1004, subscriber_attached{1, "taskd", "ipv4:127.0.0.1:5"}},
    {6, 1005, subscriber_detached{1, "cancelled"}},
    {7, 1006, device_faults_reported{"UnHealthy",
                                     {{"n0", "1", {"80E01801"}, "L2"}}}},
    {8, 1007, job_deleted{}},
  };
  for (const auto& ev : evs) {
    auto back = decode_event(encode_event(ev));
    REQUIRE_MESSAGE(back, kind_name(ev.body));
    CHECK(back->seq == ev.seq);
    CHECK(back->time_ms == ev.time_ms);
    CHECK(std::string{kind_name(back->body)} == kind_name(ev.body));
  }
  auto put = decode_event(encode_event(evs[0]));
  REQUIRE(put);
  const auto& p = std::get<job_put>(put->body);
  CHECK(p.created);
  CHECK(p.spec.pods.size() == 2);
  CHECK(p.spec.pods[1].devices[1].rank_id == "3");
  CHECK(p.spec.annotations.at("k") == "v");
  auto faults = decode_event(encode_event(evs[6]));
  REQUIRE(faults);
  const auto& f = std::get<device_faults_reported>(faults->body);
  CHECK(f.health_state == "UnHealthy");
  REQUIRE(f.faults.size() == 1);
  CHECK(f.faults[0].fault_codes == std::vector<std::string>{"80E01801"});
  MESSAGE("garbage is rejected, not misread");
  CHECK_FALSE(decode_event("\xff\xff\xff garbage"));
  CHECK_FALSE(decode_event(""));
}

TEST_CASE("snapshots round-trip the whole state") {
  job_model m;
  for (const auto& ev : std::vector<event>{
         {1, 10, job_put{test::make_job("j1"), true}},
         {2, 11, job_inited{make_init_config(test::make_job("j1")), "t"}},
         {3, 12, job_registered{"t"}},
         {4, 13, subscriber_attached{1, "t", "p"}},
         {5, 14, device_faults_reported{"SubHealthy", {{"n1", "2", {"X"}, ""}}}},
       })
    m = apply(m, ev);
  m.rec.state = "WaitReportRecoverStrategyState";
  m.rec.uuid = "U-1";
  m.rec.faults = {{"8", "1"}, {"3", "0"}};
  m.rec.fault_pods = {1};
  m.rec.decided = {"retry"};
  m.rec.results = {{405, "retry", {"9"}}};
  m.rec.outbox = process_signal{"U-1", "j1", "globalFault", {"on_global_rank"},
                                {{"8", "1"}}, "", 33, {"1"}, ""};
  m.rec.deadline_ms = 123;
  m.rec.deadline_event = "receiveTimeout";
  m.rec.origin_uids = {{1, "uid"}};
  m.rec.in_place_pods = {1};
  m.rec.platform_round = true;
  auto back = decode_snapshot(encode_snapshot(m));
  REQUIRE(back);
  CHECK(back->rec.state == m.rec.state);
  CHECK(back->rec.uuid == "U-1");
  CHECK(back->rec.faults == m.rec.faults);
  CHECK(back->rec.fault_pods == m.rec.fault_pods);
  CHECK(back->rec.decided == m.rec.decided);
  REQUIRE(back->rec.results.size() == 1);
  CHECK(back->rec.results[0].isolate_ranks == std::vector<std::string>{"9"});
  REQUIRE(back->rec.outbox.has_value());
  CHECK(back->rec.outbox->timeout == 33);
  CHECK(back->rec.deadline_ms == 123);
  CHECK(back->rec.deadline_event == "receiveTimeout");
  CHECK(back->rec.origin_uids.at(1) == "uid");
  CHECK(back->rec.in_place_pods == m.rec.in_place_pods);
  CHECK(back->rec.platform_round);
  CHECK(back->seq == 5);
  CHECK(back->exists);
  CHECK(back->registered);
  CHECK(back->inited);
  CHECK(back->init.strategies == m.init.strategies);
  CHECK(back->rec.label == "on");
  CHECK(back->subscriber_generation == 1);
  CHECK(back->health_state == "SubHealthy");
  CHECK(back->device_faults.size() == 1);
  CHECK(back->spec.pods.size() == m.spec.pods.size());
  CHECK(back->created_at_ms == 10);
  CHECK(back->updated_at_ms == 14);
}

TEST_CASE("replay folds snapshot plus tail and separates deleted jobs") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto spec = test::make_job("live");
  std::vector<event> live{
    {1, 1, job_put{spec, true}},
    {2, 2, job_inited{make_init_config(spec), "t"}},
    {3, 3, job_registered{"t"}},
    {4, 4, annotations_changed{{{"x", "1"}}, {}, "platform"}},
  };
  job_model at2 = fold({}, {live[0], live[1]});
  std::vector<log_record> records;
  for (const auto& ev : live)
    records.push_back({"live", ev.seq, encode_event(ev)});
  records.push_back(
    {"gone", 1, encode_event({1, 1, job_put{test::make_job("gone"), true}})});
  records.push_back({"gone", 2, encode_event({2, 2, job_deleted{}})});
  REQUIRE_FALSE(
    log->append(records, {{"live", 2, encode_snapshot(at2)}}));
  auto all = replay_all(*log);
  REQUIRE(all);
  REQUIRE(all->live.size() == 1);
  const auto& j = all->live[0];
  CHECK(j.from_snapshot);
  CHECK(j.events_replayed == 2);
  CHECK(j.state.seq == 4);
  CHECK(j.state.registered);
  CHECK(j.state.spec.annotations.at("x") == "1");
  CHECK(all->deleted == std::vector<std::string>{"gone"});
  MESSAGE("replay to a point in the past");
  auto past = replay_job(*log, "live", 3);
  REQUIRE(past);
  CHECK(past->state.seq == 3);
  CHECK(past->state.spec.annotations.count("x") == 0);
}

TEST_CASE("replay refuses a gap in a job's sequence") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto spec = test::make_job("j");
  REQUIRE_FALSE(log->append(
    {{"j", 1, encode_event({1, 1, job_put{spec, true}})},
     {"j", 3, encode_event({3, 3, job_registered{"t"}})}}));
  auto all = replay_all(*log);
  REQUIRE_FALSE(all);
  CHECK(errc_of(all.error()) == errc::corrupt_record);
}
