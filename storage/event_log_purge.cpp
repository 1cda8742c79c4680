// The retention's purges of the event log: plan, scan the global order in
// steps, commit in one batch.

#include <algorithm>

#include <rocksdb/write_batch.h>

#include "actors/error.hpp"
#include "storage/encoding.hpp"
#include "storage/event_log_impl.hpp"

namespace recoverd::storage {

using namespace log_detail;

purge_plan event_log::plan_purge(std::vector<purge_target> targets,
                                 std::vector<snapshot_record> bases,
                                 std::vector<incident_record> incidents) const {
  purge_plan plan;
  std::sort(targets.begin(), targets.end(),
            [](const auto& x, const auto& y) { return x.job_id < y.job_id; });
  plan.targets = std::move(targets);
  plan.bases = std::move(bases);
  plan.incidents = std::move(incidents);
  plan.end_position = impl_->last_position;
  return plan;
}

caf::error event_log::scan_purge(purge_plan& plan, size_t max) const {
  if (plan.scanned() || plan.targets.empty()) {
    plan.next_position = plan.end_position + 1;
    return caf::none;
  }
  auto upper = be64(plan.end_position + 1);
  rocksdb::Slice upper_slice{upper};
  // A one-off pass over old data: kept out of the block cache.
  auto it = impl_->iterate_below(cf_global, &upper_slice, false);
  auto by_id = [](const purge_target& x, std::string_view id) {
    return x.job_id < id;
  };
  size_t examined = 0;
  for (it->Seek(be64(plan.next_position)); it->Valid() && examined < max;
       it->Next(), ++examined) {
    auto parsed = parse_event_key(it->key().size() == 8
                                    ? it->value().ToStringView()
                                    : std::string_view{});
    if (!parsed)
      return make_error(errc::corrupt_record, "malformed global index entry");
    auto position = get_be64(it->key().ToStringView());
    plan.next_position = position + 1;
    auto t = std::lower_bound(plan.targets.begin(), plan.targets.end(),
                              parsed->first, by_id);
    if (t != plan.targets.end() && t->job_id == parsed->first
        && parsed->second <= t->up_to_seq)
      plan.positions.push_back(position);
  }
  if (!it->status().ok())
    return io_error("cannot read the global order", it->status());
  if (!it->Valid() && examined < max)
    plan.next_position = plan.end_position + 1;
  return caf::none;
}

caf::expected<purge_stats> event_log::commit_purge(const purge_plan& plan) {
  if (impl_->opts.read_only)
    return make_error(errc::storage_failure, "event log is open read-only");
  if (!plan.scanned())
    return make_error(errc::invalid_argument, "purge plan not fully scanned");
  purge_stats stats;
  rocksdb::WriteBatch batch;
  // Deletes the keys of `family` from `job_id`'s seq 0 up to and including
  // `up_to_seq`; returns how many.
  auto delete_range = [&](cf family, const purge_target& t)
    -> caf::expected<uint64_t> {
    if (impl_->h(family) == nullptr)
      return uint64_t{0};
    auto upper = event_key(t.job_id, t.up_to_seq + 1);
    rocksdb::Slice upper_slice{upper};
    auto it = impl_->iterate_below(family, &upper_slice, false);
    uint64_t n = 0;
    for (it->Seek(event_key(t.job_id, 0)); it->Valid(); it->Next()) {
      batch.Delete(impl_->h(family), it->key());
      ++n;
    }
    if (!it->status().ok())
      return io_error("cannot read the history of " + t.job_id, it->status());
    return n;
  };
  for (const auto& t : plan.targets) {
    if (t.live) {
      // The latest snapshot and everything after it stay: replay starts
      // there. `plan_live_cut` chose `up_to_seq` below it.
      auto snap = snapshot(t.job_id);
      if (!snap)
        return snap.error();
      if (!*snap || (*snap)->seq <= t.up_to_seq)
        return make_error(errc::invalid_argument,
                          "live purge of " + t.job_id
                            + " would remove events its latest snapshot "
                              "does not cover");
      auto n = delete_range(cf_events, t);
      if (!n)
        return n.error();
      stats.live_events += *n;
      if (*n > 0)
        ++stats.live_jobs;
      continue;
    }
    auto n = delete_range(cf_events, t);
    if (!n)
      return n.error();
    stats.events += *n;
    bool any = *n > 0;
    // A job re-created since its deletion keeps a newer snapshot, and the
    // incidents and base state of its new life.
    auto snap = snapshot(t.job_id);
    if (!snap)
      return snap.error();
    // A job created again after the purge starts at seq 1: no digest of
    // its old life may match it.
    batch.Delete(impl_->h(cf_digests), t.job_id);
    batch.Delete(impl_->h(cf_digests), history_key(t.job_id));
    if (*snap && (*snap)->seq <= t.up_to_seq) {
      batch.Delete(impl_->h(cf_snapshots), t.job_id);
      ++stats.snapshots;
      any = true;
    }
    auto kept = delete_range(cf_incidents, t);
    if (!kept)
      return kept.error();
    auto b = base(t.job_id);
    if (!b)
      return b.error();
    if (*b && (*b)->seq <= t.up_to_seq)
      batch.Delete(impl_->h(cf_bases), t.job_id);
    if (any)
      ++stats.jobs;
  }
  // What the live jobs keep of the removed events, in the same batch: no
  // reader ever sees the events gone but their incidents not yet stored.
  for (const auto& x : plan.bases)
    batch.Put(impl_->h(cf_bases), x.job_id, seq_prefixed(x.seq, x.bytes));
  for (const auto& x : plan.incidents)
    batch.Put(impl_->h(cf_incidents), event_key(x.job_id, x.first_seq),
              x.bytes);
  stats.incidents = plan.incidents.size();
  for (auto position : plan.positions)
    batch.Delete(impl_->h(cf_global), be64(position));
  stats.index_entries = plan.positions.size();
  batch.Put(impl_->h(cf_meta), position_floor_key, be64(impl_->last_position));
  // Deletes need room too: tombstones go to the WAL first.
  if (auto err = check_space(impl_->opts.path, impl_->opts.min_free_bytes, 0,
                             "purge refused"))
    return err;
  if (auto st = impl_->db->Write(impl_->write_opts, &batch); !st.ok())
    return io_error("purge failed", st);
  return stats;
}

} // namespace recoverd::storage
