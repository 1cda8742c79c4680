#include "storage/etcd_log.hpp"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "actors/error.hpp"

namespace recoverd::storage::etcd {

namespace {

/// Encoded-size overhead of one operation beyond its key and value (tags,
/// lengths, the lease field), rounded up.
constexpr size_t op_overhead = 32;

/// Room for the transaction's envelope and the fencing compare.
constexpr size_t txn_overhead = 1024;

std::string seq_text(uint64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64, seq);
  return buf;
}

std::string encode_meta(const job_meta& x) {
  return std::to_string(x.last_seq) + " " + std::to_string(x.epoch);
}

std::optional<job_meta> decode_meta(const std::string& text) {
  job_meta result;
  unsigned long long seq = 0;
  long long epoch = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%llu %lld%c", &seq, &epoch, &extra) != 2)
    return std::nullopt;
  result.last_seq = seq;
  result.epoch = epoch;
  return result;
}

/// Parses the 20 digits after `prefix` in `key`.
std::optional<uint64_t> parse_seq(const std::string& key,
                                  const std::string& prefix) {
  if (key.size() != prefix.size() + 20 || key.compare(0, prefix.size(), prefix))
    return std::nullopt;
  uint64_t seq = 0;
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    if (key[i] < '0' || key[i] > '9')
      return std::nullopt;
    seq = seq * 10 + static_cast<uint64_t>(key[i] - '0');
  }
  return seq;
}

} // namespace

// -- layout -------------------------------------------------------------------

caf::error validate_cluster(const std::string& cluster) {
  auto ok = !cluster.empty() && cluster.size() <= 64;
  for (auto c : cluster)
    ok = ok
         && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
             || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok)
    return make_error(errc::invalid_argument,
                      "etcd: cluster name '" + cluster
                        + "' is not 1 to 64 of [A-Za-z0-9._-]");
  return {};
}

layout::layout(std::string cluster) : root_("/recoverd/" + cluster + "/") {
  // nop
}

std::string layout::leader_key() const {
  return root_ + "leader";
}

std::string layout::job_prefix(const std::string& job_id) const {
  return root_ + "log/" + encode_job(job_id) + "/";
}

std::string layout::event_key(const std::string& job_id, uint64_t seq) const {
  return job_prefix(job_id) + seq_text(seq);
}

std::string layout::meta_key(const std::string& job_id) const {
  return root_ + "meta/" + encode_job(job_id);
}

std::string layout::encode_job(const std::string& job_id) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(job_id.size());
  for (auto c : job_id) {
    auto u = static_cast<unsigned char>(c);
    if (u == '%' || u == '/' || u <= 0x20 || u >= 0x7f) {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// -- etcd_log -----------------------------------------------------------------

etcd_log::etcd_log(std::shared_ptr<client> c, leader_election& election,
                   layout keys, txn_limits limits)
  : client_(std::move(c)), election_(election), keys_(std::move(keys)),
    limits_(limits) {
  // nop
}

caf::expected<std::vector<txn>>
etcd_log::plan(const std::vector<log_record>& batch, int64_t epoch) const {
  // Each job's share of the batch, jobs in order of first appearance.
  std::vector<std::vector<const log_record*>> shares;
  std::unordered_map<std::string, size_t> index;
  for (const auto& x : batch) {
    if (x.job_id.empty() || x.seq == 0)
      return make_error(errc::invalid_argument,
                        "etcd append: an event needs a job id and a seq");
    auto [i, added] = index.emplace(x.job_id, shares.size());
    if (added)
      shares.emplace_back();
    auto& share = shares[i->second];
    if (!share.empty() && share.back()->seq >= x.seq)
      return make_error(errc::invalid_argument,
                        "etcd append: seqs of job '" + x.job_id
                          + "' do not increase in the batch");
    share.push_back(&x);
  }
  std::vector<txn> result;
  txn current;
  size_t ops = 0;
  size_t bytes = txn_overhead;
  auto flush = [&] {
    if (ops == 0)
      return;
    result.push_back(std::move(current));
    current = txn{};
    ops = 0;
    bytes = txn_overhead;
  };
  auto cost = [&](const log_record& x) {
    return op_overhead + keys_.event_key(x.job_id, x.seq).size()
           + x.bytes.size();
  };
  for (const auto& share : shares) {
    const auto& job = share.front()->job_id;
    // A part's meta put and the compare on its first event.
    auto meta_cost = 2 * op_overhead + keys_.meta_key(job).size() + 48
                     + keys_.job_prefix(job).size() + 20;
    size_t share_bytes = meta_cost;
    for (const auto* x : share)
      share_bytes += cost(*x);
    // The whole share goes into one transaction whenever it fits in one;
    // it starts a new one rather than straddle two.
    if (ops + share.size() + 1 > limits_.max_ops
        || bytes + share_bytes > limits_.max_bytes)
      flush();
    size_t i = 0;
    while (i < share.size()) {
      // As many of the share's events as fit, then its meta.
      size_t first = i;
      while (i < share.size()) {
        auto c = cost(*share[i]);
        if (ops + 2 > limits_.max_ops
            || bytes + c + meta_cost > limits_.max_bytes)
          break;
        current.then_put(keys_.event_key(job, share[i]->seq), share[i]->bytes);
        ++ops;
        bytes += c;
        ++i;
      }
      if (i == first) {
        if (ops == 0)
          return make_error(errc::invalid_argument,
                            "etcd append: event " + std::to_string(share[i]->seq)
                              + " of job '" + job + "' is larger than a "
                              + "transaction may be");
        flush();
        continue;
      }
      // Applied once only: a transaction retried after a member went away
      // with it may have been applied already; then this compare fails
      // rather than put the events again (at new revisions, so that a
      // watch would see them twice).
      current.if_create_revision(keys_.event_key(job, share[first]->seq),
                                 compare_result::equal, 0);
      current.then_put(keys_.meta_key(job),
                       encode_meta({share[i - 1]->seq, epoch}));
      ++ops;
      bytes += meta_cost;
      if (i < share.size())
        flush();
    }
  }
  flush();
  return result;
}

caf::expected<append_result>
etcd_log::append(const std::vector<log_record>& batch) {
  auto epoch = election_.epoch();
  if (epoch == 0)
    return make_error(errc::deposed, "deposed: not the leader");
  auto txns = plan(batch, epoch);
  if (!txns)
    return txns.error();
  append_result result;
  for (auto& t : *txns) {
    // The first event of each job's part, and its bytes, for telling an
    // earlier application of the same transaction from a conflict.
    std::vector<std::pair<std::string, std::string>> firsts;
    for (const auto& c : t.compares())
      for (const auto& op : t.success())
        if (op.key == c.key) {
          firsts.emplace_back(op.key, op.value);
          break;
        }
    auto done = election_.fenced(std::move(t));
    if (!done)
      return done.error();
    if (!done->succeeded)
      for (const auto& [key, value] : firsts) {
        auto stored = client_->get(key);
        if (!stored)
          return stored.error();
        if (!*stored || (*stored)->value != value)
          return make_error(errc::conflict,
                            "etcd append: " + key
                              + " is already stored with other bytes");
      }
    result.txns += 1;
    result.revision = done->revision;
  }
  return result;
}

caf::expected<std::vector<stored_event>>
etcd_log::read(const std::string& job_id, uint64_t from_seq,
               size_t max) const {
  auto prefix = keys_.job_prefix(job_id);
  auto r = client_->range({keys_.event_key(job_id, from_seq),
                           prefix_end(prefix)},
                          static_cast<int64_t>(max));
  if (!r)
    return r.error();
  std::vector<stored_event> result;
  result.reserve(r->kvs.size());
  for (auto& kv : r->kvs) {
    auto seq = parse_seq(kv.key, prefix);
    if (!seq)
      return make_error(errc::corrupt_record,
                        "etcd: unexpected key " + kv.key + " in the log of "
                          + job_id);
    result.push_back({*seq, std::move(kv.value)});
  }
  return result;
}

caf::expected<std::optional<job_meta>>
etcd_log::meta(const std::string& job_id) const {
  auto kv = client_->get(keys_.meta_key(job_id));
  if (!kv)
    return kv.error();
  if (!*kv)
    return std::optional<job_meta>{};
  auto x = decode_meta((*kv)->value);
  if (!x)
    return make_error(errc::corrupt_record,
                      "etcd: meta key of " + job_id + " holds '"
                        + (*kv)->value + "'");
  return std::optional<job_meta>{*x};
}

// -- group_committer ----------------------------------------------------------

group_committer::group_committer(etcd_log& log, size_t max_batch)
  : log_(log), max_batch_(max_batch) {
  thread_ = std::thread([this] { run(); });
}

group_committer::~group_committer() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
  for (auto& p : queue_)
    p.done.set_value(
      make_error(errc::shutting_down, "etcd append: committer stopped"));
}

std::future<caf::error>
group_committer::submit(std::vector<log_record> records) {
  pending p;
  p.records = std::move(records);
  auto result = p.done.get_future();
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_) {
    p.done.set_value(
      make_error(errc::shutting_down, "etcd append: committer stopped"));
    return result;
  }
  queue_.push_back(std::move(p));
  cv_.notify_one();
  return result;
}

uint64_t group_committer::batches() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return batches_;
}

void group_committer::run() {
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    // Everything that arrived while the last append was in flight.
    std::vector<pending> group;
    std::vector<log_record> batch;
    while (!queue_.empty()
           && (batch.empty()
               || batch.size() + queue_.front().records.size()
                    <= max_batch_)) {
      auto& p = queue_.front();
      batch.insert(batch.end(), p.records.begin(), p.records.end());
      group.push_back(std::move(p));
      queue_.pop_front();
    }
    lock.unlock();
    auto done = log_.append(batch);
    caf::error err = done ? caf::error{} : done.error();
    for (auto& p : group)
      p.done.set_value(err);
    lock.lock();
    ++batches_;
  }
}

} // namespace recoverd::storage::etcd
