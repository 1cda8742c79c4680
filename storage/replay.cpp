#include "storage/replay.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "actors/error.hpp"
#include "storage/event_codec.hpp"
#include "storage/job_runs.hpp"

namespace recoverd::storage {

namespace {

// With `head`, snapshots are decoded without their spec's details (see
// `decode_snapshot_head`), the spec's size going to `*head` until an event
// brings a whole spec or deletes the job (then it is reset): the fold is
// good for the job's digest only.
caf::expected<replayed_job>
replay_with(event_log::reader& log, const std::string& job_id,
            uint64_t up_to_seq, std::optional<spec_size>* head = nullptr) {
  replayed_job result;
  result.state.spec.job_id = job_id;
  auto decode = [&](std::string_view bytes) {
    if (head == nullptr)
      return decode_snapshot(bytes);
    spec_size size;
    auto state = decode_snapshot_head(bytes, size);
    if (state)
      *head = size;
    return state;
  };
  auto snap = log.snapshot(job_id);
  if (!snap)
    return snap.error();
  if (*snap && (*snap)->seq <= up_to_seq) {
    auto state = decode((*snap)->bytes);
    if (!state)
      return state.error();
    result.state = std::move(*state);
    result.state.spec.job_id = job_id;
    result.from_snapshot = true;
    result.tail.snapshot_bytes = (*snap)->bytes.size();
  } else if (*snap) {
    // A past point before the latest snapshot: once the retention removed
    // the job's oldest events, the fold starts at the state it kept of them.
    auto base = log.base(job_id);
    if (!base)
      return base.error();
    if (*base && (*base)->seq <= up_to_seq) {
      auto state = decode((*base)->bytes);
      if (!state)
        return state.error();
      result.state = std::move(*state);
      result.state.spec.job_id = job_id;
    }
  }
  // An undecodable record is held back until the next one shows that it
  // was not the last: only a job's last record can be a torn write, damage
  // anywhere else is corruption and must not be skipped.
  std::optional<discarded_event> bad;
  auto corrupt = [&] {
    return make_error(errc::corrupt_record,
                      "job " + job_id + " event " + std::to_string(bad->seq)
                        + " cannot be decoded and is not the job's last: "
                        + bad->reason);
  };
  auto done = make_error(errc::overloaded, "done");
  auto err = log.for_each(
    job_id, result.state.seq + 1,
    [&](uint64_t seq, std::string_view bytes) -> caf::error {
      if (bad)
        return corrupt();
      if (seq > up_to_seq && seq != result.state.seq + 1
          && result.state.seq < up_to_seq)
        return make_error(errc::history_purged,
                          "job " + job_id + ": the state at seq "
                            + std::to_string(up_to_seq)
                            + " cannot be rebuilt, the retention removed "
                              "its events; the first kept event is seq "
                            + std::to_string(seq));
      if (seq > up_to_seq)
        return done;
      auto ev = decode_event(bytes);
      if (!ev) {
        bad = discarded_event{job_id, seq, bytes.size(),
                              message_of(ev.error())};
        return caf::none;
      }
      if (ev->seq != seq || seq != result.state.seq + 1)
        return make_error(errc::corrupt_record,
                          "job " + job_id + " event " + std::to_string(seq)
                            + " is out of sequence after "
                            + std::to_string(result.state.seq));
      if (head != nullptr
          && (std::holds_alternative<job_put>(ev->body)
              || std::holds_alternative<job_deleted>(ev->body)))
        head->reset();
      apply_to(result.state, std::move(*ev));
      ++result.events_replayed;
      result.tail.bytes += bytes.size();
      return caf::none;
    });
  if (err && err != done)
    return err;
  result.discarded = std::move(bad);
  result.tail.events = result.events_replayed;
  return result;
}

// The digest of `job_id` if it still describes the job. A digest that does
// not decode is left aside (the job is replayed instead): it is a cache.
caf::expected<std::optional<job_digest>>
dormant_digest(event_log::reader& log, const std::string& job_id) {
  auto bytes = log.digest(job_id);
  if (!bytes)
    return bytes.error();
  if (!*bytes)
    return std::optional<job_digest>{};
  auto digest = decode_digest(**bytes);
  if (!digest || digest->summary.job_id != job_id)
    return std::optional<job_digest>{};
  return std::optional<job_digest>{std::move(*digest)};
}

} // namespace

caf::expected<replayed_job> replay_job(const event_log& log,
                                       const std::string& job_id,
                                       uint64_t up_to_seq) {
  event_log::reader reader{log};
  return replay_with(reader, job_id, up_to_seq);
}

caf::expected<replay_result> replay_all(const event_log& log,
                                        size_t threads, bool use_digests) {
  replay_result result;
  auto ids = log.job_ids();
  if (!ids)
    return ids.error();
  // Jobs replay independently (apply is pure, reads are thread-safe): spread
  // them over threads, in runs of neighbouring ids that share table blocks.
  constexpr size_t run = 32;
  auto n = ids->size();
  if (threads == 0)
    threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  threads = std::min(threads, (n + run - 1) / run);
  std::vector<replayed_job> jobs(n);
  std::vector<std::optional<job_digest>> dormant(n);
  std::vector<std::optional<digest_record>> fresh(n);
  auto err = for_each_job(
    log, n, threads, run,
    [&](event_log::reader& reader, size_t i) -> caf::error {
      if (use_digests) {
        auto digest = dormant_digest(reader, (*ids)[i]);
        if (!digest)
          return std::move(digest.error());
        if (*digest) {
          dormant[i] = std::move(*digest);
          return caf::none;
        }
        // No current digest (after a crash): a fold good for the digest
        // only, when the job may stay dormant.
        std::optional<spec_size> head;
        auto light = replay_with(reader, (*ids)[i], UINT64_MAX, &head);
        if (!light)
          return std::move(light.error());
        if (auto computed = to_digest(light->state)) {
          if (head) {
            computed->summary.pods = head->pods;
            computed->summary.ranks = head->ranks;
          }
          fresh[i] = digest_record{(*ids)[i], light->state.seq,
                                   encode_digest(*computed)};
          dormant[i] = std::move(*computed);
          // What the fold found, not the state it made (digest only).
          jobs[i].events_replayed = light->events_replayed;
          jobs[i].from_snapshot = light->from_snapshot;
          jobs[i].discarded = std::move(light->discarded);
          return caf::none;
        }
        if (!light->state.exists) { // deleted: its end is all it takes
          jobs[i] = std::move(*light);
          return caf::none;
        }
      }
      auto job = replay_with(reader, (*ids)[i], UINT64_MAX);
      if (!job)
        return std::move(job.error());
      jobs[i] = std::move(*job);
      return caf::none;
    });
  if (err)
    return err;
  for (size_t i = 0; i < n; ++i) {
    auto& job = jobs[i];
    result.events_replayed += job.events_replayed;
    if (job.from_snapshot)
      ++result.from_snapshot;
    if (job.discarded)
      result.discarded.push_back(std::move(*job.discarded));
    if (dormant[i]) {
      result.dormant.push_back(std::move(*dormant[i]));
      if (fresh[i])
        result.fresh_digests.push_back(std::move(*fresh[i]));
      continue;
    }
    if (job.state.exists)
      result.live.push_back(std::move(job));
    else if (job.state.seq > 0)
      result.deleted.push_back(
        {(*ids)[i], job.state.seq, job.state.updated_at_ms});
    // else: the job's only record was torn; it never existed.
  }
  return result;
}

} // namespace recoverd::storage
