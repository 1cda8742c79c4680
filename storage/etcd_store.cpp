#include "storage/etcd_store.hpp"

#include <cstdlib>
#include <limits>
#include <map>
#include <utility>

#include "actors/error.hpp"
#include "storage/event_codec.hpp"

namespace recoverd::storage::etcd {

namespace {

constexpr char kind_tag(record_kind kind) {
  switch (kind) {
    case record_kind::snapshot:
      return 's';
    case record_kind::fleet_event:
      return 'f';
    case record_kind::fleet_snapshot:
      return 'F';
    default:
      return 'e';
  }
}

/// Seconds a replica's mark outlives it.
constexpr int64_t mark_ttl_s = 10;

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// `layout::encode_job` backwards; none for text it cannot have made.
std::optional<std::string> decode_name(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size())
      return std::nullopt;
    auto hi = hex_value(text[i + 1]);
    auto lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

} // namespace

std::string stream_of(record_kind kind, const std::string& name) {
  if (kind == record_kind::event)
    return name;
  return std::string{kind_tag(kind)} + "/" + name;
}

std::optional<etcd_record> parse_record(const layout& keys,
                                        const std::string& key,
                                        std::string value) {
  auto prefix = keys.root() + "log/";
  if (key.size() < prefix.size() + 22 || key.compare(0, prefix.size(), prefix))
    return std::nullopt;
  auto slash = key.size() - 21;
  if (key[slash] != '/')
    return std::nullopt;
  etcd_record result;
  for (size_t i = slash + 1; i < key.size(); ++i) {
    if (key[i] < '0' || key[i] > '9')
      return std::nullopt;
    result.seq = result.seq * 10 + static_cast<uint64_t>(key[i] - '0');
  }
  auto stream = decode_name(key.substr(prefix.size(), slash - prefix.size()));
  if (!stream || stream->empty())
    return std::nullopt;
  if (stream->size() > 2 && (*stream)[1] == '/') {
    switch ((*stream)[0]) {
      case 's':
        result.kind = record_kind::snapshot;
        break;
      case 'f':
        result.kind = record_kind::fleet_event;
        break;
      case 'F':
        result.kind = record_kind::fleet_snapshot;
        break;
      default:
        return std::nullopt;
    }
    result.name = stream->substr(2);
  } else if (stream->find('/') != std::string::npos) {
    return std::nullopt;
  } else {
    result.name = std::move(*stream);
  }
  result.bytes = std::move(value);
  return result;
}

std::string archived_key(const layout& keys, const std::string& replica) {
  return keys.root() + "archived/" + layout::encode_job(replica);
}

// -- etcd_authority -----------------------------------------------------------

etcd_authority::etcd_authority(etcd_log& log, leader_election& election,
                               std::shared_ptr<client> c,
                               std::chrono::milliseconds trim_interval,
                               std::chrono::milliseconds compact_interval)
  : log_(log), election_(election), client_(std::move(c)),
    trim_interval_(trim_interval), compact_interval_(compact_interval),
    last_compact_(std::chrono::steady_clock::now()) {
  // nop
}

caf::expected<std::pair<int64_t, int64_t>> etcd_authority::reach() {
  auto prefix = log_.keys().root() + "archived/";
  auto marks = client_->range({prefix, prefix_end(prefix)});
  if (!marks)
    return marks.error();
  auto result = std::numeric_limits<int64_t>::max();
  for (const auto& kv : marks->kvs) {
    char* end = nullptr;
    auto x = std::strtoll(kv.value.c_str(), &end, 10);
    result = std::min<int64_t>(result, end != kv.value.c_str() ? x : 0);
  }
  return std::make_pair(result, marks->revision);
}

caf::expected<int64_t> etcd_authority::compact_history() {
  auto r = reach();
  if (!r)
    return r.error();
  auto target = std::min(r->first, r->second);
  if (target <= compacted_)
    return int64_t{0};
  // A revision compacted already (by etcd's own auto-compaction) is no
  // failure: the history before it is gone either way.
  if (auto err = client_->compact(target);
      err && errc_of(err) != errc::history_purged)
    return err;
  compacted_ = target;
  return target;
}

caf::error etcd_authority::commit(const std::vector<log_record>& events,
                                  const std::vector<snapshot_record>& snapshots,
                                  const fleet_records& fleet) {
  // Most group commits hold job events only: they go as they are, the
  // other kinds are renamed into their streams.
  std::vector<log_record> mixed;
  if (!snapshots.empty() || !fleet.empty()) {
    mixed.reserve(events.size() + snapshots.size() + fleet.events.size()
                  + fleet.snapshots.size());
    mixed.insert(mixed.end(), events.begin(), events.end());
    auto add = [&](record_kind kind, const auto& xs) {
      for (const auto& x : xs)
        mixed.push_back({stream_of(kind, x.job_id), x.seq, x.bytes});
    };
    add(record_kind::snapshot, snapshots);
    add(record_kind::fleet_event, fleet.events);
    add(record_kind::fleet_snapshot, fleet.snapshots);
  }
  const auto& batch = mixed.empty() ? events : mixed;
  if (batch.empty())
    return caf::none;
  auto done = log_.append(batch);
  if (!done) {
    if (errc_of(done.error()) == errc::deposed)
      return done.error();
    // Unknown what etcd kept of the batch (a Txn without an answer, or the
    // first of several stored): the jobs here do not apply it, and would
    // write other bytes at the same seqs. Only a replica that rebuilds its
    // jobs from etcd may lead again.
    auto why = make_error(errc::deposed, "etcd append failed, stepping down: "
                                           + message_of(done.error()));
    election_.give_up(why);
    return why;
  }
  for (const auto& x : snapshots)
    pending_.push_back({stream_of(record_kind::snapshot, x.job_id), x.job_id,
                        x.seq, done->revision});
  for (const auto& x : fleet.snapshots)
    pending_.push_back({stream_of(record_kind::fleet_snapshot, x.job_id),
                        stream_of(record_kind::fleet_event, x.job_id), x.seq,
                        done->revision});
  auto now = std::chrono::steady_clock::now();
  if (!pending_.empty() && now - last_trim_ >= trim_interval_) {
    last_trim_ = now;
    // The batch is durable whatever the trim does: a failed trim is tried
    // again later, and a deposed replica's next append fails anyway.
    (void) trim();
  }
  if (now - last_compact_ >= compact_interval_) {
    last_compact_ = now;
    (void) compact_history();
  }
  return caf::none;
}

caf::expected<size_t> etcd_authority::trim() {
  if (pending_.empty())
    return size_t{0};
  const auto& keys = log_.keys();
  auto r = reach();
  if (!r)
    return r.error();
  auto reach = r->first;
  // The latest snapshot of each stream that every archive holds.
  std::map<std::string, pending_trim> cut;
  std::vector<pending_trim> later;
  for (auto& p : pending_) {
    if (p.revision > reach) {
      later.push_back(std::move(p));
      continue;
    }
    auto& latest = cut[p.snapshots];
    if (p.seq > latest.seq)
      latest = std::move(p);
  }
  pending_ = std::move(later);
  // Two range deletes per stream: its events and its snapshots before the
  // cut (the snapshot at the cut and the events from it on stay).
  constexpr size_t streams_per_txn = 60;
  txn t;
  size_t in_txn = 0;
  auto flush = [&]() -> caf::error {
    if (in_txn == 0)
      return caf::none;
    auto done = election_.fenced(std::move(t));
    t = txn{};
    in_txn = 0;
    return done ? caf::none : done.error();
  };
  for (const auto& [stream, x] : cut) {
    t.then_delete(keys.event_key(x.events, 0), keys.event_key(x.events, x.seq));
    t.then_delete(keys.event_key(stream, 0), keys.event_key(stream, x.seq));
    if (++in_txn == streams_per_txn)
      if (auto err = flush())
        return err;
  }
  if (auto err = flush())
    return err;
  return cut.size();
}

// -- archive_follower ---------------------------------------------------------

archive_follower::archive_follower(std::shared_ptr<client> c, layout keys,
                                   event_log& archive, std::string replica)
  : client_(std::move(c)), keys_(std::move(keys)), archive_(archive),
    replica_(std::move(replica)) {
  // nop
}

archive_follower::~archive_follower() {
  stop();
}

caf::expected<int64_t> archive_follower::read_all() {
  auto prefix = keys_.root() + "log/";
  // One read of the whole log at one revision: paging would let a later
  // page hold a job's newer events while an earlier one missed older ones.
  auto all = client_->range({prefix, prefix_end(prefix)});
  if (!all)
    return all.error();
  std::vector<etcd_record> records;
  records.reserve(all->kvs.size());
  for (auto& kv : all->kvs)
    if (auto x = parse_record(keys_, kv.key, std::move(kv.value)))
      records.push_back(std::move(*x));
  if (auto err = archive(std::move(records), all->revision))
    return err;
  return all->revision;
}

caf::error archive_follower::start() {
  // The live jobs start as the archive holds them (once: a restarted watch
  // goes on from them); what etcd adds folds in as it arrives.
  if (!loaded_) {
    auto replayed = replay_all(archive_);
    if (!replayed)
      return replayed.error();
    for (const auto& x : replayed->discarded)
      if (auto gone = archive_.discard(x.job_id, x.seq); !gone)
        return gone.error();
    for (auto& j : replayed->live)
      jobs_.emplace(j.state.spec.job_id, std::move(j.state));
    // A deleted job's model is not kept: put again, it is replayed.
    for (const auto& d : replayed->deleted) {
      job_model gone;
      gone.spec.job_id = d.job_id;
      gone.seq = d.seq;
      gone.updated_at_ms = d.deleted_at_ms;
      jobs_.emplace(d.job_id, std::move(gone));
    }
    loaded_ = true;
  }
  auto revision = read_all();
  if (!revision)
    return revision.error();
  auto prefix = keys_.root() + "log/";
  auto w = client_->watch(
    {prefix, prefix_end(prefix)}, *revision + 1,
    [this](std::vector<watch_event> xs) {
      std::vector<etcd_record> got;
      int64_t revision = 0;
      for (auto& x : xs) {
        revision = std::max(revision, x.kv.mod_revision);
        // Deletes are etcd's bounding of its log, not history's end: the
        // archive keeps everything.
        if (x.is_delete)
          continue;
        if (auto r = parse_record(keys_, x.kv.key, std::move(x.kv.value)))
          got.push_back(std::move(*r));
      }
      if (auto err = archive(std::move(got), revision)) {
        std::lock_guard<std::mutex> guard{mtx_};
        failure_ = std::move(err);
      }
    },
    [this](caf::error err) {
      std::lock_guard<std::mutex> guard{mtx_};
      failure_ = std::move(err);
    });
  if (!w)
    return w.error();
  watch_ = std::move(*w);
  if (!replica_.empty()) {
    publish();
    marker_ = std::thread([this] { mark_loop(); });
  }
  return caf::none;
}

void archive_follower::publish() {
  int64_t revision = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    revision = revision_;
    if (lease_ != 0 && revision == published_)
      return;
  }
  if (lease_ == 0) {
    auto l = client_->grant(mark_ttl_s);
    if (!l)
      return;
    lease_ = l->id;
  }
  if (client_->put(archived_key(keys_, replica_), std::to_string(revision),
                   lease_)) {
    std::lock_guard<std::mutex> guard{mtx_};
    published_ = revision;
  } else {
    lease_ = 0; // expired or lost: a new one next time
  }
}

void archive_follower::mark_loop() {
  std::unique_lock<std::mutex> lock{mtx_};
  while (!stopping_) {
    marker_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_)
      return;
    lock.unlock();
    if (lease_ != 0) {
      auto ttl = client_->keep_alive(lease_, std::chrono::seconds(2));
      if (!ttl || *ttl == 0)
        lease_ = 0;
    }
    publish();
    lock.lock();
  }
}

caf::error archive_follower::archive(std::vector<etcd_record> records,
                                     int64_t revision) {
  // The last seq the archive holds per stream, read once per batch.
  std::map<std::pair<record_kind, std::string>, uint64_t> last;
  auto last_of = [&](const etcd_record& x) -> caf::expected<uint64_t> {
    auto key = std::make_pair(x.kind, x.name);
    if (auto i = last.find(key); i != last.end())
      return i->second;
    uint64_t seq = 0;
    if (x.kind == record_kind::event) {
      auto s = archive_.last_seq(x.name);
      if (!s)
        return s.error();
      seq = *s;
    } else if (x.kind == record_kind::snapshot) {
      auto s = archive_.snapshot(x.name);
      if (!s)
        return s.error();
      seq = *s ? (*s)->seq : 0;
    } else {
      auto s = archive_.read_fleet(x.name);
      if (!s)
        return s.error();
      if (x.kind == record_kind::fleet_event && !s->events.empty())
        seq = s->events.back().seq;
      if (s->snapshot)
        seq = std::max(seq, s->snapshot->seq);
    }
    last.emplace(key, seq);
    return seq;
  };
  std::vector<log_record> events;
  std::vector<snapshot_record> snapshots;
  fleet_records fleet;
  for (auto& x : records) {
    auto seq = last_of(x);
    if (!seq)
      return seq.error();
    if (x.seq <= *seq)
      continue;
    last[{x.kind, x.name}] = x.seq;
    switch (x.kind) {
      case record_kind::event:
        events.push_back({std::move(x.name), x.seq, std::move(x.bytes)});
        break;
      case record_kind::snapshot:
        snapshots.push_back({std::move(x.name), x.seq, std::move(x.bytes)});
        break;
      case record_kind::fleet_event:
        fleet.events.push_back({std::move(x.name), x.seq, std::move(x.bytes)});
        break;
      case record_kind::fleet_snapshot:
        fleet.snapshots.push_back(
          {std::move(x.name), x.seq, std::move(x.bytes)});
        break;
    }
  }
  auto n = events.size() + snapshots.size() + fleet.events.size()
           + fleet.snapshots.size();
  if (n > 0)
    if (auto err = archive_.append(events, snapshots, fleet))
      return err;
  fold(events);
  std::lock_guard<std::mutex> guard{mtx_};
  records_ += n;
  revision_ = std::max(revision_, revision);
  return caf::none;
}

caf::error archive_follower::catch_up() {
  stop();
  auto revision = read_all();
  return revision ? caf::none : revision.error();
}

void archive_follower::fold(const std::vector<log_record>& events) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (const auto& x : events) {
    auto& job = jobs_[x.job_id];
    if (job.spec.job_id.empty())
      job.spec.job_id = x.job_id;
    if (stale_.count(x.job_id) > 0 || x.seq <= job.seq)
      continue;
    auto ev = x.seq == job.seq + 1 && (job.exists || job.seq == 0)
                ? decode_event(x.bytes)
                : caf::expected<event>{make_error(errc::corrupt_record, "")};
    if (!ev) {
      stale_.insert(x.job_id);
      continue;
    }
    job = apply(std::move(job), std::move(*ev));
    ++folded_;
    if (!job.exists) {
      // A deleted job keeps only what `take_jobs` reports of it: a standby
      // running for months holds no deleted job's whole model.
      job_model gone;
      gone.spec.job_id = x.job_id;
      gone.seq = job.seq;
      gone.updated_at_ms = job.updated_at_ms;
      job = std::move(gone);
    }
  }
}

caf::expected<replay_result> archive_follower::take_jobs() {
  std::map<std::string, job_model> jobs;
  std::set<std::string> stale;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    jobs.swap(jobs_);
    stale.swap(stale_);
  }
  replay_result result;
  for (auto& [id, model] : jobs) {
    replayed_job job;
    if (stale.count(id) > 0) {
      auto replayed = replay_job(archive_, id);
      if (!replayed)
        return replayed.error();
      job = std::move(*replayed);
      result.events_replayed += job.events_replayed;
      if (job.from_snapshot)
        ++result.from_snapshot;
    } else {
      job.state = std::move(model);
    }
    if (job.state.exists)
      result.live.push_back(std::move(job));
    else if (job.state.seq > 0)
      result.deleted.push_back({id, job.state.seq, job.state.updated_at_ms});
  }
  return result;
}

std::pair<size_t, size_t> archive_follower::live_jobs() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return {jobs_.size(), stale_.size()};
}

uint64_t archive_follower::folded_events() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return folded_;
}

caf::error archive_follower::failure() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return failure_;
}

void archive_follower::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  marker_cv_.notify_all();
  if (marker_.joinable())
    marker_.join();
  if (watch_)
    watch_->stop();
  watch_.reset();
  // A leader holds everything: its mark would only hold the trims back.
  if (lease_ != 0)
    (void) client_->revoke(lease_);
  lease_ = 0;
}

int64_t archive_follower::archived_revision() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return revision_;
}

uint64_t archive_follower::archived_records() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return records_;
}

} // namespace recoverd::storage::etcd
