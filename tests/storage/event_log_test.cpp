#include <doctest/doctest.h>

#include <google/protobuf/util/message_differencer.h>

#include <filesystem>
#include <fstream>

#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "events.pb.h"
#include "fixtures/jobs.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/encoding.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"
#include "storage/wire_form.hpp"
#include "tools/dst/sim.hpp"

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

// A job in the middle of a flow, with every part of its state set.
job_model busy_model() {
  job_model m;
  for (const auto& ev : std::vector<event>{
         {1, 10, job_put{test::make_job("j1"), true}},
         {2, 11, job_inited{make_init_config(test::make_job("j1")), "t"}},
         {3, 12, job_registered{"t"}},
         {4, 13, subscriber_attached{1, "t", "p"}},
         {5, 14, device_faults_reported{"SubHealthy", {{"n1", "2", {"X"}, ""}}}},
       })
    m = apply(m, ev);
  m.rec.flow.state = st::wait_recover_strategy;
  m.rec.flow.uuid = "U-1";
  m.rec.flow.faults = {{"8", fault_type::normal}, {"3", fault_type::uce}};
  m.rec.flow.fault_pods = {1};
  m.rec.flow.decided = {"retry"};
  m.rec.flow.results = {{405, "retry", {"9"}}};
  m.rec.flow.outbox = process_signal{"U-1", "j1", "globalFault", {"on_global_rank"},
                                {{"8", "1"}}, "", 33, {"1"}, ""};
  m.rec.flow.deadline_ms = 123;
  m.rec.flow.deadline_event = ev::receive_timeout;
  m.rec.flow.origin_uids = {{1, "uid"}};
  m.rec.flow.in_place_pods = {1};
  m.rec.flow.platform_round = true;
  return m;
}

TEST_CASE("snapshots round-trip the whole state") {
  auto m = busy_model();
  auto back = decode_snapshot(encode_snapshot(m));
  REQUIRE(back);
  CHECK(back->rec.flow.state == m.rec.flow.state);
  CHECK(back->rec.flow.uuid == "U-1");
  CHECK(back->rec.flow.faults == m.rec.flow.faults);
  CHECK(back->rec.flow.fault_pods == m.rec.flow.fault_pods);
  CHECK(back->rec.flow.decided == m.rec.flow.decided);
  REQUIRE(back->rec.flow.results.size() == 1);
  CHECK(back->rec.flow.results[0].isolate_ranks == std::vector<std::string>{"9"});
  REQUIRE(back->rec.flow.outbox.has_value());
  CHECK(back->rec.flow.outbox->timeout == 33);
  CHECK(back->rec.flow.deadline_ms == 123);
  CHECK(back->rec.flow.deadline_event == ev::receive_timeout);
  CHECK(back->rec.flow.origin_uids.at(1) == "uid");
  CHECK(back->rec.flow.in_place_pods == m.rec.flow.in_place_pods);
  CHECK(back->rec.flow.platform_round);
  CHECK(back->seq == 5);
  CHECK(back->exists);
  CHECK(back->registered);
  CHECK(back->inited);
  CHECK(back->init.strategies == m.init.strategies);
  CHECK(back->rec.job.label == "on");
  CHECK(back->subscriber_generation == 1);
  CHECK(back->health_state == "SubHealthy");
  CHECK(back->device_faults.size() == 1);
  CHECK(back->spec.pods.size() == m.spec.pods.size());
  CHECK(back->created_at_ms == 10);
  CHECK(back->updated_at_ms == 14);
}

// Whether two Snapshot records hold the same fields and values (their bytes
// may differ: map entries and fields come in no fixed order).
bool same_snapshot(const std::string& x, const std::string& y) {
  recoverd::events::v1::Snapshot a;
  recoverd::events::v1::Snapshot b;
  return a.ParseFromString(x) && b.ParseFromString(y)
         && google::protobuf::util::MessageDifferencer::Equals(a, b);
}

TEST_CASE("a snapshot with its spec's bytes given decodes as the one that "
          "encodes the spec, in full and by its head") {
  auto m = busy_model();
  m.spec.annotations["x"] = "1";
  auto spec_bytes = encode_spec(m.spec);
  REQUIRE_FALSE(spec_bytes.empty());
  auto spliced = encode_snapshot(m, spec_bytes);
  auto whole = encode_snapshot(m);
  CHECK(same_snapshot(spliced, whole));
  auto a = decode_snapshot(spliced);
  REQUIRE(a);
  // Decoded, it encodes as it was: nothing was lost or changed.
  CHECK(same_snapshot(encode_snapshot(*a), whole));
  CHECK(a->spec.annotations.at("x") == "1");
  spec_size size_a;
  spec_size size_b;
  auto head_a = decode_snapshot_head(spliced, size_a);
  auto head_b = decode_snapshot_head(whole, size_b);
  REQUIRE(head_a);
  REQUIRE(head_b);
  CHECK(size_a.pods == size_b.pods);
  CHECK(size_a.ranks == size_b.ranks);
  CHECK(head_a->spec.job_id == "j1");
  CHECK(same_snapshot(encode_snapshot(*head_a), encode_snapshot(*head_b)));
  MESSAGE("the state's own spec is not read");
  auto other = m;
  other.spec = test::make_job("elsewhere", 1, 8);
  CHECK(same_snapshot(encode_snapshot(other, spec_bytes), whole));
  CHECK_FALSE(same_snapshot(encode_snapshot(other), whole));
}

TEST_CASE("a snapshot after events is the whole record of the folded model; "
          "the spec's bytes are kept while the events leave the spec be") {
  auto m = busy_model();
  m.spec.annotations["x"] = "1";
  auto before = encode_snapshot(m);
  std::optional<std::string> spec_bytes;
  std::vector<event> keep{
    {m.seq + 1, 20, subscriber_attached{2, "taskd", "ipv4:10.0.0.1:1"}}};
  auto kept = encode_snapshot_after(m, spec_bytes, keep);
  CHECK(same_snapshot(kept, encode_snapshot(fold(m, keep))));
  REQUIRE(spec_bytes.has_value());
  CHECK(*spec_bytes == encode_spec(m.spec));
  MESSAGE("the model itself, its spec included, is as it was");
  CHECK(same_snapshot(encode_snapshot(m), before));
  MESSAGE("an event that touches the spec: the snapshot encodes the new one; "
          "the kept bytes are neither read nor changed");
  std::vector<event> change{
    {m.seq + 1, 20, annotations_changed{{{"x", "2"}}, {}, "platform"}}};
  auto stale = *spec_bytes;
  auto changed = encode_snapshot_after(m, spec_bytes, change);
  auto back = decode_snapshot(changed);
  REQUIRE(back);
  CHECK(back->spec.annotations.at("x") == "2");
  CHECK(same_snapshot(changed, encode_snapshot(fold(m, change))));
  CHECK(*spec_bytes == stale);
  CHECK(m.spec.annotations.at("x") == "1");
}

TEST_CASE("a snapshot's head decodes all but the spec's details, whose pods "
          "and ranks it counts; malformed bytes fail as in full") {
  auto m = busy_model();
  m.spec.annotations["x"] = "1";
  auto bytes = encode_snapshot(m);
  auto full = decode_snapshot(bytes);
  REQUIRE(full);
  spec_size size;
  auto head = decode_snapshot_head(bytes, size);
  REQUIRE(head);
  CHECK(size.pods == static_cast<int32_t>(m.spec.pods.size()));
  CHECK(size.pods > 1);
  CHECK(size.ranks == to_summary(m, false).ranks);
  CHECK(size.ranks > size.pods);
  CHECK(head->spec.job_id == "j1");
  CHECK(head->spec.name == m.spec.name);
  CHECK(head->spec.ns == m.spec.ns);
  CHECK_FALSE(head->spec.name.empty());
  CHECK(head->spec.pods.empty());
  CHECK(head->spec.annotations.empty());
  MESSAGE("the rest is the full decode's: the same snapshot once its spec is "
          "cut the same way");
  auto cut = *full;
  cut.spec = job_spec{};
  cut.spec.job_id = m.spec.job_id;
  cut.spec.name = m.spec.name;
  cut.spec.ns = m.spec.ns;
  // Field by field: the bytes of two equal states may differ (protobuf
  // maps serialize in no fixed order).
  CHECK(dst::first_difference(*head, cut).empty());
  CHECK_FALSE(dst::first_difference(*head, *full).empty());
  CHECK(to_digest(*head).has_value() == to_digest(*full).has_value());
  MESSAGE("malformed or truncated bytes fail, as the full decode does");
  for (auto bad : {std::string{"\xff\xff garbage"},
                   bytes.substr(0, bytes.size() / 2), std::string{"\x1a"}}) {
    spec_size ignored;
    CHECK_FALSE(decode_snapshot(bad));
    CHECK_FALSE(decode_snapshot_head(bad, ignored));
  }
}

TEST_CASE("a snapshot whose spec comes in two pieces decodes by its head as "
          "in full, where the pieces merge") {
  auto m = busy_model();
  auto other = m;
  other.spec = test::make_job("elsewhere", 1, 8);
  recoverd::events::v1::Snapshot mine;
  recoverd::events::v1::Snapshot theirs;
  REQUIRE(mine.ParseFromString(encode_snapshot(m)));
  REQUIRE(theirs.ParseFromString(encode_snapshot(other)));
  auto spec_a = mine.state().spec().SerializeAsString();
  auto spec_b = theirs.state().spec().SerializeAsString();
  // A second state field that holds only a spec: a parser merges it into
  // the first.
  recoverd::events::v1::Snapshot extra;
  *extra.mutable_state()->mutable_spec() = theirs.state().spec();
  auto two_states = encode_snapshot(m) + extra.SerializeAsString();
  // One state field with two spec fields.
  auto state = mine.state();
  state.clear_spec();
  auto state_bytes = state.SerializeAsString();
  for (const auto* x : {&spec_a, &spec_b}) {
    append_message_head(state_bytes,
                        recoverd::events::v1::JobState::kSpecFieldNumber,
                        x->size());
    state_bytes += *x;
  }
  recoverd::events::v1::Snapshot top;
  top.set_version(mine.version());
  top.set_seq(mine.seq());
  auto two_specs = top.SerializeAsString();
  append_message_head(two_specs,
                      recoverd::events::v1::Snapshot::kStateFieldNumber,
                      state_bytes.size());
  two_specs += state_bytes;
  for (const auto& bytes : {two_states, two_specs}) {
    auto full = decode_snapshot(bytes);
    REQUIRE(full);
    // The pieces merged: the pods add up, the id is the later piece's.
    CHECK(full->spec.pods.size() == m.spec.pods.size() + 1);
    CHECK(full->spec.job_id == "elsewhere");
    spec_size size;
    auto head = decode_snapshot_head(bytes, size);
    REQUIRE(head);
    auto full_size = size_of(full->spec);
    CHECK(size.pods == full_size.pods);
    CHECK(size.ranks == full_size.ranks);
    CHECK(head->spec.job_id == full->spec.job_id);
    CHECK(head->spec.name == full->spec.name);
    CHECK(head->spec.ns == full->spec.ns);
  }
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
  REQUIRE(all->deleted.size() == 1);
  CHECK(all->deleted[0].job_id == "gone");
  CHECK(all->deleted[0].seq == 2);
  CHECK(all->deleted[0].deleted_at_ms == 2);
  CHECK(all->from_snapshot == 1);
  CHECK(all->events_replayed == 4); // 2 of "live" after its snapshot, 2 of "gone"
  MESSAGE("with use_digests and no digest stored (as after a crash), the "
          "job that may stay dormant is folded from its snapshot's head: "
          "its digest is the one the full fold gives");
  auto light = replay_all(*log, 0, true);
  REQUIRE(light);
  CHECK(light->live.empty());
  REQUIRE(light->dormant.size() == 1);
  REQUIRE(light->fresh_digests.size() == 1);
  auto expected = digest_record_of(j.state);
  REQUIRE(expected);
  CHECK(light->fresh_digests[0].bytes == expected->bytes);
  CHECK(light->fresh_digests[0].seq == 4);
  CHECK(light->dormant[0].summary.ranks == to_summary(j.state, false).ranks);
  CHECK(light->dormant[0].summary.ranks > 0);
  CHECK(light->deleted.size() == 1);
  CHECK(light->from_snapshot == 1);
  CHECK(light->events_replayed == 4);
  MESSAGE("a spec put after the snapshot is counted from the event");
  auto bigger = test::make_job("live");
  bigger.pods.push_back(bigger.pods.back());
  bigger.pods.back().pod_rank += 1;
  bigger.pods.back().uid += "-new";
  REQUIRE_FALSE(log->append({{"live", 5, encode_event({5, 5, job_put{bigger,
                                                                     false}})}}));
  auto after_put = replay_all(*log, 0, true);
  REQUIRE(after_put);
  REQUIRE(after_put->dormant.size() == 1);
  CHECK(after_put->dormant[0].summary.pods
        == static_cast<int32_t>(bigger.pods.size()));
  CHECK(after_put->dormant[0].summary.pods
        == to_summary(j.state, false).pods + 1);
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

namespace {

// The encoded events of a job: a put, then annotation changes up to `n`.
std::vector<log_record> job_events(const std::string& id, uint64_t n,
                                   uint64_t first = 1) {
  std::vector<log_record> result;
  for (auto seq = first; seq <= n; ++seq) {
    event ev{seq, static_cast<int64_t>(seq), annotations_changed{}};
    if (seq == 1)
      ev.body = job_put{test::make_job(id), true};
    else
      std::get<annotations_changed>(ev.body).set = {
        {"step", std::to_string(seq)}};
    result.push_back({id, seq, encode_event(ev)});
  }
  return result;
}

// What a write torn by a crash leaves: the first half of a record.
std::string torn(const std::string& bytes) {
  return bytes.substr(0, bytes.size() / 2);
}

// The newest write-ahead log file of a RocksDB directory.
std::filesystem::path newest_wal(const std::string& dir) {
  std::filesystem::path result;
  for (const auto& f : std::filesystem::directory_iterator{dir})
    if (f.path().extension() == ".log"
        && (result.empty() || f.path().filename() > result.filename()))
      result = f.path();
  return result;
}

} // namespace

TEST_CASE("replay after a snapshot reads only the events after it") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto records = job_events("j", 10);
  auto at7 = job_model{};
  for (size_t i = 0; i < 7; ++i) {
    auto ev = decode_event(records[i].bytes);
    REQUIRE(ev);
    at7 = apply(std::move(at7), *ev);
  }
  // Everything the snapshot covers is garbage: a replay that read any of it
  // would fail (an undecodable record that is not a job's last is an error).
  for (size_t i = 0; i < 7; ++i)
    records[i].bytes = "\xff\xff not an event";
  REQUIRE_FALSE(log->append(records, {{"j", 7, encode_snapshot(at7)}}));
  auto all = replay_all(*log);
  REQUIRE_MESSAGE(all, (all ? "" : message_of(all.error())));
  REQUIRE(all->live.size() == 1);
  CHECK(all->live[0].from_snapshot);
  CHECK(all->live[0].events_replayed == 3);
  CHECK(all->events_replayed == 3);
  CHECK(all->from_snapshot == 1);
  CHECK(all->live[0].state.seq == 10);
  CHECK(all->live[0].state.spec.annotations.at("step") == "10");
  CHECK(all->discarded.empty());
  MESSAGE("the garbage is real: replaying to before the snapshot reads it");
  auto past = replay_job(*log, "j", 5);
  REQUIRE_FALSE(past);
  CHECK(message_of(past.error()).find("job j event 1") != std::string::npos);
}

TEST_CASE("a torn last record of a job is discarded; one in the middle is an "
          "error naming job and seq") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto good = job_events("good", 4);
  auto j = job_events("j", 4);
  REQUIRE_FALSE(decode_event(torn(j[3].bytes)));
  j[3].bytes = torn(j[3].bytes);
  // Interleaved with another job, so that the torn record is not the last
  // of the whole log.
  REQUIRE_FALSE(log->append({j[0], good[0], j[1], good[1], j[2], j[3]}));
  REQUIRE_FALSE(log->append({good[2], good[3]}));
  MESSAGE("a job whose only record is torn never existed");
  auto only = job_events("only", 1);
  only[0].bytes = torn(only[0].bytes);
  REQUIRE_FALSE(log->append(only));
  auto all = replay_all(*log);
  REQUIRE_MESSAGE(all, (all ? "" : message_of(all.error())));
  REQUIRE(all->live.size() == 2);
  CHECK(all->deleted.empty());
  REQUIRE(all->discarded.size() == 2);
  CHECK(all->discarded[0].job_id == "j");
  CHECK(all->discarded[0].seq == 4);
  CHECK(all->discarded[0].bytes == j[3].bytes.size());
  CHECK_FALSE(all->discarded[0].reason.empty());
  CHECK(all->discarded[1].job_id == "only");
  CHECK(all->discarded[1].seq == 1);
  const auto& replayed = all->live[1];
  REQUIRE(replayed.state.spec.job_id == "j");
  CHECK(replayed.state.seq == 3);
  CHECK(replayed.state.spec.annotations.at("step") == "3");
  CHECK(replayed.events_replayed == 3);
  CHECK(all->live[0].state.seq == 4);
  MESSAGE("discarding removes the record and its index entry, keeps the rest");
  auto last = log->last_position();
  auto found = log->discard("j", 4);
  REQUIRE(found);
  CHECK(*found);
  CHECK(log->last_position() == last);
  auto read = log->read("j", 1, 100);
  REQUIRE(read);
  CHECK(read->size() == 3);
  auto tail = log->tail(1, 100);
  REQUIRE_MESSAGE(tail, (tail ? "" : message_of(tail.error())));
  CHECK(tail->size() == 8); // 9 appended, 1 discarded
  MESSAGE("the job's next event takes the seq; replay is clean again");
  auto redo = job_events("j", 4, 4);
  REQUIRE_FALSE(log->append(redo));
  auto again = replay_all(*log);
  REQUIRE(again);
  CHECK(again->discarded.size() == 1); // only "only" is still there
  CHECK(again->live[1].state.seq == 4);
  MESSAGE("an undecodable record followed by another one is corruption");
  auto k = job_events("k", 3);
  k[1].bytes = torn(k[1].bytes);
  REQUIRE_FALSE(log->append(k));
  auto broken = replay_all(*log);
  REQUIRE_FALSE(broken);
  CHECK(errc_of(broken.error()) == errc::corrupt_record);
  CHECK(message_of(broken.error()).find("job k event 2") != std::string::npos);
  auto up_to_2 = replay_job(*log, "k", 2);
  CHECK_FALSE(up_to_2); // a later record exists, whatever the query's end
}

TEST_CASE("a WAL whose last write was torn reopens with every earlier append "
          "(point-in-time recovery)") {
  test::temp_dir dir;
  auto path = dir / "db";
  auto a = job_events("a", 3);
  auto b = job_events("b", 1);
  {
    auto log = open_log(dir / "live");
    REQUIRE_FALSE(log->append({a[0]}));
    REQUIRE_FALSE(log->append({a[1], b[0]}));
    // The last append, as one WriteBatch, is the WAL's last record.
    REQUIRE_FALSE(log->append({a[2]}, {{"a", 3, "snapshot"}}));
    // A crash leaves the files as they are now (a clean close would flush
    // the WAL into table files).
    std::filesystem::copy(dir / "live", path);
  }
  auto wal = newest_wal(path);
  REQUIRE_FALSE(wal.empty());
  auto size = std::filesystem::file_size(wal);
  REQUIRE(size > 64);
  SUBCASE("truncated in the middle of the record") {
    std::filesystem::resize_file(wal, size - 20);
  }
  SUBCASE("garbage in the record (fails its checksum)") {
    std::fstream f{wal, std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(static_cast<std::streamoff>(size - 30));
    f.write("\x13\x37\x13\x37\x13\x37\x13\x37", 8);
  }
  auto log = open_log(path);
  MESSAGE("the torn batch is gone as a whole, everything before is there");
  auto ra = log->read("a", 1, 10);
  REQUIRE(ra);
  CHECK(ra->size() == 2);
  auto rb = log->read("b", 1, 10);
  REQUIRE(rb);
  CHECK(rb->size() == 1);
  auto snap = log->snapshot("a");
  REQUIRE(snap);
  CHECK_FALSE(snap->has_value());
  CHECK(log->last_position() == 3);
  auto all = replay_all(*log);
  REQUIRE(all);
  CHECK(all->live.size() == 2);
  CHECK(all->discarded.empty());
  MESSAGE("appends continue where the log ends");
  REQUIRE_FALSE(log->append({a[2]}));
  auto tail = log->tail(1, 10);
  REQUIRE(tail);
  REQUIRE(tail->size() == 4);
  CHECK(tail->back().seq == 3);
}

TEST_CASE("a purge removes a deleted job's events, index entries and "
          "snapshot, in steps, and nothing else") {
  test::temp_dir dir;
  auto path = dir / "db";
  auto bytes_of = [](uint64_t seq, event_body body) {
    return encode_event({seq, 100, std::move(body)});
  };
  uint64_t last = 0;
  {
    auto log = open_log(path);
    auto keep = job_events("keep", 3);
    auto gone = job_events("gone", 2);
    auto again = job_events("again", 2);
    REQUIRE_FALSE(log->append({gone[0], keep[0], again[0], gone[1], keep[1],
                               again[1]},
                              {{"gone", 2, "snapshot-gone"}}));
    REQUIRE_FALSE(log->append({{"again", 3, bytes_of(3, job_deleted{})},
                               keep[2]}));
    // "again" was re-created after its deletion: its new events and newer
    // snapshot are not part of the deleted history.
    REQUIRE_FALSE(log->append(
      {{"again", 4, bytes_of(4, job_put{test::make_job("again"), true})}},
      {{"again", 4, "snapshot-again"}}));
    // The deletion of "gone" is the newest entry of the order.
    REQUIRE_FALSE(log->append({{"gone", 3, bytes_of(3, job_deleted{})}}));
    last = log->last_position();
    REQUIRE(last == 10);
    auto plan = log->plan_purge({{"gone", 3}, {"again", 3}});
    int steps = 0;
    while (!plan.scanned()) {
      REQUIRE_FALSE(log->scan_purge(plan, 3));
      ++steps;
    }
    CHECK(steps >= 3);
    CHECK(plan.positions.size() == 6);
    auto stats = log->commit_purge(plan);
    REQUIRE_MESSAGE(stats, (stats ? "" : message_of(stats.error())));
    CHECK(stats->jobs == 2);
    CHECK(stats->events == 6);
    CHECK(stats->index_entries == 6);
    CHECK(stats->snapshots == 1);
  }
  MESSAGE("after a reopen");
  auto log = open_log(path);
  CHECK(log->last_position() == last); // positions are never reused
  auto ids = log->job_ids();
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"again", "keep"});
  auto gone = log->read("gone", 1, 10);
  REQUIRE(gone);
  CHECK(gone->empty());
  auto gone_snap = log->snapshot("gone");
  REQUIRE(gone_snap);
  CHECK_FALSE(gone_snap->has_value());
  auto again = log->read("again", 1, 10);
  REQUIRE(again);
  REQUIRE(again->size() == 1);
  CHECK(again->front().seq == 4);
  auto again_snap = log->snapshot("again");
  REQUIRE(again_snap);
  REQUIRE(again_snap->has_value());
  CHECK((*again_snap)->bytes == "snapshot-again");
  auto tail = log->tail(1, 100);
  REQUIRE_MESSAGE(tail, (tail ? "" : message_of(tail.error())));
  std::vector<std::string> order;
  for (const auto& x : *tail)
    order.push_back(x.job_id + "#" + std::to_string(x.seq));
  CHECK(order
        == std::vector<std::string>{"keep#1", "keep#2", "keep#3", "again#4"});
  REQUIRE_FALSE(log->append(job_events("new", 1)));
  CHECK(log->last_position() == last + 1);
}

TEST_CASE("applying a moved event gives the same state as applying a copy") {
  recovery after;
  after.flow.state = st::wait_stop_complete;
  after.flow.uuid = "U-7";
  after.flow.faults = {{"3", fault_type::normal}};
  after.job.reset_json = std::string(300, 'r');
  flow_stepped step;
  step.input.name = ev::fault_occur;
  step.path = {st::init, after.flow.state};
  step.change = diff(recovery{}, recovery{after});
  step.annotations = {{"ProcessRecoverStatus", "recovering"}};
  auto spec = test::make_job("j", 3, 4);
  std::vector<event> evs{
    {1, 10, job_put{spec, true}},
    {2, 11, job_inited{make_init_config(spec), "t"}},
    {3, 12, job_registered{"t"}},
    {4, 13, job_put{test::make_job("j", 1, 8), false}},
    {5, 14, step},
    {6, 15, device_faults_reported{"UnHealthy", {{"n0", "1", {"X"}, "L2"}}}},
  };
  job_model copied;
  job_model moved;
  for (const auto& ev : evs) {
    copied = apply(std::move(copied), ev);
    moved = apply(std::move(moved), event{ev});
  }
  CHECK(moved.rec.flow.uuid == "U-7");
  CHECK(moved.spec.pods.size() == 1);
  CHECK(moved.spec.annotations.at("ProcessRecoverStatus") == "recovering");
  CHECK(encode_snapshot(moved) == encode_snapshot(copied));
}

TEST_CASE("with less free space than the reserve, opening and appending are "
          "refused before RocksDB runs out of space") {
  test::temp_dir dir;
  event_log_options opts;
  opts.path = dir / "db";
  // More than any disk here has free.
  opts.min_free_bytes = uint64_t{1} << 60;
  auto refused = event_log::open(opts);
  REQUIRE_FALSE(refused);
  CHECK(message_of(refused.error()).find("No space left on device")
        != std::string::npos);
  CHECK(message_of(refused.error()).find("--min-free-space")
        != std::string::npos);
  MESSAGE("without a reserve, the same directory opens");
  opts.min_free_bytes = 0;
  auto log = event_log::open(opts);
  REQUIRE(log);
  CHECK_FALSE((*log)->append({{"j", 1, "x"}}, {}));
  CHECK_FALSE((*log)->resume());
}

TEST_CASE("a digest is stored only at its job's last event and read back only "
          "while that very record is still the job's last") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  REQUIRE_FALSE(log->append(job_events("a", 3)));
  REQUIRE_FALSE(log->append(job_events("b", 2)));
  auto full = replay_all(*log);
  REQUIRE(full);
  REQUIRE(full->live.size() == 2);
  auto a = digest_record_of(full->live[0].state);
  auto b = digest_record_of(full->live[1].state);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->seq == 3);
  MESSAGE("a digest of an older state is left out");
  auto stale = *b;
  stale.seq = 1;
  auto stored = log->put_digests({*a, stale});
  REQUIRE(stored);
  CHECK(*stored == 1);
  auto digests = [&] {
    event_log::reader reader{*log};
    auto x = reader.digest("a");
    auto y = reader.digest("b");
    REQUIRE(x);
    REQUIRE(y);
    return std::make_pair(*x, *y);
  };
  auto [da, db] = digests();
  REQUIRE(da);
  CHECK(*da == a->bytes);
  CHECK_FALSE(db);
  MESSAGE("replay leaves the job with a current digest dormant, and the "
          "other too, computing its digest (as after a crash)");
  auto all = replay_all(*log, 0, true);
  REQUIRE(all);
  REQUIRE(all->dormant.size() == 2);
  CHECK(all->live.empty());
  REQUIRE(all->fresh_digests.size() == 1);
  CHECK(all->fresh_digests[0].job_id == "b");
  CHECK(all->fresh_digests[0].seq == b->seq);
  CHECK(all->fresh_digests[0].bytes == b->bytes);
  CHECK(all->dormant[1].summary.job_id == "b");
  const auto& dormant = all->dormant[0];
  auto summary = to_summary(full->live[0].state, false);
  CHECK(dormant.summary.job_id == "a");
  CHECK(dormant.summary.name == summary.name);
  CHECK(dormant.summary.ns == summary.ns);
  CHECK(dormant.summary.recovery_state == summary.recovery_state);
  CHECK(dormant.summary.pods == summary.pods);
  CHECK(dormant.summary.ranks == summary.ranks);
  CHECK(dormant.summary.last_seq == 3);
  CHECK(dormant.owner == full->live[0].state.owner);
  MESSAGE("without use_digests every job is replayed");
  auto eager = replay_all(*log);
  REQUIRE(eager);
  CHECK(eager->dormant.empty());
  CHECK(eager->live.size() == 2);
  MESSAGE("a later event makes the digest stale");
  REQUIRE_FALSE(log->append(job_events("a", 4, 4)));
  CHECK_FALSE(digests().first);
  MESSAGE("the same seq with another record does not match either");
  // Stores the digest of "a" as it is now, as a clean stop does.
  auto store_current = [&] {
    auto now = replay_job(*log, "a");
    REQUIRE(now);
    auto n = log->put_digests({*digest_record_of(now->state)});
    REQUIRE(n);
    CHECK(*n == 1);
    CHECK(digests().first);
  };
  store_current();
  // Overwritten in place, as no path of the daemon does: only the hash of
  // the record tells.
  REQUIRE_FALSE(log->append({{"a", 4,
                              encode_event({4, 99,
                                            annotations_changed{
                                              {{"step", "other"}},
                                              {},
                                              "platform"}})}}));
  CHECK_FALSE(digests().first);
  MESSAGE("discarding the last record removes the digest");
  store_current();
  auto found = log->discard("a", 4);
  REQUIRE(found);
  CHECK(*found);
  REQUIRE_FALSE(log->append(job_events("a", 5, 4)));
  CHECK_FALSE(digests().first);
  MESSAGE("a purge of the deleted job removes its digest");
  store_current();
  REQUIRE_FALSE(log->append(
    {{"a", 6, encode_event({6, 100, job_deleted{}})}}));
  auto plan = log->plan_purge({{"a", 6}});
  while (!plan.scanned())
    REQUIRE_FALSE(log->scan_purge(plan, 100));
  REQUIRE(log->commit_purge(plan));
  REQUIRE_FALSE(log->append(job_events("a", 6)));
  CHECK_FALSE(digests().first);
}

TEST_CASE("digests round-trip through the codec; a job with a timed flow wait "
          "has none") {
  auto spec = test::make_job("j");
  auto state = fold({}, {{1, 1, job_put{spec, true}},
                         {2, 2, job_registered{"t"}}});
  state.owner = "ops";
  auto rec = digest_record_of(state);
  REQUIRE(rec);
  CHECK(rec->job_id == "j");
  CHECK(rec->seq == 2);
  auto back = decode_digest(rec->bytes);
  REQUIRE(back);
  auto summary = to_summary(state, false);
  CHECK(back->owner == "ops");
  CHECK(back->summary.registered);
  CHECK(back->summary.ranks == summary.ranks);
  CHECK(back->summary.pods == summary.pods);
  CHECK(back->summary.last_seq == 2);
  CHECK_FALSE(decode_digest("\xff\xff garbage"));
  state.rec.flow.deadline_ms = 12345;
  CHECK_FALSE(digest_record_of(state));
  state.rec.flow.deadline_ms = 0;
  state.exists = false;
  CHECK_FALSE(digest_record_of(state));
}

TEST_CASE("what the log keeps in memory stays within its bounds") {
  // Many small tables: index and filter blocks are charged to the one
  // block cache, which every family shares, so reading a log many times
  // the cache's size keeps the cache within its capacity and the tables'
  // own memory small.
  test::temp_dir dir;
  event_log_options opts;
  opts.path = dir / "db";
  opts.sync = false;
  opts.write_buffer_size = 64 * 1024;
  opts.block_cache_bytes = 256 * 1024;
  opts.memtable_bytes = 1024 * 1024;
  auto log = event_log::open(opts);
  REQUIRE(log);
  auto& l = **log;
  CHECK(l.memory().block_cache_capacity == 256 * 1024);
  const std::string body(200, 'x');
  uint64_t written = 0;
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    std::vector<log_record> batch;
    for (int j = 0; j < 200; ++j) {
      batch.push_back({"job-" + std::to_string(j), seq, body});
      written += body.size();
    }
    REQUIRE_FALSE(l.append(batch, {}, {}));
  }
  uint64_t read = 0;
  for (int j = 0; j < 200; ++j)
    REQUIRE_FALSE(l.for_each("job-" + std::to_string(j), 1,
                             [&](uint64_t, std::string_view bytes) {
                               read += bytes.size();
                               return caf::error{};
                             }));
  CHECK(read == written);
  auto m = l.memory();
  MESSAGE("written " << written << " B; block cache " << m.block_cache
                     << " of " << m.block_cache_capacity << ", table readers "
                     << m.table_readers << ", memtables " << m.memtables);
  CHECK(m.block_cache > 0);
  CHECK(m.block_cache <= m.block_cache_capacity + 64 * 1024);
  CHECK(m.memtables <= opts.memtable_bytes);
  // Every family reads through the same cache, not one of RocksDB's
  // default 8 MB caches each.
  CHECK(m.family_caches.size() >= 2);
  CHECK(m.family_caches
        == std::vector<uint64_t>(m.family_caches.size(), 256 * 1024));
}

TEST_CASE("jobs' appends interleaved with the fleet's snapshots read back in "
          "order, from the memtable and after a reopen") {
  // Each job's events go into the memtable where its last one went; the
  // fleet's snapshot deletes a range of its events in the same writes. Keys
  // inserted at a wrong position would read back out of order (and trip
  // RocksDB's own assertions).
  test::temp_dir dir;
  auto path = dir / "db";
  constexpr uint64_t rounds = 60;
  const std::vector<std::string> jobs{"j3", "j1", "j10", "j0", "j2", "j1x"};
  auto check = [&](const event_log& log) {
    for (const auto& job : jobs) {
      auto xs = log.read(job, 1, rounds + 10);
      REQUIRE(xs);
      REQUIRE(xs->size() == rounds);
      for (uint64_t n = 0; n < rounds; ++n)
        CHECK((*xs)[n].bytes == job + "#" + std::to_string(n + 1));
    }
    auto fleet = log.read_fleet("nodes");
    REQUIRE(fleet);
    REQUIRE(fleet->snapshot);
    CHECK(fleet->snapshot->seq == rounds - rounds % 7);
    CHECK(fleet->events.size() == rounds % 7);
    for (const auto& e : fleet->events)
      CHECK(e.seq > fleet->snapshot->seq);
  };
  {
    event_log_options opts;
    opts.path = path;
    auto log = event_log::open(opts); // memtables large enough to hold all
    REQUIRE(log);
    for (uint64_t seq = 1; seq <= rounds; ++seq) {
      // A different order of the jobs each round.
      std::vector<log_record> batch;
      for (size_t i = 0; i < jobs.size(); ++i)
        batch.push_back(rec(jobs[(i * 5 + seq) % jobs.size()], seq));
      fleet_records fleet;
      fleet.events.push_back(rec("nodes", seq));
      if (seq % 7 == 0)
        fleet.snapshots.push_back(
          {"nodes", seq, "nodes@" + std::to_string(seq)});
      REQUIRE_FALSE((*log)->append(batch, {}, fleet));
    }
    check(**log);
  }
  MESSAGE("after a reopen");
  check(*open_log(path));
}
