// The retention of live jobs at the storage level: which old events go,
// what is kept of them (incidents, the state at the cut), and that replay,
// past states and the deleted-job purge still work. A real RocksDB in a
// temporary directory.

#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "actors/model/incidents.hpp"
#include "actors/model/job_model.hpp"
#include "fixtures/jobs.hpp"
#include "fixtures/temp_dir.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/history_fold.hpp"
#include "storage/incident_codec.hpp"
#include "storage/replay.hpp"
#include "storage/retention.hpp"

using namespace recoverd;
using namespace recoverd::storage;

namespace {

std::unique_ptr<event_log> open_log(const std::string& path,
                                    bool read_only = false) {
  event_log_options opts;
  opts.path = path;
  opts.read_only = read_only;
  opts.write_buffer_size = 64 * 1024;
  auto log = event_log::open(opts);
  REQUIRE_MESSAGE(log, (log ? "" : message_of(log.error())));
  return std::move(*log);
}

/// A job's events with chosen times, and its state folded along.
struct story {
  std::string id;
  std::vector<event> evs;
  recovery rec;
  recovery seen; // the state the last recorded step left

  void add(int64_t t, event_body body) {
    evs.push_back({evs.size() + 1, t, std::move(body)});
  }

  void step(int64_t t, flow_event input, std::vector<flow_state> states,
            std::string outcome = {}) {
    flow_stepped x;
    x.input.name = input;
    x.path.push_back(rec.flow.state);
    for (auto s : states)
      x.path.push_back(s);
    rec.flow.state = x.path.back();
    if (!outcome.empty()) {
      // As the machine ends a flow: the outcome and the count.
      rec.job.last_outcome = std::move(outcome);
      ++rec.job.flows;
    }
    x.change = diff(seen, recovery{rec});
    seen = rec;
    add(t, std::move(x));
  }

  // One recovery from fault to result.
  void recovery_flow(int64_t t, const std::string& uuid) {
    rec.flow.uuid = uuid;
    step(t, ev::fault_occur, {st::notify_wait_fault_flushing});
    step(t + 10, ev::notify_finish, {st::notify_stop_train});
    rec.flow.uuid.clear();
    step(t + 20, ev::receive_report, {st::check_recover_result, st::init},
         "recover-success");
  }

  std::vector<log_record> records(uint64_t from, uint64_t to) const {
    std::vector<log_record> result;
    for (auto seq = from; seq <= to; ++seq)
      result.push_back({id, seq, encode_event(evs[seq - 1])});
    return result;
  }

  // The state after event `seq`.
  job_model fold(uint64_t seq) const {
    job_model m;
    m.spec.job_id = id;
    for (uint64_t i = 0; i < seq; ++i)
      m = apply(std::move(m), evs[i]);
    return m;
  }

  snapshot_record snapshot_at(uint64_t seq) const {
    return {id, seq, encode_snapshot(fold(seq))};
  }
};

// Seqs 1-2 at t=1000; flow U1 at 2000 (3-5); an annotation at 3000 (6);
// flow U2 at 5000 (7-9); an annotation at 9000 (10).
story two_flows(const std::string& id) {
  story s;
  s.id = id;
  s.add(1000, job_put{test::make_job(id), true});
  s.add(1000, job_registered{"agent"});
  s.recovery_flow(2000, "U1");
  annotations_changed a;
  a.set = {{"k", "v"}};
  s.add(3000, a);
  s.recovery_flow(5000, "U2");
  s.add(9000, a);
  return s;
}

purge_stats purge(event_log& log, std::vector<purge_target> targets,
                  std::vector<snapshot_record> bases = {},
                  std::vector<incident_record> incidents = {}) {
  auto plan = log.plan_purge(std::move(targets), std::move(bases),
                             std::move(incidents));
  while (!plan.scanned())
    REQUIRE_FALSE(log.scan_purge(plan, 2));
  auto stats = log.commit_purge(plan);
  REQUIRE_MESSAGE(stats, (stats ? "" : message_of(stats.error())));
  return *stats;
}

std::optional<live_cut> cut_of(const event_log& log, const std::string& id,
                               int64_t older_than, uint64_t max_events = 1000) {
  uint64_t examined = 0;
  auto cut = plan_live_cut(log, id, older_than, max_events, examined);
  REQUIRE_MESSAGE(cut, (cut ? "" : message_of(cut.error())));
  return std::move(*cut);
}

purge_stats purge_cut(event_log& log, live_cut cut) {
  return purge(log, {cut.target}, {cut.base}, std::move(cut.incidents));
}

std::vector<std::string> uuids(const std::vector<incident>& xs) {
  std::vector<std::string> result;
  for (const auto& x : xs)
    result.push_back(x.uuid + "@" + std::to_string(x.first_seq) + "-"
                     + std::to_string(x.last_seq) + ":" + x.outcome);
  return result;
}

// Stored incidents followed by those built from the stored events.
std::vector<incident> all_incidents(const event_log& log,
                                    const std::string& id) {
  auto kept = kept_incidents(log, id);
  REQUIRE(kept);
  job_history h;
  REQUIRE_FALSE(log.for_each(id, 1, [&](uint64_t, std::string_view bytes) {
    auto ev = decode_event(bytes);
    REQUIRE(ev);
    h.add(*ev);
    return caf::error{};
  }));
  auto result = std::move(*kept);
  for (auto& x : h.all())
    result.push_back(std::move(x));
  return result;
}

// What the inspector folded before `fold_histories`: the log's global order
// from its start, one event at a time, a job seeded at its first event.
std::unordered_map<std::string, job_history>
fold_in_order(const event_log& log) {
  std::unordered_map<std::string, job_history> result;
  auto xs = log.tail(1, 1u << 20);
  REQUIRE(xs);
  for (const auto& x : *xs) {
    auto ev = decode_event(x.bytes);
    REQUIRE(ev);
    auto [i, added] = result.try_emplace(x.job_id, size_t{1});
    if (added && x.seq > 1)
      REQUIRE_FALSE(seed_history(log, x.job_id, x.seq, i->second));
    i->second.add(*ev);
  }
  return result;
}

} // namespace

TEST_CASE("retention: a live job loses its old events before its snapshot "
          "and their index entries, and keeps snapshot, later events and "
          "incidents") {
  test::temp_dir dir;
  auto path = dir / "db";
  auto s = two_flows("j");
  auto other = two_flows("other");
  std::vector<incident> before;
  job_model replayed_before;
  {
    auto log = open_log(path);
    // Interleaved with another job in the global order; "j" snapshots in
    // the middle of flow U2 (seq 8).
    REQUIRE_FALSE(log->append(s.records(1, 4), {}));
    REQUIRE_FALSE(log->append(other.records(1, 10), {other.snapshot_at(10)}));
    REQUIRE_FALSE(log->append(s.records(5, 8), {s.snapshot_at(8)}));
    REQUIRE_FALSE(log->append(s.records(9, 10), {}));
    before = build_incidents(s.evs);
    REQUIRE(before.size() == 2);
    auto r = replay_job(*log, "j");
    REQUIRE(r);
    replayed_before = r->state;

    MESSAGE("everything before 6000 is old: the cut falls back to the start "
            "of the flow running at the snapshot");
    auto cut = cut_of(*log, "j", 6000);
    REQUIRE(cut);
    CHECK(cut->target.job_id == "j");
    CHECK(cut->target.live);
    CHECK(cut->target.up_to_seq == 6);
    CHECK(cut->base.seq == 6);
    REQUIRE(cut->incidents.size() == 1);
    CHECK(cut->incidents.front().first_seq == 3);
    auto stats = purge_cut(*log, std::move(*cut));
    CHECK(stats.live_jobs == 1);
    CHECK(stats.live_events == 6);
    CHECK(stats.index_entries == 6);
    CHECK(stats.incidents == 1);
    CHECK(stats.jobs == 0);
    CHECK(stats.events == 0);
    CHECK(stats.snapshots == 0);
  }
  MESSAGE("after a reopen");
  auto log = open_log(path);
  auto first = log->first_seq("j");
  REQUIRE(first);
  CHECK(*first == 7);
  auto xs = log->read("j", 1, 100);
  REQUIRE(xs);
  REQUIRE(xs->size() == 4);
  CHECK(xs->front().seq == 7);
  auto snap = log->snapshot("j");
  REQUIRE(snap);
  REQUIRE(snap->has_value());
  CHECK((*snap)->seq == 8);
  auto tail = log->tail(1, 100);
  REQUIRE_MESSAGE(tail, (tail ? "" : message_of(tail.error())));
  size_t of_j = 0;
  size_t of_other = 0;
  for (const auto& x : *tail) {
    if (x.job_id == "j") {
      CHECK(x.seq >= 7);
      ++of_j;
    } else {
      ++of_other;
    }
  }
  CHECK(of_j == 4);
  CHECK(of_other == 10);
  MESSAGE("the other job's history is untouched");
  auto o = log->read("other", 1, 100);
  REQUIRE(o);
  CHECK(o->size() == 10);

  MESSAGE("stored incidents read back; with the rebuilt ones they are the "
          "incidents of the whole history, without duplicates");
  auto kept = kept_incidents(*log, "j");
  REQUIRE(kept);
  REQUIRE(kept->size() == 1);
  CHECK(kept->front().uuid == "U1");
  CHECK(kept->front().outcome == "recover-success");
  CHECK(kept->front().started_ms == 2000);
  CHECK(kept->front().ended_ms == 2020);
  CHECK(kept->front().phases.size() == before.front().phases.size());
  CHECK_FALSE(kept->front().active);
  CHECK(uuids(all_incidents(*log, "j")) == uuids(before));

  MESSAGE("replay starts from the snapshot and gives the same state");
  auto r = replay_job(*log, "j");
  REQUIRE(r);
  CHECK(r->from_snapshot);
  CHECK(r->state.seq == replayed_before.seq);
  CHECK(encode_snapshot(r->state) == encode_snapshot(replayed_before));
  auto all = replay_all(*log);
  REQUIRE(all);
  CHECK(all->live.size() == 2);

  MESSAGE("a past state between the cut and the snapshot starts at the "
          "kept state");
  auto at7 = replay_job(*log, "j", 7);
  REQUIRE_MESSAGE(at7, (at7 ? "" : message_of(at7.error())));
  CHECK(at7->state.seq == 7);
  CHECK(encode_snapshot(at7->state) == encode_snapshot(s.fold(7)));
  MESSAGE("a point before the first kept event cannot be replayed");
  CHECK_FALSE(replay_job(*log, "j", 5));

  MESSAGE("a read-only open sees the same");
  log.reset();
  auto ro = open_log(path, true);
  auto ro_kept = kept_incidents(*ro, "j");
  REQUIRE(ro_kept);
  CHECK(ro_kept->size() == 1);
}

TEST_CASE("retention: nothing of a live job goes without a snapshot, "
          "without old events, or while its oldest events are one flow") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto s = two_flows("nosnap");
  REQUIRE_FALSE(log->append(s.records(1, 10), {}));
  CHECK_FALSE(cut_of(*log, "nosnap", 100'000));
  auto fresh = two_flows("fresh");
  REQUIRE_FALSE(log->append(fresh.records(1, 10), {fresh.snapshot_at(10)}));
  MESSAGE("every event is newer than the limit");
  CHECK_FALSE(cut_of(*log, "fresh", 1000));
  MESSAGE("only the first two are older; they are not part of a flow");
  auto cut = cut_of(*log, "fresh", 1500);
  REQUIRE(cut);
  CHECK(cut->target.up_to_seq == 2);
  CHECK(cut->incidents.empty());
  MESSAGE("up to 2015 the flow that starts at 3 is running: it stays whole");
  auto running = cut_of(*log, "fresh", 2015);
  REQUIRE(running);
  CHECK(running->target.up_to_seq == 2);
  purge_cut(*log, std::move(*running));
  MESSAGE("now the oldest events are that flow: nothing more goes");
  CHECK_FALSE(cut_of(*log, "fresh", 2015));
  auto xs = log->read("fresh", 1, 100);
  REQUIRE(xs);
  CHECK(xs->size() == 8);
  auto unknown = cut_of(*log, "ghost", 100'000);
  CHECK_FALSE(unknown);
  MESSAGE("the job without a snapshot still has every event");
  auto all = log->read("nosnap", 1, 100);
  REQUIRE(all);
  CHECK(all->size() == 10);
}

TEST_CASE("retention: a long backlog goes over several purges, each at a "
          "flow boundary, and the incidents add up") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto s = two_flows("j");
  REQUIRE_FALSE(log->append(s.records(1, 10), {s.snapshot_at(10)}));
  auto expected = uuids(build_incidents(s.evs));
  std::vector<uint64_t> firsts;
  for (int round = 0; round < 10; ++round) {
    auto cut = cut_of(*log, "j", 100'000, 3);
    if (!cut)
      break;
    purge_cut(*log, std::move(*cut));
    auto first = log->first_seq("j");
    REQUIRE(first);
    firsts.push_back(*first);
    CHECK(uuids(all_incidents(*log, "j")) == expected);
  }
  CHECK(firsts == std::vector<uint64_t>{3, 6, 7, 10});
  auto r = replay_job(*log, "j");
  REQUIRE(r);
  CHECK(r->state.seq == 10);
}

TEST_CASE("retention: the deleted-job purge removes the kept incidents and "
          "state too; a live purge never removes the snapshot") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto s = two_flows("j");
  REQUIRE_FALSE(log->append(s.records(1, 10), {s.snapshot_at(10)}));
  auto cut = cut_of(*log, "j", 100'000);
  REQUIRE(cut);
  CHECK(cut->target.up_to_seq == 9);
  CHECK(cut->incidents.size() == 2);
  MESSAGE("a live target at or after the snapshot is refused");
  auto bad = log->plan_purge({{"j", 10, true}});
  while (!bad.scanned())
    REQUIRE_FALSE(log->scan_purge(bad, 100));
  CHECK_FALSE(log->commit_purge(bad));
  purge_cut(*log, std::move(*cut));
  auto kept = log->incidents("j");
  REQUIRE(kept);
  CHECK(kept->size() == 2);
  event deleted{11, 10'000, job_deleted{}};
  REQUIRE_FALSE(log->append({{"j", 11, encode_event(deleted)}}));
  auto stats = purge(*log, {{"j", 11}});
  CHECK(stats.jobs == 1);
  CHECK(stats.events == 2);
  CHECK(stats.snapshots == 1);
  kept = log->incidents("j");
  REQUIRE(kept);
  CHECK(kept->empty());
  auto base = log->base("j");
  REQUIRE(base);
  CHECK_FALSE(base->has_value());
  auto ids = log->job_ids();
  REQUIRE(ids);
  CHECK(ids->empty());
}

namespace {

// `n` jobs of `two_flows`, their events interleaved as concurrent jobs
// write them, each with a snapshot in flow U2.
std::vector<story> write_stories(event_log& log, int n) {
  std::vector<story> stories;
  for (int j = 0; j < n; ++j)
    stories.push_back(two_flows("job-" + std::to_string(100 + j)));
  const auto events = stories.front().evs.size();
  for (uint64_t seq = 1; seq <= events; ++seq) {
    std::vector<log_record> batch;
    std::vector<snapshot_record> snaps;
    for (const auto& x : stories) {
      auto rec = x.records(seq, seq);
      batch.push_back(std::move(rec.front()));
      if (seq == 8)
        snaps.push_back(x.snapshot_at(seq));
    }
    REQUIRE_FALSE(log.append(batch, snaps));
  }
  return stories;
}

// Events of `id` in the log.
uint64_t stored_events(const event_log& log, const std::string& id) {
  auto first = log.first_seq(id);
  REQUIRE(first);
  auto last = log.last_seq(id);
  REQUIRE(last);
  return *last - *first + 1;
}

} // namespace

TEST_CASE("history fold: job by job on several threads, the same histories "
          "as the log's global order from its start") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  MESSAGE("70 jobs (three runs of 32 ids, so every thread gets some), their "
          "events interleaved as concurrent jobs write them, each with a "
          "snapshot in flow U2");
  auto stories = write_stories(*log, 70);
  const auto events = stories.front().evs.size();
  MESSAGE("every third job lost its first flow to the retention: seeded "
          "from the kept base and incident");
  for (size_t j = 0; j < stories.size(); j += 3) {
    auto cut = cut_of(*log, stories[j].id, 6000);
    REQUIRE(cut);
    REQUIRE(purge_cut(*log, std::move(*cut)).incidents == 1);
  }
  auto want = fold_in_order(*log);
  REQUIRE(want.size() == stories.size());
  CHECK(want.at("job-100").seq() == events);
  CHECK(want.at("job-100").tally().incidents == 2);
  CHECK(want.at("job-100").exists());
  for (size_t threads : {1, 2, 4}) {
    CAPTURE(threads);
    auto got = fold_histories(*log, 1, threads);
    REQUIRE_MESSAGE(got, (got ? "" : message_of(got.error())));
    CHECK(got->position == log->last_position());
    REQUIRE(got->histories.size() == want.size());
    for (const auto& [id, h] : want) {
      CAPTURE(id);
      REQUIRE(got->histories.count(id) == 1);
      const auto& g = got->histories.at(id);
      CHECK(g.seq() == h.seq());
      CHECK(uuids(g.all()) == uuids(h.all()));
      CHECK(g.counts() == h.counts());
      CHECK(g.exists() == h.exists());
      CHECK(g.registered() == h.registered());
      CHECK(g.tally().incidents == h.tally().incidents);
      CHECK(g.tally().lost_ms == h.tally().lost_ms);
      CHECK(g.figures(10'000).observed_ms == h.figures(10'000).observed_ms);
    }
  }
  MESSAGE("an empty log folds to nothing");
  auto empty = open_log(dir / "empty");
  auto none = fold_histories(*empty, 1);
  REQUIRE(none);
  CHECK(none->histories.empty());
  CHECK(none->position == 0);
}

TEST_CASE("stored histories: the next fold takes each up and reads only the "
          "events after it; one that no longer matches its event is folded "
          "again") {
  test::temp_dir dir;
  auto log = open_log(dir / "db");
  auto stories = write_stories(*log, 40);
  const auto events = stories.front().evs.size();
  MESSAGE("every third job lost its first flow to the retention");
  for (size_t j = 0; j < stories.size(); j += 3) {
    auto cut = cut_of(*log, stories[j].id, 6000);
    REQUIRE(cut);
    REQUIRE(purge_cut(*log, std::move(*cut)).incidents == 1);
  }
  auto first = fold_histories(*log, 1, 2);
  REQUIRE(first);
  CHECK(first->restored == 0);
  std::vector<digest_record> xs;
  for (const auto& [id, h] : first->histories)
    xs.push_back({id, h.seq(), encode_history(h.state())});
  MESSAGE("stored as a clean stop stores them: only at the job's last event");
  auto stale = xs.front();
  --stale.seq;
  auto none = log->put_histories({stale});
  REQUIRE(none);
  CHECK(*none == 0);
  auto stored = log->put_histories(xs);
  REQUIRE_MESSAGE(stored, (stored ? "" : message_of(stored.error())));
  CHECK(*stored == stories.size());
  MESSAGE("then every other job runs a third flow, one job's last event is "
          "discarded as a torn write, one job's stored fold is garbage, and "
          "one job is deleted and its history purged");
  uint64_t appended = 0;
  for (size_t j = 0; j < stories.size(); j += 2) {
    auto& x = stories[j];
    x.recovery_flow(20'000, "U3");
    REQUIRE_FALSE(log->append(x.records(events + 1, x.evs.size())));
    appended += x.evs.size() - events;
  }
  const auto& torn = stories[1].id;
  auto discarded = log->discard(torn, events);
  REQUIRE(discarded);
  CHECK(*discarded);
  const auto& garbage = stories[3].id;
  auto garbled = log->put_histories({{garbage, events, "not a record"}});
  REQUIRE(garbled);
  CHECK(*garbled == 1);
  const auto& gone = stories[5].id;
  event deleted{events + 1, 30'000, job_deleted{}};
  REQUIRE_FALSE(log->append({{gone, events + 1, encode_event(deleted)}}));
  purge(*log, {{gone, events + 1}});
  {
    event_log::reader reader{*log};
    for (const auto& id : {gone, torn}) {
      CAPTURE(id);
      auto h = reader.history(id);
      REQUIRE(h);
      CHECK_FALSE(h->has_value());
    }
    auto h = reader.history(stories[0].id);
    REQUIRE(h);
    REQUIRE(h->has_value());
    CHECK((*h)->seq == events);
  }
  auto want = fold_in_order(*log);
  CHECK(want.size() == stories.size() - 1);
  for (size_t threads : {1, 2}) {
    CAPTURE(threads);
    auto got = fold_histories(*log, 1, threads);
    REQUIRE_MESSAGE(got, (got ? "" : message_of(got.error())));
    MESSAGE("all but the torn, the garbled and the purged job are taken up; "
            "the events read are theirs and the third flows");
    CHECK(got->restored == stories.size() - 3);
    CHECK(got->events
          == appended + stored_events(*log, torn)
            + stored_events(*log, garbage));
    REQUIRE(got->histories.size() == want.size());
    for (const auto& [id, h] : want) {
      CAPTURE(id);
      REQUIRE(got->histories.count(id) == 1);
      CHECK(encode_history(got->histories.at(id).state())
            == encode_history(h.state()));
    }
  }
}
