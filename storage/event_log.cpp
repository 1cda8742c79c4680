#include "storage/event_log.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>

#include <sys/statvfs.h>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>
#include <rocksdb/write_batch.h>

#include "actors/error.hpp"
#include "storage/encoding.hpp"
#include "storage/event_log_impl.hpp"

namespace recoverd::storage {

namespace {

// The stream an event key belongs to: the key without its sequence number
// (job id and its 0 byte). A memtable keeps, per stream, where its last key
// went in; the next one, in sequence, goes in right after it instead of
// searching the skip list from the top (the journal's inserts interleave
// many jobs, so the memtable's one shared position rarely fits).
class stream_of_event_key final : public rocksdb::SliceTransform {
public:
  const char* Name() const override {
    return "recoverd.stream_of_event_key";
  }

  // The job id with its 0 byte: what `parse_event_key` leaves of the key
  // once the 8-byte seq is taken off.
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return {key.data(), key.size() - 8};
  }

  bool InDomain(const rocksdb::Slice& key) const override {
    return parse_event_key(key.ToStringView()).has_value();
  }
};

// The last event of `job_id` under `it`: its seq and the hash of its
// record, or seq 0 when the job has none.
caf::expected<std::pair<uint64_t, uint64_t>>
last_event(rocksdb::Iterator& it, const std::string& job_id) {
  it.SeekForPrev(event_key(job_id, UINT64_MAX));
  if (!it.status().ok())
    return log_detail::io_error("cannot read events of " + job_id, it.status());
  if (!it.Valid())
    return std::make_pair(uint64_t{0}, uint64_t{0});
  auto parsed = parse_event_key(it.key().ToStringView());
  if (!parsed || parsed->first != job_id)
    return std::make_pair(uint64_t{0}, uint64_t{0});
  return std::make_pair(parsed->second,
                        record_hash(it.value().ToStringView()));
}

// The value stored under exactly `key` in `it`'s family, if any; valid
// until `it` moves.
caf::expected<std::optional<std::string_view>>
seek_exact(rocksdb::Iterator& it, const std::string& key, const char* what) {
  it.Seek(key);
  if (!it.status().ok())
    return log_detail::io_error(std::string{"cannot read the "} + what + " of "
                                  + key,
                                it.status());
  if (!it.Valid() || it.key() != rocksdb::Slice{key})
    return std::optional<std::string_view>{};
  return std::optional<std::string_view>{it.value().ToStringView()};
}

// Free bytes (for unprivileged users) of the file system holding `path`, or
// of its nearest existing parent.
std::optional<uint64_t> free_bytes(std::filesystem::path path) {
  struct statvfs fs {};
  while (::statvfs(path.c_str(), &fs) != 0) {
    if (!path.has_parent_path() || path.parent_path() == path)
      return std::nullopt;
    path = path.parent_path();
  }
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB",
                static_cast<double>(bytes) / (1 << 20));
  return buf;
}

} // namespace

namespace log_detail {

caf::error check_space(const std::string& path, uint64_t reserve,
                       uint64_t need, const char* what) {
  if (reserve == 0)
    return caf::none;
  auto free = free_bytes(path);
  if (!free || *free >= reserve + need)
    return caf::none;
  return make_error(errc::storage_failure,
                    std::string{what} + ": No space left on device: "
                      + mib(*free) + " free in " + path
                      + ", below the reserve of " + mib(reserve)
                      + " (--min-free-space)");
}

caf::error io_error(const std::string& what, const rocksdb::Status& st) {
  return make_error(errc::storage_failure, what + ": " + st.ToString());
}

} // namespace log_detail

using namespace log_detail;

event_log::event_log(std::unique_ptr<impl> p) : impl_(std::move(p)) {
  // nop
}

event_log::~event_log() = default;

caf::expected<std::unique_ptr<event_log>>
event_log::open(const event_log_options& opts) {
  auto p = std::make_unique<impl>();
  p->opts = opts;
  p->write_opts.sync = opts.sync;
  rocksdb::DBOptions db_opts;
  db_opts.create_if_missing = !opts.read_only;
  db_opts.create_missing_column_families = !opts.read_only;
  // A crash can leave the WAL's last record torn (incomplete, or failing its
  // checksum). kPointInTimeRecovery replays the WAL up to the first such
  // record and drops everything after it, so the DB reopens exactly as it was
  // after some complete WriteBatch; RocksDB refuses to open ("SST file is
  // ahead of WALs") if a column family was flushed past that point, so the
  // result is always a consistent prefix.
  // One append is one batch: a torn append vanishes whole, never half a job's
  // events or an index entry without its event. Nothing acknowledged is lost
  // under sync=always (an append is answered after the sync that makes its
  // record complete). The other modes fail one of the two cases the storage
  // tests cover (a last record cut short, a last record with garbage in
  // it): kAbsoluteConsistency refuses to open in both, so the daemon would
  // not start after a crash mid-write; kTolerateCorruptedTailRecords accepts
  // the short record but refuses the checksum mismatch; and
  // kSkipAnyCorruptedRecords would skip damage in the middle of the WAL,
  // leaving gaps in a job's sequence and dangling index entries.
  db_opts.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // Bounds what the WAL holds, and so what an open after a crash replays:
  // past this size RocksDB flushes the column families that keep the oldest
  // WAL file alive (the small `global` and `meta` families would otherwise
  // keep every WAL file since their last flush).
  db_opts.max_total_wal_size = 32 << 20;
  db_opts.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_opts.keep_log_file_num = 3;
  rocksdb::ColumnFamilyOptions cf_opts;
  // Memtables of 16 MB (RocksDB's default is 64 MB) and at most 32 MB of WAL
  // bound what an open after a crash replays from the WAL (startup_bench
  // --crash, 10,000 jobs: first start 2.0 s with 64 MB for both, 1.5 s with
  // these, on a busy 2-core VM).
  cf_opts.write_buffer_size = opts.write_buffer_size > 0
                                ? opts.write_buffer_size
                                : size_t{16} << 20;
  // Memory bounded for a daemon that runs for months: by default each of
  // the 9 column families would get a block cache of its own (8 MB each),
  // every table's index and filter blocks would live outside any cache
  // (growing with the log), and each family would keep memtables of its
  // own. One cache for all, index and filters charged to it (those of
  // level-0 tables pinned, as they are read most), and one budget for every
  // memtable.
  rocksdb::BlockBasedTableOptions table_opts;
  p->block_cache = rocksdb::NewLRUCache(
    opts.block_cache_bytes > 0 ? opts.block_cache_bytes : size_t{32} << 20);
  table_opts.block_cache = p->block_cache;
  table_opts.cache_index_and_filter_blocks = true;
  table_opts.pin_l0_filter_and_index_blocks_in_cache = true;
  cf_opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_opts));
  db_opts.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(
    opts.memtable_bytes > 0 ? opts.memtable_bytes : size_t{64} << 20);
  if (opts.read_only && !std::filesystem::exists(opts.path))
    return make_error(errc::storage_failure,
                      "no event log in " + opts.path + " (no such directory)");
  // Opening writes (a new WAL, OPTIONS, MANIFEST): on a full disk RocksDB
  // would abort, so refuse first and say why.
  if (!opts.read_only)
    if (auto err = check_space(opts.path, opts.min_free_bytes, 0,
                               "cannot open the event log"))
      return err;
  // Which families to open: all of them, except, read-only, the optional
  // ones an older log lacks.
  std::vector<size_t> opened;
  {
    std::vector<std::string> existing;
    if (opts.read_only)
      rocksdb::DB::ListColumnFamilies(db_opts, opts.path, &existing)
        .PermitUncheckedError();
    for (size_t i = 0; i < cf_count; ++i)
      if (!opts.read_only || !optional_family(i)
          || std::find(existing.begin(), existing.end(), cf_names[i])
               != existing.end())
        opened.push_back(i);
  }
  // Jobs' events go in in sequence per job. Not the fleet's family: a
  // memtable keeps one set of positions for its point and its range
  // deletion entries, and a range deletion (the fleet's after a snapshot)
  // would be inserted at a position of the other list (RocksDB 7.8 asserts).
  auto events_opts = cf_opts;
  events_opts.memtable_insert_with_hint_prefix_extractor
    = std::make_shared<stream_of_event_key>();
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (auto i : opened)
    descs.emplace_back(cf_names[i], i == cf_events ? events_opts : cf_opts);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status st;
  std::vector<rocksdb::ColumnFamilyHandle*> got;
  if (opts.read_only)
    st = rocksdb::DB::OpenForReadOnly(db_opts, opts.path, descs, &got, &raw);
  else
    st = rocksdb::DB::Open(db_opts, opts.path, descs, &got, &raw);
  if (st.ok()) {
    p->handles.assign(cf_count, nullptr);
    for (size_t k = 0; k < opened.size(); ++k)
      p->handles[opened[k]] = got[k];
  }
  if (!st.ok()) {
    if (st.IsIOError() && st.ToString().find("lock") != std::string::npos)
      return make_error(errc::storage_failure,
                        "data directory " + opts.path
                          + " is in use by another recoverd (RocksDB lock "
                            "held): "
                          + st.ToString());
    return io_error("cannot open event log in " + opts.path, st);
  }
  p->db.reset(raw);
  // Schema check.
  auto version = p->get(cf_meta, "schema_version");
  if (!version)
    return version.error();
  if (*version) {
    if ((*version)->size() != 8 || get_be64(**version) != schema_version)
      return make_error(errc::storage_failure,
                        "event log in " + opts.path
                          + " has an unsupported schema version (this "
                            "recoverd reads version "
                          + std::to_string(schema_version) + ")");
  }
  auto inc = p->get(cf_meta, "incarnation");
  if (!inc)
    return inc.error();
  if (*inc && (*inc)->size() == 8)
    p->incarnation = get_be64(**inc);
  // Last global position.
  {
    std::unique_ptr<rocksdb::Iterator> it{
      p->db->NewIterator(rocksdb::ReadOptions{}, p->h(cf_global))};
    it->SeekToLast();
    if (it->Valid() && it->key().size() == 8)
      p->last_position = get_be64(it->key().ToStringView());
    if (!it->status().ok())
      return io_error("cannot read the global order", it->status());
  }
  auto floor = p->get(cf_meta, position_floor_key);
  if (!floor)
    return floor.error();
  if (*floor && (*floor)->size() == 8)
    p->last_position = std::max(p->last_position, get_be64(**floor));
  if (!opts.read_only) {
    ++p->incarnation;
    rocksdb::WriteBatch batch;
    batch.Put(p->h(cf_meta), "schema_version", be64(schema_version));
    batch.Put(p->h(cf_meta), "incarnation", be64(p->incarnation));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (auto wst = p->db->Write(wo, &batch); !wst.ok())
      return io_error("cannot write metadata", wst);
  }
  return std::unique_ptr<event_log>{new event_log(std::move(p))};
}

caf::error event_log::append(const std::vector<log_record>& events,
                             const std::vector<snapshot_record>& snapshots,
                             const fleet_records& fleet) {
  if (impl_->opts.read_only)
    return make_error(errc::storage_failure, "event log is open read-only");
  {
    std::lock_guard<std::mutex> guard{impl_->fault_mtx};
    if (!impl_->injected_failure.empty())
      return make_error(errc::storage_failure,
                        "append failed: IO error: " + impl_->injected_failure);
  }
  uint64_t need = 0;
  for (const auto& rec : events)
    need += rec.bytes.size();
  for (const auto& snap : snapshots)
    need += snap.bytes.size();
  for (const auto& rec : fleet.events)
    need += rec.bytes.size();
  for (const auto& snap : fleet.snapshots)
    need += snap.bytes.size();
  if (auto err = check_space(impl_->opts.path, impl_->opts.min_free_bytes,
                             need, "append refused"))
    return err;
  rocksdb::WriteBatch batch;
  auto position = impl_->last_position;
  for (const auto& rec : events) {
    auto key = event_key(rec.job_id, rec.seq);
    batch.Put(impl_->h(cf_events), key, rec.bytes);
    batch.Put(impl_->h(cf_global), be64(++position), key);
  }
  for (const auto& snap : snapshots)
    batch.Put(impl_->h(cf_snapshots), snap.job_id,
              seq_prefixed(snap.seq, snap.bytes));
  for (const auto& rec : fleet.events)
    batch.Put(impl_->h(cf_fleet), fleet_event_key(rec.job_id, rec.seq),
              rec.bytes);
  for (const auto& snap : fleet.snapshots) {
    batch.Put(impl_->h(cf_fleet), fleet_snapshot_key(snap.job_id),
              seq_prefixed(snap.seq, snap.bytes));
    // The snapshot replaces the events it folds: the stream stays bounded.
    batch.DeleteRange(impl_->h(cf_fleet), fleet_event_key(snap.job_id, 0),
                      fleet_event_key(snap.job_id, snap.seq + 1));
  }
  auto st = impl_->db->Write(impl_->write_opts, &batch);
  if (!st.ok())
    return io_error("append failed", st);
  impl_->last_position = position;
  return caf::none;
}

caf::error event_log::sync_wal() {
  if (auto st = impl_->db->SyncWAL(); !st.ok())
    return io_error("WAL sync failed", st);
  return caf::none;
}

caf::error event_log::for_each(
  const std::string& job_id, uint64_t from_seq,
  const std::function<caf::error(uint64_t, std::string_view)>& f) const {
  auto upper = job_upper_bound(job_id);
  rocksdb::Slice upper_slice{upper};
  auto it = impl_->iterate_below(cf_events, &upper_slice);
  for (it->Seek(event_key(job_id, from_seq)); it->Valid(); it->Next()) {
    auto parsed = parse_event_key(it->key().ToStringView());
    if (!parsed || parsed->first != job_id)
      return make_error(errc::corrupt_record,
                        "malformed event key for job " + job_id);
    if (auto err = f(parsed->second, it->value().ToStringView()))
      return err;
  }
  if (!it->status().ok())
    return io_error("cannot read events of " + job_id, it->status());
  return caf::none;
}

caf::expected<std::vector<stored_event>>
event_log::read(const std::string& job_id, uint64_t from_seq,
                size_t max) const {
  std::vector<stored_event> result;
  if (max == 0)
    return result;
  // Stop early by returning a sentinel error once `max` are collected.
  auto done = make_error(errc::overloaded, "enough");
  auto err = for_each(job_id, from_seq,
                      [&](uint64_t seq, std::string_view bytes) -> caf::error {
                        result.push_back({seq, std::string{bytes}});
                        if (result.size() >= max)
                          return done;
                        return caf::none;
                      });
  if (err && err != done)
    return err;
  return result;
}

caf::expected<std::vector<global_entry>>
event_log::tail(uint64_t from_position, size_t max) const {
  std::vector<global_entry> result;
  rocksdb::ReadOptions ro;
  // One snapshot, so the index and the events agree.
  const auto* snap = impl_->db->GetSnapshot();
  ro.snapshot = snap;
  std::unique_ptr<rocksdb::Iterator> it{
    impl_->db->NewIterator(ro, impl_->h(cf_global))};
  caf::error err;
  for (it->Seek(be64(from_position)); it->Valid() && result.size() < max;
       it->Next()) {
    auto key = it->value().ToString();
    auto parsed = parse_event_key(key);
    if (it->key().size() != 8 || !parsed) {
      err = make_error(errc::corrupt_record, "malformed global index entry");
      break;
    }
    std::string bytes;
    auto st = impl_->db->Get(ro, impl_->h(cf_events), key, &bytes);
    if (!st.ok()) {
      err = io_error("global index points at a missing event", st);
      break;
    }
    result.push_back({get_be64(it->key().ToStringView()),
                      std::string{parsed->first}, parsed->second,
                      std::move(bytes)});
  }
  if (!err && !it->status().ok())
    err = io_error("cannot read the global order", it->status());
  it.reset();
  impl_->db->ReleaseSnapshot(snap);
  if (err)
    return err;
  return result;
}

caf::expected<std::optional<snapshot_record>>
event_log::snapshot(const std::string& job_id) const {
  auto value = impl_->get(cf_snapshots, job_id);
  if (!value)
    return value.error();
  if (!*value)
    return std::optional<snapshot_record>{};
  if ((*value)->size() < 8)
    return make_error(errc::corrupt_record, "malformed snapshot of " + job_id);
  return std::optional<snapshot_record>{
    snapshot_record{job_id, get_be64(**value), (*value)->substr(8)}};
}

caf::expected<event_log::fleet_stream>
event_log::read_fleet(const std::string& name) const {
  fleet_stream result;
  if (impl_->h(cf_fleet) == nullptr)
    return result;
  auto value = impl_->get(cf_fleet, fleet_snapshot_key(name));
  if (!value)
    return value.error();
  uint64_t from = 0;
  if (*value) {
    if ((*value)->size() < 8)
      return make_error(errc::corrupt_record,
                        "malformed snapshot of fleet stream " + name);
    from = get_be64(**value);
    result.snapshot = snapshot_record{name, from, (*value)->substr(8)};
  }
  auto upper = "e" + job_upper_bound(name);
  rocksdb::Slice upper_slice{upper};
  auto it = impl_->iterate_below(cf_fleet, &upper_slice);
  for (it->Seek(fleet_event_key(name, from + 1)); it->Valid(); it->Next()) {
    auto parsed = parse_event_key(it->key().ToStringView().substr(1));
    if (!parsed || parsed->first != name)
      return make_error(errc::corrupt_record,
                        "malformed key in fleet stream " + name);
    result.events.push_back({parsed->second, it->value().ToString()});
  }
  if (!it->status().ok())
    return io_error("cannot read fleet stream " + name, it->status());
  return result;
}

caf::expected<size_t>
event_log::put_cached(const std::vector<digest_record>& xs, bool histories) {
  std::string what = histories ? "histories" : "digests";
  if (impl_->opts.read_only)
    return make_error(errc::storage_failure,
                      "the log is open read-only: " + what
                        + " cannot be stored");
  std::unique_ptr<rocksdb::Iterator> it{
    impl_->db->NewIterator(rocksdb::ReadOptions{}, impl_->h(cf_events))};
  rocksdb::WriteBatch batch;
  size_t stored = 0;
  for (const auto& x : xs) {
    auto last = last_event(*it, x.job_id);
    if (!last)
      return last.error();
    if (last->first == 0 || last->first != x.seq)
      continue;
    auto value = seq_prefixed(x.seq, be64(last->second));
    value.append(x.bytes);
    batch.Put(impl_->h(cf_digests),
              histories ? history_key(x.job_id) : x.job_id, value);
    ++stored;
  }
  if (stored == 0)
    return stored;
  if (auto err
      = check_space(impl_->opts.path, impl_->opts.min_free_bytes,
                    batch.GetDataSize(), ("cannot store " + what).c_str()))
    return err;
  // A stored fold is a cache: it need not be durable before the next
  // synced write carries it to disk (and a lost one costs a fold), so it
  // does not hold the journal for an fsync.
  auto opts = impl_->write_opts;
  if (histories)
    opts.sync = false;
  if (auto st = impl_->db->Write(opts, &batch); !st.ok())
    return io_error("cannot store " + what, st);
  return stored;
}

caf::expected<size_t>
event_log::put_digests(const std::vector<digest_record>& xs) {
  return put_cached(xs, false);
}

caf::expected<size_t>
event_log::put_histories(const std::vector<digest_record>& xs) {
  return put_cached(xs, true);
}

caf::expected<std::vector<std::string>> event_log::job_ids() const {
  std::vector<std::string> result;
  std::unique_ptr<rocksdb::Iterator> it{
    impl_->db->NewIterator(rocksdb::ReadOptions{}, impl_->h(cf_events))};
  // Skip scan: one seek per job.
  for (it->SeekToFirst(); it->Valid();) {
    auto parsed = parse_event_key(it->key().ToStringView());
    if (!parsed)
      return make_error(errc::corrupt_record, "malformed event key");
    result.emplace_back(parsed->first);
    it->Seek(job_upper_bound(result.back()));
  }
  if (!it->status().ok())
    return io_error("cannot list jobs", it->status());
  return result;
}

caf::expected<uint64_t> event_log::last_seq(const std::string& job_id) const {
  std::unique_ptr<rocksdb::Iterator> it{
    impl_->db->NewIterator(rocksdb::ReadOptions{}, impl_->h(cf_events))};
  auto last = last_event(*it, job_id);
  if (!last)
    return last.error();
  return last->first;
}

caf::expected<uint64_t> event_log::first_seq(const std::string& job_id)
  const {
  std::unique_ptr<rocksdb::Iterator> it{
    impl_->db->NewIterator(rocksdb::ReadOptions{}, impl_->h(cf_events))};
  it->Seek(event_key(job_id, 0));
  if (!it->status().ok())
    return io_error("cannot read events of " + job_id, it->status());
  if (!it->Valid())
    return uint64_t{0};
  auto parsed = parse_event_key(it->key().ToStringView());
  if (!parsed || parsed->first != job_id)
    return uint64_t{0};
  return parsed->second;
}

caf::expected<std::optional<snapshot_record>>
event_log::base(const std::string& job_id) const {
  auto value = impl_->get(cf_bases, job_id);
  if (!value)
    return value.error();
  if (!*value)
    return std::optional<snapshot_record>{};
  if ((*value)->size() < 8)
    return make_error(errc::corrupt_record,
                      "malformed base state of " + job_id);
  return std::optional<snapshot_record>{
    snapshot_record{job_id, get_be64(**value), (*value)->substr(8)}};
}

caf::expected<std::vector<incident_record>>
event_log::incidents(const std::string& job_id) const {
  std::vector<incident_record> result;
  if (impl_->h(cf_incidents) == nullptr)
    return result;
  auto upper = job_upper_bound(job_id);
  rocksdb::Slice upper_slice{upper};
  auto it = impl_->iterate_below(cf_incidents, &upper_slice);
  for (it->Seek(event_key(job_id, 0)); it->Valid(); it->Next()) {
    auto parsed = parse_event_key(it->key().ToStringView());
    if (!parsed || parsed->first != job_id)
      return make_error(errc::corrupt_record,
                        "malformed incident key for job " + job_id);
    result.push_back({job_id, parsed->second, it->value().ToString()});
  }
  if (!it->status().ok())
    return io_error("cannot read the incidents of " + job_id, it->status());
  return result;
}

uint64_t event_log::last_position() const {
  return impl_->last_position;
}

uint64_t event_log::incarnation() const {
  return impl_->incarnation;
}

const std::string& event_log::path() const {
  return impl_->opts.path;
}

log_memory event_log::memory() const {
  using props = rocksdb::DB::Properties;
  log_memory result;
  result.block_cache = impl_->block_cache->GetUsage();
  result.block_cache_capacity = impl_->block_cache->GetCapacity();
  auto& db = *impl_->db;
  for (auto* h : impl_->handles) {
    if (h == nullptr) // an optional family a read-only open left out
      continue;
    uint64_t x = 0;
    if (db.GetIntProperty(h, props::kEstimateTableReadersMem, &x))
      result.table_readers += x;
    if (db.GetIntProperty(h, props::kCurSizeAllMemTables, &x))
      result.memtables += x;
    if (db.GetIntProperty(h, props::kBlockCacheCapacity, &x))
      result.family_caches.push_back(x);
  }
  return result;
}

caf::expected<bool> event_log::discard(const std::string& job_id,
                                       uint64_t seq) {
  if (impl_->opts.read_only)
    return make_error(errc::storage_failure, "event log is open read-only");
  auto key = event_key(job_id, seq);
  rocksdb::WriteBatch batch;
  batch.Delete(impl_->h(cf_events), key);
  // The next event takes the discarded one's seq: no digest may match it.
  batch.Delete(impl_->h(cf_digests), job_id);
  batch.Delete(impl_->h(cf_digests), history_key(job_id));
  // A torn record is among the newest: search the order from its end.
  bool found = false;
  {
    std::unique_ptr<rocksdb::Iterator> it{
      impl_->db->NewIterator(rocksdb::ReadOptions{}, impl_->h(cf_global))};
    for (it->SeekToLast(); it->Valid(); it->Prev()) {
      if (it->value() == rocksdb::Slice{key}) {
        batch.Delete(impl_->h(cf_global), it->key());
        found = true;
        break;
      }
    }
    if (!it->status().ok())
      return io_error("cannot read the global order", it->status());
  }
  batch.Put(impl_->h(cf_meta), position_floor_key, be64(impl_->last_position));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (auto err = check_space(impl_->opts.path, impl_->opts.min_free_bytes, 0,
                             "discard refused"))
    return err;
  if (auto st = impl_->db->Write(wo, &batch); !st.ok())
    return io_error("cannot discard event " + std::to_string(seq) + " of "
                      + job_id,
                    st);
  return found;
}

struct event_log::reader::impl {
  std::unique_ptr<rocksdb::Iterator> events;
  std::unique_ptr<rocksdb::Iterator> snapshots;
  /// Null on a read-only log without digests.
  std::unique_ptr<rocksdb::Iterator> digests;
  // Bases are read rarely (a past point of a purged job): on demand.
  const event_log* log = nullptr;
};

event_log::reader::reader(const event_log& log)
  : impl_(std::make_unique<impl>()) {
  rocksdb::ReadOptions ro;
  impl_->events.reset(log.impl_->db->NewIterator(ro, log.impl_->h(cf_events)));
  impl_->snapshots.reset(
    log.impl_->db->NewIterator(ro, log.impl_->h(cf_snapshots)));
  if (log.impl_->h(cf_digests) != nullptr)
    impl_->digests.reset(
      log.impl_->db->NewIterator(ro, log.impl_->h(cf_digests)));
  impl_->log = &log;
}

caf::expected<std::optional<snapshot_record>>
event_log::reader::base(const std::string& job_id) {
  return impl_->log->base(job_id);
}

event_log::reader::~reader() = default;

caf::expected<std::optional<snapshot_record>>
event_log::reader::snapshot(const std::string& job_id) {
  auto found = seek_exact(*impl_->snapshots, job_id, "snapshot");
  if (!found)
    return found.error();
  if (!*found)
    return std::optional<snapshot_record>{};
  auto value = **found;
  if (value.size() < 8)
    return make_error(errc::corrupt_record, "malformed snapshot of " + job_id);
  return std::optional<snapshot_record>{
    snapshot_record{job_id, get_be64(value), std::string{value.substr(8)}}};
}

caf::expected<std::optional<std::string>>
event_log::reader::digest(const std::string& job_id) {
  using result = std::optional<std::string>;
  if (!impl_->digests)
    return result{};
  auto found = seek_exact(*impl_->digests, job_id, "digest");
  if (!found)
    return found.error();
  // A digest is a cache: a malformed one is as good as none.
  if (!*found || (*found)->size() < 16)
    return result{};
  auto value = **found;
  auto last = last_event(*impl_->events, job_id);
  if (!last)
    return last.error();
  if (last->first == 0 || last->first != get_be64(value)
      || last->second != get_be64(value, 8))
    return result{};
  return result{std::string{value.substr(16)}};
}

caf::expected<std::optional<snapshot_record>>
event_log::reader::history(const std::string& job_id) {
  using result = std::optional<snapshot_record>;
  if (!impl_->digests)
    return result{};
  auto found = seek_exact(*impl_->digests, history_key(job_id), "history");
  if (!found)
    return found.error();
  // A stored history is a cache: a malformed one is as good as none.
  if (!*found || (*found)->size() < 16)
    return result{};
  auto value = **found;
  auto seq = get_be64(value);
  auto event = seek_exact(*impl_->events, event_key(job_id, seq), "event");
  if (!event)
    return event.error();
  if (!*event || record_hash(**event) != get_be64(value, 8))
    return result{};
  return result{snapshot_record{job_id, seq, std::string{value.substr(16)}}};
}

caf::error event_log::reader::for_each(
  const std::string& job_id, uint64_t from_seq,
  const std::function<caf::error(uint64_t, std::string_view)>& f) {
  auto& it = *impl_->events;
  // No upper bound (it would need a new iterator): stop at the first key
  // that is not this job's.
  auto prefix = event_key(job_id, 0).substr(0, job_id.size() + 1);
  for (it.Seek(event_key(job_id, from_seq));
       it.Valid() && it.key().starts_with(prefix); it.Next()) {
    auto parsed = parse_event_key(it.key().ToStringView());
    if (!parsed || parsed->first != job_id)
      return make_error(errc::corrupt_record,
                        "malformed event key for job " + job_id);
    if (auto err = f(parsed->second, it.value().ToStringView()))
      return err;
  }
  if (!it.status().ok())
    return io_error("cannot read events of " + job_id, it.status());
  return caf::none;
}

caf::error event_log::resume() {
  {
    std::lock_guard<std::mutex> guard{impl_->fault_mtx};
    if (!impl_->injected_failure.empty())
      return make_error(errc::storage_failure,
                        "resume failed: IO error: " + impl_->injected_failure);
  }
  if (auto err = check_space(impl_->opts.path, impl_->opts.min_free_bytes, 0,
                             "cannot resume writing"))
    return err;
  // Resume() answers OK when there is no error to leave.
  if (auto st = impl_->db->Resume(); !st.ok())
    return io_error("cannot resume writing", st);
  return caf::none;
}

void event_log::inject_write_failure(std::string reason) {
  std::lock_guard<std::mutex> guard{impl_->fault_mtx};
  impl_->injected_failure = std::move(reason);
}

} // namespace recoverd::storage
