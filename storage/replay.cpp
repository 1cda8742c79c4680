#include "storage/replay.hpp"

#include "actors/error.hpp"
#include "storage/event_codec.hpp"

namespace recoverd::storage {

caf::expected<replayed_job> replay_job(const event_log& log,
                                       const std::string& job_id,
                                       uint64_t up_to_seq) {
  replayed_job result;
  result.state.spec.job_id = job_id;
  auto snap = log.snapshot(job_id);
  if (!snap)
    return snap.error();
  if (*snap && (*snap)->seq <= up_to_seq) {
    auto state = decode_snapshot((*snap)->bytes);
    if (!state)
      return state.error();
    result.state = std::move(*state);
    result.state.spec.job_id = job_id;
    result.from_snapshot = true;
  }
  auto done = make_error(errc::overloaded, "done");
  auto err = log.for_each(
    job_id, result.state.seq + 1,
    [&](uint64_t seq, std::string_view bytes) -> caf::error {
      if (seq > up_to_seq)
        return done;
      auto ev = decode_event(bytes);
      if (!ev)
        return make_error(errc::corrupt_record,
                          "job " + job_id + " event " + std::to_string(seq)
                            + ": " + message_of(ev.error()));
      if (ev->seq != seq || seq != result.state.seq + 1)
        return make_error(errc::corrupt_record,
                          "job " + job_id + " event " + std::to_string(seq)
                            + " is out of sequence after "
                            + std::to_string(result.state.seq));
      result.state = apply(std::move(result.state), *ev);
      ++result.events_replayed;
      return caf::none;
    });
  if (err && err != done)
    return err;
  return result;
}

caf::expected<replay_result> replay_all(const event_log& log) {
  replay_result result;
  auto ids = log.job_ids();
  if (!ids)
    return ids.error();
  for (const auto& id : *ids) {
    auto job = replay_job(log, id);
    if (!job)
      return job.error();
    result.events_replayed += job->events_replayed;
    if (job->state.exists)
      result.live.push_back(std::move(*job));
    else
      result.deleted.push_back(id);
  }
  return result;
}

} // namespace recoverd::storage
