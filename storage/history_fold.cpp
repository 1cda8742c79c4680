#include "storage/history_fold.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include "actors/error.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/incident_codec.hpp"
#include "storage/job_runs.hpp"
#include "storage/retention.hpp"

namespace recoverd::storage {

caf::error seed_history(const event_log& log, const std::string& job_id,
                        uint64_t first_seq, job_history& h) {
  auto base = log.base(job_id);
  if (!base)
    return base.error();
  if (!*base || (*base)->seq + 1 != first_seq)
    return caf::none;
  auto state = decode_snapshot((*base)->bytes);
  if (!state)
    return state.error();
  auto seq = (*base)->seq;
  auto time = state->updated_at_ms;
  // Created when it was, with its topology: the goodput's observed time
  // and the attribution of the next faults need them.
  if (state->exists)
    h.add(event{seq, state->created_at_ms, job_put{state->spec, true}});
  if (state->registered)
    h.add(event{seq, time, job_registered{}});
  if (state->subscriber_generation > 0)
    h.add(event{seq, time,
                subscriber_attached{state->subscriber_generation, {}, {}}});
  auto kept = kept_incidents(log, job_id);
  if (!kept)
    return kept.error();
  for (const auto& i : *kept)
    h.add_kept(i);
  return caf::none;
}

caf::expected<folded_histories> fold_histories(const event_log& log,
                                               size_t keep, size_t threads) {
  folded_histories result;
  // Read first: every event up to it is in the log the readers see.
  result.position = log.last_position();
  auto ids = log.job_ids();
  if (!ids)
    return ids.error();
  auto n = ids->size();
  if (n == 0)
    return result;
  if (threads == 0)
    threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  // Runs of neighbouring ids share table blocks (as in `replay_all`), but
  // a few long jobs are spread one by one.
  auto run = std::clamp<size_t>(n / (threads * 8), 1, 32);
  threads = std::clamp<size_t>(threads, 1, (n + run - 1) / run);
  std::vector<job_history> folded(n, job_history{keep});
  std::vector<uint64_t> events(n, 0);
  std::vector<char> restored(n, 0);
  auto err = for_each_job(
    log, n, threads, run,
    [&](event_log::reader& reader, size_t i) -> caf::error {
      const auto& id = (*ids)[i];
      auto& h = folded[i];
      bool seeded = false;
      uint64_t from = 1;
      auto stored = reader.history(id);
      if (!stored)
        return stored.error();
      // A stored fold is a cache: one this code cannot read is folded
      // again from the events.
      if (*stored)
        if (auto x = decode_history((*stored)->bytes);
            x && x->seq > 0 && x->seq == (*stored)->seq) {
          h = job_history{std::move(*x), keep};
          from = h.seq() + 1;
          seeded = true;
          restored[i] = 1;
        }
      return reader.for_each(
        id, from, [&](uint64_t seq, std::string_view bytes) -> caf::error {
          auto ev = decode_stored_event(id, seq, bytes);
          if (!ev)
            return ev.error();
          if (!seeded && seq > 1)
            if (auto err = seed_history(log, id, seq, h))
              return err;
          seeded = true;
          h.add(*ev);
          ++events[i];
          return caf::none;
        });
    });
  if (err)
    return err;
  for (size_t i = 0; i < n; ++i) {
    result.restored += restored[i];
    result.events += events[i];
    if (folded[i].seq() > 0 && (!restored[i] || events[i] > 0))
      result.unsaved.push_back((*ids)[i]);
  }
  result.histories.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (folded[i].seq() > 0)
      result.histories.emplace((*ids)[i], std::move(folded[i]));
  return result;
}

} // namespace recoverd::storage
