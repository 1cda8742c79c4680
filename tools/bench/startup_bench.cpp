// startup_bench: how long a restart takes with many jobs, and what an idle
// job costs in memory once replayed (design §7: 10,000 jobs and 1,000,000
// events replayed and serving in <= 2 s, and within 2x a bare RocksDB read
// of the same snapshots and tails).
//
// 1. A child process writes the jobs into a scratch data directory through
//    the real record encoding and the real pure job model: put, init,
//    register, subscribe, then rounds of a recovery flow, an annotation
//    change, a fault report and its clearing, and a re-subscription, until
//    each job has its share of the events (the mean, give or take up to
//    half; the rest are annotation changes, so every job ends idle). Flow
//    steps (a full recovery state each) are more than half of the events: a
//    fault-heavy mix, so a pessimistic one for replay. Snapshots are written
//    every --snapshot-every events, as the job actors write them. The writer
//    then closes the log as the daemon does at a clean stop (or, with
//    --crash, ends as if killed, so the first start-up replays the WAL).
// 2. The real start-up path, timed until it serves: `app::start` (open,
//    replay, discard, spawn the registry and the job actors, listen), then a
//    client dials it and a Platform.ListJobs answered by every job returns
//    all of them. Resident memory (VmRSS) is read before the start and after
//    the ListJobs; a second child process does the same on an empty data
//    directory, to separate the fixed cost of the daemon from the cost per
//    job (no agent streams are open here: memory_bench measures that). The
//    rounds after the first also time an Inspect.GetStats, which waits for
//    the inspector's first fold of every job's history (the dashboards'
//    and /metrics' first answer): after a clean stop it takes up the folds
//    the stop stored (against the bare read of the digests); with the
//    digests and folds removed it folds every event (against the bare full
//    scan).
// 3. The baseline: a bare RocksDB read of the same data start-up reads, in
//    the same run, on the same files, on as many threads as replay uses: the
//    job ids (one seek per job), each job's latest snapshot and the events
//    after it; bytes are touched, nothing is decoded. A full scan of every
//    event and snapshot is shown for comparison.
//
// The baseline talks to RocksDB directly on purpose: it is the bare
// reference, so it must not go through storage/.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <caf/scoped_actor.hpp>
#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <rocksdb/db.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "actors/model/job_model.hpp"
#include "inspect.grpc.pb.h"
#include "platform.grpc.pb.h"
#include "services/app.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "tools/bench/process_stats.hpp"

using namespace recoverd;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  size_t jobs = 10'000;
  size_t events = 1'000'000;
  uint64_t snapshot_every = job_config{}.snapshot_every;
  int rounds = 3;
  bool crash = false;
  std::string dir;
};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "startup_bench: %s\n", what.c_str());
  std::exit(1);
}

// -- writing ------------------------------------------------------------------

// Job sizes cycle through 1, 2, 4, 8 and 16 pods of 8 devices each.
job_spec make_spec(size_t i) {
  static constexpr int pods_of[] = {1, 2, 4, 8, 16};
  job_spec spec;
  char id[32];
  std::snprintf(id, sizeof(id), "job-%06zu", i);
  spec.job_id = id;
  spec.name = "train-" + spec.job_id;
  spec.ns = "team-" + std::to_string(i % 20);
  spec.framework = i % 2 == 0 ? "pytorch" : "mindspore";
  spec.recover_strategies = {"retry", "recover", "dump"};
  spec.process_recover_enable = true;
  spec.annotations = {{"owner", "ml-platform"}};
  int rank = 0;
  for (int p = 0; p < pods_of[i % 5]; ++p) {
    pod x;
    x.pod_rank = p;
    x.uid = spec.job_id + "-3f2a9c1e-7d4b-" + std::to_string(p);
    char node[32];
    std::snprintf(node, sizeof(node), "node-%05zu",
                  (i * 16 + static_cast<size_t>(p)) % 50'000);
    x.node_name = node;
    x.running = true;
    x.super_pod_id = static_cast<int32_t>(i % 8);
    for (int d = 0; d < 8; ++d)
      x.devices.push_back({std::to_string(d), std::to_string(rank++)});
    spec.pods.push_back(std::move(x));
  }
  return spec;
}

// Drives one job through the pure model, collecting its encoded events.
class job_writer {
public:
  job_writer(size_t index, size_t budget, uint64_t snapshot_every)
    : spec_(make_spec(index)), budget_(budget), every_(snapshot_every) {
    waits_.fault_flush = millis{0};
    waits_.resource_release = millis{0};
    waits_.hccl_convergence = millis{0};
    waits_.restart_all = millis{0};
    client_ = {spec_.job_id, "taskd", "ipv4:10.0.0.1:40000"};
  }

  void run() {
    run_cmd(put_cmd{spec_});
    run_cmd(init_cmd{client_});
    run_cmd(register_cmd{client_, false});
    run_cmd(subscribe_cmd{client_, 0});
    // Whole rounds only: every job ends idle, so the restarted daemon has
    // no flow to resume and writes nothing while it is measured.
    int round = 0;
    for (; budget_ - std::min(budget_, records.size()) >= round_room; ++round) {
      recovery_flow(round);
      run_cmd(annotate_cmd{{{"round", std::to_string(round)}}, {}, "platform"});
      const auto& p = spec_.pods.back();
      device_fault f{p.node_name, "3", {"80E01801"}, "L2"};
      run_cmd(faults_cmd{{spec_.job_id, "UnHealthy", {f}}});
      run_cmd(faults_cmd{{spec_.job_id, "Healthy", {}}});
      run_cmd(detach_cmd{model_.subscriber_generation,
                         model_.subscriber_generation, "stream closed"});
      run_cmd(subscribe_cmd{client_, 0});
    }
    for (int pad = 0; !full(); ++pad)
      run_cmd(annotate_cmd{{{"note", std::to_string(pad)}}, {}, "platform"});
  }

  std::vector<log_record> records;
  std::vector<snapshot_record> snapshots;

  /// What the daemon would store of this job at a clean stop.
  std::optional<digest_record> digest() const {
    return storage::digest_record_of(model_);
  }

private:
  // Events a round takes at most (a flow is 7 or 8).
  static constexpr size_t round_room = 16;

  bool full() const {
    return records.size() >= budget_;
  }

  void run_cmd(const command& cmd) {
    if (full())
      return;
    auto d = decide(model_, cmd);
    if (!d)
      die("job " + spec_.job_id + ": " + d.error().message());
    for (auto& body : d->events) {
      if (full())
        return;
      event ev{model_.seq + 1, now_, std::move(body)};
      records.push_back({spec_.job_id, ev.seq, storage::encode_event(ev)});
      model_ = apply(std::move(model_), ev);
      // The daemon's policy (snapshot_due), event by event.
      tail_.events += 1;
      tail_.bytes += records.back().bytes.size();
      if (snapshot_due(tail_, every_)) {
        snapshots.push_back(
          {spec_.job_id, model_.seq, storage::encode_snapshot(model_)});
        tail_ = {0, 0, snapshots.back().bytes.size()};
      }
    }
    now_ += 7;
  }

  void flow(flow_input in) {
    in.now_ms = now_;
    in.fresh_uuid = "17A0" + std::to_string(now_) + "-"
                    + std::to_string(model_.seq) + "c0ffee";
    run_cmd(flow_cmd{std::move(in), waits_});
  }

  // Delivers pending signals and fires due deadlines, as the job actor does.
  void settle() {
    for (int i = 0; i < 20 && !full(); ++i) {
      const auto& rec = model_.rec;
      flow_input in;
      if (rec.flow.outbox) {
        in.name = send_result_event(*rec.flow.outbox);
        in.delivered = *rec.flow.outbox;
      } else if (rec.flow.deadline_ms > 0 && rec.flow.deadline_ms <= now_) {
        in.name = rec.flow.deadline_event;
      } else {
        return;
      }
      flow(std::move(in));
    }
  }

  void report(report_kind kind, std::vector<std::string> strategies,
              const std::string& strategy = "") {
    flow_input in;
    in.name = ev::receive_report;
    in.kind = kind;
    in.strategies = std::move(strategies);
    in.report.strategy = strategy;
    flow(std::move(in));
    settle();
  }

  // One process-level recovery: fault, stop, global fault, strategy,
  // recover, success.
  void recovery_flow(int round) {
    flow_input fault;
    fault.name = ev::fault_occur;
    auto ranks = spec_.pods.size() * 8;
    fault.faults = {{std::to_string(static_cast<size_t>(round) % ranks), "1"}};
    flow(std::move(fault));
    settle();
    report(report_kind::stop, {});
    report(report_kind::strategy, {"recover", "dump"});
    report(report_kind::status, {}, "recover");
    if (model_.rec.flow.state != st::init)
      die("job " + spec_.job_id + ": flow ended in "
          + to_string(model_.rec.flow.state));
  }

  job_spec spec_;
  size_t budget_;
  uint64_t every_;
  timeouts waits_;
  client_info client_;
  job_model model_;
  // A day ago: the history is younger than the daemon's retention (30
  // days), as a running daemon keeps it. History older than the retention
  // would have the first sweep after start-up purge most of the log, a
  // one-off clean-up that competes with the start-up being measured.
  int64_t now_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()
                 - 86'400'000;
  snapshot_tail tail_;
};

// What the daemon stores at a clean stop: the digest of every job that may
// stay dormant, through the same encoding and storage call.
caf::error store_digests(storage::event_log& log,
                         const std::vector<digest_record>& xs) {
  auto stored = log.put_digests(xs);
  if (!stored)
    return stored.error();
  if (*stored != xs.size())
    die("stored " + std::to_string(*stored) + " of " + std::to_string(xs.size())
        + " digests");
  return caf::none;
}

// Events of job `i`: the mean give or take up to half of it, varied
// pseudo-randomly in pairs of jobs so that the total stays exact (and a
// job's count is not a multiple of the snapshot interval by construction).
size_t events_of(const options& opts, size_t i) {
  auto mean = opts.events / opts.jobs;
  auto result = mean + (i == 0 ? opts.events % opts.jobs : 0);
  if (i / 2 * 2 + 1 >= opts.jobs)
    return result; // the last job of an odd count has no partner
  auto h = (i / 2 + 1) * 0x9E3779B97F4A7C15ull;
  auto d = static_cast<size_t>((h ^ (h >> 29)) % (mean / 2 + 1));
  return i % 2 == 0 ? result + d : result - d;
}

struct written {
  uint64_t events = 0;
  uint64_t snapshots = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

written write_data(const options& opts, const std::string& path) {
  written result;
  auto t0 = clock_type::now();
  storage::event_log_options log_opts;
  log_opts.path = path;
  log_opts.sync = false;
  {
    auto log = storage::event_log::open(log_opts);
    if (!log)
      die(message_of(log.error()));
    std::vector<log_record> batch;
    std::vector<snapshot_record> snaps;
    std::vector<digest_record> digests;
    auto flush = [&] {
      if (auto err = (*log)->append(batch, snaps))
        die(message_of(err));
      batch.clear();
      snaps.clear();
    };
    for (size_t i = 0; i < opts.jobs; ++i) {
      auto budget = events_of(opts, i);
      job_writer w{i, budget, opts.snapshot_every};
      w.run();
      result.events += w.records.size();
      result.snapshots += w.snapshots.size();
      for (const auto& r : w.records)
        result.bytes += r.bytes.size();
      std::move(w.records.begin(), w.records.end(), std::back_inserter(batch));
      std::move(w.snapshots.begin(), w.snapshots.end(),
                std::back_inserter(snaps));
      if (auto d = w.digest())
        digests.push_back(std::move(*d));
      if (batch.size() >= 20'000)
        flush();
    }
    flush();
    if (auto err = (*log)->sync_wal())
      die(message_of(err));
    // As if killed: no flush, no close, no digests; the next open replays
    // the WAL and every job.
    if (opts.crash) {
      (void) log->release();
    } else if (auto err = store_digests(**log, digests)) {
      die(message_of(err));
    }
  }
  result.seconds = seconds_since(t0);
  return result;
}

// -- measuring ----------------------------------------------------------------

struct startup {
  double seconds = 0; ///< Until ListJobs answered.
  double start_s = 0; ///< Until app::start returned.
  double replay_ms = 0;
  size_t jobs = 0;
  size_t dormant = 0;
  uint64_t events = 0;
  size_t from_snapshot = 0;
  long rss_before = 0;
  long rss_after = 0;
  /// With `touch`: a GetJob of every job right after, and again.
  double first_touch_s = 0;
  double second_touch_s = 0;
  long rss_touched = 0;
  /// With `stats`: until an Inspect.GetStats answered, from the start. It
  /// waits for the inspector's first fold of every job's history; the
  /// events that fold read.
  double stats_s = 0;
  uint64_t fold_events = 0;
};

// Starts the daemon on `path` (leaving jobs with a current digest dormant,
// or replaying every job) and times it until a ListJobs of every job
// answers; with `stats`, then until an Inspect.GetStats answers; with
// `touch`, then asks every job for its status twice.
startup run_startup(const options& opts, const std::string& path,
                    bool dormant = true, bool touch = false,
                    bool stats = false) {
  startup result;
  app_options ao;
  ao.listen = "127.0.0.1:0";
  ao.data_dir = path;
  ao.dormant_start = dormant;
  ao.registry.max_jobs = std::max<size_t>(opts.jobs, 1);
  ao.registry.job.snapshot_every = opts.snapshot_every;
  result.rss_before = bench::rss_kib();
  auto t0 = clock_type::now();
  auto daemon = app::start(ao);
  if (!daemon)
    die(message_of(daemon.error()));
  result.start_s = seconds_since(t0);
  // Serving: a client dials the daemon and a ListJobs returns every job.
  namespace pb = recoverd::platform::v1;
  auto platform = pb::Platform::NewStub(grpc::CreateChannel(
    (*daemon)->address(), grpc::InsecureChannelCredentials()));
  pb::ListJobsResponse listed;
  {
    pb::ListJobsRequest req;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(true);
    if (auto st = platform->ListJobs(&ctx, req, &listed); !st.ok())
      die("ListJobs failed: " + st.error_message());
    result.jobs = static_cast<size_t>(listed.jobs_size());
  }
  result.seconds = seconds_since(t0);
  result.rss_after = bench::rss_kib();
  result.replay_ms = (*daemon)->replayed().millis;
  result.events = (*daemon)->replayed().events;
  result.dormant = (*daemon)->replayed().dormant;
  result.from_snapshot = (*daemon)->replayed().from_snapshot;
  if (stats) {
    namespace pi = recoverd::inspection::v1;
    auto inspect = pi::Inspect::NewStub(grpc::CreateChannel(
      (*daemon)->address(), grpc::InsecureChannelCredentials()));
    pi::GetStatsRequest req;
    pi::StatsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now()
                     + std::chrono::seconds(600));
    if (auto st = inspect->GetStats(&ctx, req, &resp); !st.ok())
      die("GetStats failed: " + st.error_message());
    if (static_cast<size_t>(resp.jobs_size()) != result.jobs)
      die("GetStats answered " + std::to_string(resp.jobs_size())
          + " jobs, expected " + std::to_string(result.jobs));
    result.stats_s = seconds_since(t0);
    caf::scoped_actor self{(*daemon)->system()};
    self
      ->request((*daemon)->inspector(), caf::infinite, status_atom::value,
                status_verbosity::info)
      .receive(
        [&](component_status& x) {
          result.fold_events = x.counters.at("first_fold_events");
        },
        [&](caf::error& err) {
          die("no inspector status: " + message_of(err));
        });
  }
  // The deferred cost: the first request of each job reads it (a dormant
  // job replays then); the second pass is the same requests on live jobs.
  auto touch_all = [&] {
    auto t = clock_type::now();
    for (const auto& j : listed.jobs()) {
      pb::JobRef ref;
      ref.set_jobid(j.jobid());
      pb::JobStatus status;
      grpc::ClientContext ctx;
      if (auto st = platform->GetJob(&ctx, ref, &status); !st.ok())
        die("GetJob " + j.jobid() + " failed: " + st.error_message());
      if (status.lastseq() != j.lastseq())
        die("job " + j.jobid() + " is at seq " + std::to_string(status.lastseq())
            + " but was listed at " + std::to_string(j.lastseq()));
    }
    return seconds_since(t);
  };
  if (touch) {
    result.first_touch_s = touch_all();
    result.second_touch_s = touch_all();
    result.rss_touched = bench::rss_kib();
  }
  (*daemon)->stop();
  return result;
}

struct scan {
  double seconds = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  size_t threads = 1;
};

struct bare_db {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  size_t events_at = 0;
  size_t snapshots_at = 0;
  size_t digests_at = 0;

  explicit bare_db(const std::string& path) {
    rocksdb::DBOptions db_opts;
    // Every column family the daemon made (RocksDB refuses to open a
    // database without all of them), whatever their number.
    std::vector<std::string> names;
    auto listed = rocksdb::DB::ListColumnFamilies(db_opts, path, &names);
    if (!listed.ok())
      die(listed.ToString());
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (const auto& name : names) {
      descs.emplace_back(name, rocksdb::ColumnFamilyOptions{});
      if (name == "events")
        events_at = descs.size() - 1;
      else if (name == "snapshots")
        snapshots_at = descs.size() - 1;
      else if (name == "digests")
        digests_at = descs.size() - 1;
    }
    rocksdb::DB* raw = nullptr;
    auto st = rocksdb::DB::Open(db_opts, path, descs, &handles, &raw);
    if (!st.ok())
      die(st.ToString());
    db.reset(raw);
  }

  ~bare_db() {
    for (auto* h : handles)
      db->DestroyColumnFamilyHandle(h);
    db->Close();
  }

  rocksdb::ColumnFamilyHandle* events() const {
    return handles[events_at];
  }

  rocksdb::ColumnFamilyHandle* snapshots() const {
    return handles[snapshots_at];
  }

  rocksdb::ColumnFamilyHandle* digests() const {
    if (digests_at == 0)
      die("the log has no digests family");
    return handles[digests_at];
  }

  // The job ids: one seek per job.
  std::vector<std::string> job_ids() const {
    std::vector<std::string> ids;
    std::unique_ptr<rocksdb::Iterator> it{
      db->NewIterator(rocksdb::ReadOptions{}, events())};
    for (it->SeekToFirst(); it->Valid();) {
      auto key = it->key();
      if (key.size() < 9)
        die("malformed event key");
      ids.emplace_back(key.data(), key.size() - 9);
      it->Seek(ids.back() + '\x01');
    }
    return ids;
  }
};

// Removes every stored digest, as a crash leaves the log: no job's digest
// describes its last event then (a crash stores none). The inspector's
// stored folds, in the same family, go too (as on a log no clean stop of
// this version stored them in).
void drop_digests(const std::string& path) {
  bare_db b{path};
  auto st = b.db->DeleteRange(rocksdb::WriteOptions{}, b.digests(), "",
                              std::string(1, '\xff'));
  if (!st.ok())
    die(st.ToString());
}

// Every event and snapshot, in key order.
scan run_bare(const std::string& path) {
  scan result;
  auto t0 = clock_type::now();
  bare_db b{path};
  for (auto* cf : {b.events(), b.snapshots()}) {
    std::unique_ptr<rocksdb::Iterator> it{
      b.db->NewIterator(rocksdb::ReadOptions{}, cf)};
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++result.entries;
      result.bytes += it->key().size() + it->value().size();
    }
    if (!it->status().ok())
      die(it->status().ToString());
  }
  result.seconds = seconds_since(t0);
  return result;
}

// The key layout of the log, written out here on purpose (see the top):
// events are <job id> 0x00 <seq: 8 bytes big-endian>; a job's snapshot is
// keyed by its id, its value <seq: 8 bytes big-endian> <record>.
uint64_t be64_at(const rocksdb::Slice& s) {
  uint64_t x = 0;
  for (size_t i = 0; i < 8; ++i)
    x = (x << 8) | static_cast<unsigned char>(s[i]);
  return x;
}

std::string seq_key(const std::string& job, uint64_t seq) {
  auto key = job;
  key.push_back('\0');
  for (int shift = 56; shift >= 0; shift -= 8)
    key.push_back(static_cast<char>((seq >> shift) & 0xff));
  return key;
}

// Reads each of `ids` with `f(events, snapshots, digests, id, entries,
// bytes)` on as many threads as replay uses, in runs of neighbouring jobs
// as replay takes them; timed from `t0`.
template <class F>
scan in_runs(const bare_db& b, const std::vector<std::string>& ids,
             clock_type::time_point t0, F f) {
  scan result;
  constexpr size_t run = 32;
  auto threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> entries{0};
  std::atomic<uint64_t> bytes{0};
  auto work = [&] {
    rocksdb::ReadOptions ro;
    std::unique_ptr<rocksdb::Iterator> evs{b.db->NewIterator(ro, b.events())};
    std::unique_ptr<rocksdb::Iterator> snaps{
      b.db->NewIterator(ro, b.snapshots())};
    std::unique_ptr<rocksdb::Iterator> digests{
      b.db->NewIterator(ro, b.digests())};
    uint64_t n = 0;
    uint64_t size = 0;
    for (;;) {
      auto first = next.fetch_add(run);
      if (first >= ids.size())
        break;
      for (auto i = first; i < std::min(first + run, ids.size()); ++i)
        f(*evs, *snaps, *digests, ids[i], n, size);
    }
    entries += n;
    bytes += size;
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t)
    workers.emplace_back(work);
  work();
  for (auto& w : workers)
    w.join();
  result.seconds = seconds_since(t0);
  result.entries = entries;
  result.bytes = bytes;
  result.threads = threads;
  return result;
}

// What start-up reads: the job ids (one seek per job), each job's latest
// snapshot and the events after it, on as many threads as replay uses and
// in runs of neighbouring jobs as replay takes them.
scan run_bare_tails(const std::string& path) {
  auto t0 = clock_type::now();
  bare_db b{path};
  auto ids = b.job_ids();
  return in_runs(b, ids, t0, [&](rocksdb::Iterator& evs,
                                 rocksdb::Iterator& snaps, rocksdb::Iterator&,
                                 const std::string& id, uint64_t& n,
                                 uint64_t& size) {
    uint64_t from = 1;
    snaps.Seek(id);
    if (snaps.Valid() && snaps.key() == rocksdb::Slice{id}) {
      auto value = snaps.value();
      if (value.size() < 8)
        die("malformed snapshot");
      from = be64_at(value) + 1;
      ++n;
      size += snaps.key().size() + value.size();
    }
    auto prefix = id + '\0';
    for (evs.Seek(seq_key(id, from));
         evs.Valid() && evs.key().starts_with(prefix); evs.Next()) {
      ++n;
      size += evs.key().size() + evs.value().size();
    }
  });
}

// What start-up reads when the digests are current: the job ids, each
// job's digest and its last event (to check the digest still describes it).
scan run_bare_digests(const std::string& path) {
  auto t0 = clock_type::now();
  bare_db b{path};
  auto ids = b.job_ids();
  return in_runs(b, ids, t0, [&](rocksdb::Iterator& evs, rocksdb::Iterator&,
                                 rocksdb::Iterator& digests,
                                 const std::string& id, uint64_t& n,
                                 uint64_t& size) {
    digests.Seek(id);
    if (digests.Valid() && digests.key() == rocksdb::Slice{id}) {
      ++n;
      size += digests.key().size() + digests.value().size();
    }
    evs.SeekForPrev(seq_key(id, UINT64_MAX));
    if (evs.Valid()) {
      ++n;
      size += evs.key().size() + evs.value().size();
    }
  });
}

// Runs `f` in a child process (before this process has threads) and returns
// what it wrote into the pipe.
template <class F>
std::string in_child(F f) {
  int fds[2];
  if (::pipe(fds) != 0)
    die("pipe failed");
  std::fflush(stdout);
  auto pid = ::fork();
  if (pid < 0)
    die("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    auto out = f();
    auto n = ::write(fds[1], out.data(), out.size());
    ::_exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die("child process failed");
  return out;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  CLI::App cli{"startup_bench: restart time and memory per job vs a bare "
               "RocksDB scan"};
  cli.set_version_flag("--version", std::string{"startup_bench "} + RECOVERD_VERSION);
  cli.add_option("--jobs", opts.jobs, "jobs")->capture_default_str();
  cli.add_option("--events", opts.events, "events over all jobs")
    ->capture_default_str();
  cli.add_option("--snapshot-every", opts.snapshot_every,
                 "snapshot every N events of a job, as the daemon's flag "
                 "(0: never)")
    ->capture_default_str();
  cli.add_option("--rounds", opts.rounds, "start-ups (median is reported)")
    ->capture_default_str();
  cli.add_option("--dir", opts.dir, "scratch directory (default: a temp dir)");
  cli.add_flag("--crash", opts.crash,
               "the writer ends as if killed (no flush, no close), so the "
               "first start-up also replays the WAL");
  CLI11_PARSE(cli, argc, argv);
  if (opts.jobs == 0 || opts.events < opts.jobs * 4 || opts.rounds < 1) {
    std::fprintf(stderr, "startup_bench: need jobs >= 1, events >= 4 per "
                         "job, rounds >= 1\n");
    return 2;
  }
  configure_logging("warn", "text");
  auto base = opts.dir.empty()
                ? fs::temp_directory_path()
                    / ("startup-bench-" + std::to_string(::getpid()))
                : fs::path{opts.dir};
  fs::remove_all(base);
  fs::create_directories(base);
  auto data = (base / "data").string();
  auto empty = (base / "empty").string();

  auto w = in_child([&] {
    auto x = write_data(opts, data);
    return std::to_string(x.events) + " " + std::to_string(x.snapshots) + " "
           + std::to_string(x.bytes) + " " + std::to_string(x.seconds);
  });
  written wr;
  std::sscanf(w.c_str(), "%lu %lu %lu %lf", &wr.events, &wr.snapshots,
              &wr.bytes, &wr.seconds);
  std::printf("wrote %zu jobs, %lu events (%.0f bytes mean), %lu snapshots "
              "(every %lu events) in %.1f s\n",
              opts.jobs, wr.events,
              static_cast<double>(wr.bytes) / static_cast<double>(wr.events),
              wr.snapshots, opts.snapshot_every, wr.seconds);
  std::fflush(stdout);

  // The daemon's fixed cost: the same start-up on an empty directory.
  auto fixed_kib = std::stol(in_child([&] {
    auto s = run_startup(opts, empty);
    return std::to_string(s.rss_after - s.rss_before);
  }));

  // Memory per job folded at start-up for its digest (as after a crash: no
  // digests) and spawned, each in a process of its own like the fixed cost
  // (measured in this process after other rounds, the heap they freed would
  // hide it); on a copy, so that the rounds below find the log as written.
  auto copy = (base / "copy").string();
  fs::copy(data, copy, fs::copy_options::recursive);
  auto crashed_kib = std::stol(in_child([&] {
    drop_digests(copy);
    auto s = run_startup(opts, copy);
    return std::to_string(s.rss_after - s.rss_before);
  }));
  auto spawned_kib = std::stol(in_child([&] {
    auto s = run_startup(opts, copy, false);
    return std::to_string(s.rss_after - s.rss_before);
  }));
  fs::remove_all(copy);

  auto median = [](std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    return xs[xs.size() / 2];
  };
  auto per_job = [&](long kib) {
    return static_cast<double>(kib) / static_cast<double>(opts.jobs);
  };
  auto check = [&](const startup& s) {
    if (s.jobs != opts.jobs)
      die("ListJobs answered " + std::to_string(s.jobs) + " jobs, expected "
          + std::to_string(opts.jobs));
  };

  // 1. As the daemon starts after a clean stop: the jobs whose digest is
  // current stay dormant until first asked for. The first round then asks
  // every job once (and again), to show the cost start-up deferred.
  std::vector<double> ours;
  std::vector<double> bare;
  std::vector<double> bare_dig;
  std::vector<double> full;
  std::vector<double> dashboards;
  startup first;
  scan tails;
  scan digs;
  for (int r = 0; r < opts.rounds; ++r) {
    // The first round asks every job (the deferred cost), the others the
    // inspector (its first fold, which takes up the folds the previous
    // round's clean stop stored): each would blur the other.
    auto s = run_startup(opts, data, true, r == 0, r > 0);
    check(s);
    if (!opts.crash && (s.dormant != opts.jobs || s.events != 0))
      die("after a clean stop, " + std::to_string(s.dormant) + " of "
          + std::to_string(opts.jobs) + " jobs started dormant with "
          + std::to_string(s.events) + " events folded: a digest is missing");
    if (r == 0)
      first = s;
    tails = run_bare_tails(data);
    digs = run_bare_digests(data);
    auto f = run_bare(data);
    std::printf("round %d: serving after %.3f s (app::start returned after "
                "%.3f s: replay %.0f ms, %zu jobs dormant, %lu events folded, "
                "%zu jobs from snapshots; then ListJobs of all %zu jobs); bare "
                "RocksDB read of the snapshots + tails %.3f s (%lu entries, "
                "%.0f MB, %zu threads), ratio %.2f; bare read of the digests + "
                "last events %.3f s (%lu entries), ratio %.2f; bare full scan "
                "%.3f s (%lu entries, %.0f MB)\n",
                r + 1, s.seconds, s.start_s, s.replay_ms, s.dormant, s.events,
                s.from_snapshot, s.jobs, tails.seconds, tails.entries,
                static_cast<double>(tails.bytes) / 1e6, tails.threads,
                s.seconds / tails.seconds, digs.seconds, digs.entries,
                s.seconds / digs.seconds, f.seconds, f.entries,
                static_cast<double>(f.bytes) / 1e6);
    if (r == 0)
      std::printf("  then a GetJob of every job: %.3f s the first time (each "
                  "dormant job replayed), %.3f s the second\n",
                  s.first_touch_s, s.second_touch_s);
    else
      std::printf("  then Inspect.GetStats (the inspector's first fold, "
                  "taking up the folds the clean stop stored, %lu events "
                  "read) answered %.3f s after the start; bare read of the "
                  "digests + last events ratio %.2f\n",
                  s.fold_events, s.stats_s, s.stats_s / digs.seconds);
    if (r > 0)
      dashboards.push_back(s.stats_s);
    std::fflush(stdout);
    ours.push_back(s.seconds);
    bare.push_back(tails.seconds);
    bare_dig.push_back(digs.seconds);
    full.push_back(f.seconds);
  }
  // 2. After a crash no digest is current (a crash stores none): every job
  // that changed since the last clean stop is folded at start-up; the ones
  // without a timed wait only for their digest (their snapshots' specs
  // left undecoded), and are replayed when first asked for. Here every job.
  std::vector<double> crashed;
  std::vector<double> crashed_dashboards;
  for (int r = 0; r < opts.rounds; ++r) {
    drop_digests(data);
    auto s = run_startup(opts, data, true, false, true);
    check(s);
    if (s.dormant != opts.jobs || s.events == 0)
      die("after the digests were dropped, " + std::to_string(s.dormant)
          + " jobs started dormant with " + std::to_string(s.events)
          + " events folded; expected every job replayed and dormant");
    auto t = run_bare_tails(data);
    std::printf("no current digest (as after a crash), round %d: serving "
                "after %.3f s (replay %.0f ms, %lu events folded, %zu jobs "
                "folded for their digest and left dormant); bare read of the "
                "snapshots + "
                "tails %.3f s, ratio %.2f\n",
                r + 1, s.seconds, s.replay_ms, s.events, s.dormant, t.seconds,
                s.seconds / t.seconds);
    std::printf("  then Inspect.GetStats (the inspector's first fold of "
                "every job's history, no fold stored: %lu events read) answered "
                "%.3f s after the start; bare full scan ratio %.2f\n",
                s.fold_events, s.stats_s, s.stats_s / median(full));
    std::fflush(stdout);
    crashed.push_back(s.seconds);
    crashed_dashboards.push_back(s.stats_s);
    bare.push_back(t.seconds);
  }
  // 3. Replaying every job and spawning its actor at once (the daemon's
  // start-up before dormant jobs; `dormant_start = false`).
  std::vector<double> replaying;
  for (int r = 0; r < opts.rounds; ++r) {
    auto s = run_startup(opts, data, false);
    check(s);
    auto t = run_bare_tails(data);
    std::printf("replaying and spawning every job, round %d: serving after "
                "%.3f s (replay %.0f ms, %lu events folded); bare read of the "
                "snapshots + tails %.3f s, ratio %.2f\n",
                r + 1, s.seconds, s.replay_ms, s.events, t.seconds,
                s.seconds / t.seconds);
    std::fflush(stdout);
    replaying.push_back(s.seconds);
    bare.push_back(t.seconds);
  }
  auto m_ours = median(ours);
  auto m_bare = median(bare);
  auto m_dig = median(bare_dig);
  auto m_full = median(full);
  auto m_replaying = median(replaying);
  auto m_crashed = median(crashed);
  std::printf("\nstart-up until serving (app::start until ListJobs answered "
              "for all %zu jobs, %lu events): first %.3f s (after the writer "
              "%s), median of %d %.3f s (design target <= 2 s)\n",
              opts.jobs, wr.events, ours.front(),
              opts.crash ? "was killed, without digests: replays the WAL and "
                           "every job"
                         : "stopped cleanly, storing digests",
              opts.rounds, m_ours);
  std::printf("baseline: bare RocksDB open + read of the job ids, each job's "
              "latest snapshot and the events after it (%lu entries, %zu "
              "threads): %.3f s\n",
              tails.entries, tails.threads, m_bare);
  std::printf("ratio start-up / bare read of the snapshots + tails: %.2f "
              "(design target <= 2); / bare read of the digests + last events "
              "(%.3f s) %.2f; / bare full scan of every event and snapshot "
              "(%.3f s) %.2f\n",
              m_ours / m_bare, m_dig, m_ours / m_dig, m_full,
              m_ours / m_full);
  std::printf("no current digest (as after a crash; every job folded for "
              "its digest, replayed when first asked for): median %.3f s, "
              "ratio "
              "%.2f to the bare read of the snapshots + tails\n",
              m_crashed, m_crashed / m_bare);
  std::printf("replaying and spawning every job at start-up: median %.3f s, "
              "ratio %.2f\n",
              m_replaying, m_replaying / m_bare);
  auto dormant_kib = first.rss_after - first.rss_before;
  auto woken_kib = first.rss_touched - first.rss_before;
  auto replayed_kib = spawned_kib;
  std::printf("resident memory, net of the daemon alone on an empty data "
              "directory (+%ld KiB): %.1f KiB per dormant job, %.1f KiB per "
              "job once each was asked for, %.1f KiB per job replayed at "
              "start-up for its digest and left dormant (after a crash), %.1f "
              "KiB per job replayed and spawned at "
              "start-up (each in a process of its own; no agent streams "
              "open; design target <= 50 KB with streams open: see "
              "memory_bench)\n",
              fixed_kib, per_job(dormant_kib - fixed_kib),
              per_job(woken_kib - fixed_kib), per_job(crashed_kib - fixed_kib),
              per_job(replayed_kib - fixed_kib));
  // Machine-readable lines for scripts/bench.sh (BENCHMARKS.md).
  std::printf("RESULT\tRestart after a clean stop: %zu jobs / %lu events, "
              "serving (until ListJobs answers; median of %d)\t%.3f s\t%.3f "
              "s (bare RocksDB read of the snapshots + tails)\t%.2f\t<= 2 s "
              "and <= 2x\n",
              opts.jobs, wr.events, opts.rounds, m_ours, m_bare,
              m_ours / m_bare);
  std::printf("RESULT\tRestart with no current digest, as after a crash "
              "(every job folded for its digest; replayed when first asked "
              "for): "
              "%zu jobs / %lu events (median of %d)\t%.3f s\t%.3f s (bare "
              "RocksDB read of the snapshots + tails)\t%.2f\t<= 2 s and <= "
              "2x\n",
              opts.jobs, wr.events, opts.rounds, m_crashed, m_bare,
              m_crashed / m_bare);
  std::printf("RESULT\tRestart replaying every job and spawning every actor "
              "at once (dormant start off): %zu jobs / %lu events (median of "
              "%d)\t%.3f s\t%.3f s (bare RocksDB read of the snapshots + "
              "tails)\t%.2f\t-\n",
              opts.jobs, wr.events, opts.rounds, m_replaying, m_bare,
              m_replaying / m_bare);
  if (!dashboards.empty()) {
    auto m_dash = median(dashboards);
    std::printf("RESULT\tRestart after a clean stop: %zu jobs / %lu events, "
                "until Inspect.GetStats answers (the inspector takes up the "
                "folds of every job's history the stop stored; median of "
                "%zu)\t%.3f s\t%.3f s (bare RocksDB read of the digests + "
                "last events)\t%.2f\t-\n",
                opts.jobs, wr.events, dashboards.size(), m_dash, m_dig,
                m_dash / m_dig);
  }
  auto m_crashed_dash = median(crashed_dashboards);
  std::printf("RESULT\tRestart with no digest or fold stored: %zu "
              "jobs / %lu events, until Inspect.GetStats answers (the "
              "inspector folds every job's history; median of %d)\t%.3f "
              "s\t%.3f s (bare RocksDB full scan of every event and "
              "snapshot, one thread)\t%.2f\t-\n",
              opts.jobs, wr.events, opts.rounds, m_crashed_dash, m_full,
              m_crashed_dash / m_full);
  std::printf("RESULT\tAfter a restart, a GetJob of each of %zu jobs: the "
              "first (dormant jobs replayed) vs the second\t%.3f s\t%.3f "
              "s\t%.2f\t-\n",
              opts.jobs, first.first_touch_s, first.second_touch_s,
              first.first_touch_s / first.second_touch_s);
  std::printf("RESULT\tMemory: resident per idle job at %zu jobs (no agent "
              "streams open), replayed at start-up\t%.1f KiB (net of the "
              "empty daemon; %.1f KiB dormant, %.1f KiB dormant after a crash, "
              "%.1f KiB once asked for)\t%ld KiB (the daemon on an empty data "
              "directory)\t-\t(see the subscribed figure)\n",
              opts.jobs, per_job(replayed_kib - fixed_kib),
              per_job(dormant_kib - fixed_kib), per_job(crashed_kib - fixed_kib),
              per_job(woken_kib - fixed_kib), fixed_kib);
  if (opts.dir.empty())
    fs::remove_all(base);
  return 0;
}
