#include "storage/etcd_store.hpp"

#include <map>
#include <utility>

#include "actors/error.hpp"

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

// -- etcd_authority -----------------------------------------------------------

etcd_authority::etcd_authority(etcd_log& log) : log_(log) {
  // nop
}

caf::error etcd_authority::commit(const std::vector<log_record>& events,
                                  const std::vector<snapshot_record>& snapshots,
                                  const fleet_records& fleet) {
  std::vector<log_record> batch;
  batch.reserve(events.size() + snapshots.size() + fleet.events.size()
                + fleet.snapshots.size());
  batch.insert(batch.end(), events.begin(), events.end());
  auto add = [&](record_kind kind, const auto& xs) {
    for (const auto& x : xs)
      batch.push_back({stream_of(kind, x.job_id), x.seq, x.bytes});
  };
  add(record_kind::snapshot, snapshots);
  add(record_kind::fleet_event, fleet.events);
  add(record_kind::fleet_snapshot, fleet.snapshots);
  if (batch.empty())
    return caf::none;
  auto done = log_.append(batch);
  if (!done)
    return done.error();
  return caf::none;
}

// -- archive_follower ---------------------------------------------------------

archive_follower::archive_follower(std::shared_ptr<client> c, layout keys,
                                   event_log& archive)
  : client_(std::move(c)), keys_(std::move(keys)), archive_(archive) {
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
  return caf::none;
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

caf::error archive_follower::failure() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return failure_;
}

void archive_follower::stop() {
  if (watch_)
    watch_->stop();
  watch_.reset();
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
