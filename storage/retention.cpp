#include "storage/retention.hpp"

#include "actors/error.hpp"
#include "actors/model/incidents.hpp"
#include "storage/event_codec.hpp"
#include "storage/incident_codec.hpp"

namespace recoverd::storage {

caf::expected<std::optional<live_cut>>
plan_live_cut(const event_log& log, const std::string& job_id,
              int64_t older_than_ms, uint64_t max_events, uint64_t& examined) {
  event_log::reader reader{log};
  return plan_live_cut(reader, log, job_id, older_than_ms, max_events,
                       examined);
}

caf::expected<std::optional<live_cut>>
plan_live_cut(event_log::reader& reader, const event_log& log,
              const std::string& job_id, int64_t older_than_ms,
              uint64_t max_events, uint64_t& examined) {
  auto none = std::optional<live_cut>{};
  auto snap = reader.snapshot(job_id);
  if (!snap)
    return snap.error();
  if (!*snap)
    return none;
  // First pass: the first event to keep. Events are in decision order, so
  // the first one that is not old enough ends the removable prefix. One
  // seek: the first event read is the first kept one.
  uint64_t first = 0;
  uint64_t limit = 0;
  uint64_t cut = 0;
  job_history flows{0};
  auto done = make_error(errc::overloaded, "done");
  auto err = reader.for_each(
    job_id, 0, [&](uint64_t seq, std::string_view bytes) -> caf::error {
      if (first == 0) {
        first = seq;
        cut = seq;
        limit = std::min((*snap)->seq, first + max_events);
      }
      if (seq >= limit)
        return done;
      ++examined;
      auto ev = decode_stored_event(job_id, seq, bytes);
      if (!ev)
        return ev.error();
      if (ev->time_ms >= older_than_ms)
        return done;
      flows.add(*ev);
      cut = seq + 1;
      return caf::none;
    });
  if (err && err != done)
    return err;
  if (first == 0 || first >= (*snap)->seq)
    return none;
  // Never split a flow: its incident would be half stored, half rebuilt.
  if (flows.active())
    cut = flows.active()->first_seq;
  if (cut <= first)
    return none;
  // Second pass: the state at the cut and the incidents before it. The
  // previous cut (the first stored event) lies between flows as well.
  job_model state;
  state.spec.job_id = job_id;
  state.seq = first - 1;
  if (first > 1) {
    auto b = log.base(job_id);
    if (!b)
      return b.error();
    if (*b && (*b)->seq == first - 1) {
      auto decoded = decode_snapshot((*b)->bytes);
      if (!decoded)
        return decoded.error();
      state = std::move(*decoded);
      state.spec.job_id = job_id;
    }
  }
  job_history h;
  err = log.for_each(job_id, first,
                     [&](uint64_t seq, std::string_view bytes) -> caf::error {
                       if (seq >= cut)
                         return done;
                       ++examined;
                       auto ev = decode_stored_event(job_id, seq, bytes);
                       if (!ev)
                         return ev.error();
                       h.add(*ev);
                       apply_to(state, std::move(*ev));
                       return caf::none;
                     });
  if (err && err != done)
    return err;
  if (state.seq != cut - 1)
    return make_error(errc::corrupt_record,
                      "job " + job_id + " has a gap before event "
                        + std::to_string(cut));
  live_cut result;
  result.target = purge_target{job_id, cut - 1, true};
  result.base = snapshot_record{job_id, cut - 1, encode_snapshot(state)};
  for (const auto& x : h.finished())
    result.incidents.push_back({job_id, x.first_seq, encode_incident(x)});
  return std::optional<live_cut>{std::move(result)};
}

caf::expected<std::vector<incident>> kept_incidents(const event_log& log,
                                                    const std::string& job_id) {
  std::vector<incident> result;
  auto xs = log.incidents(job_id);
  if (!xs)
    return xs.error();
  if (xs->empty())
    return result;
  auto first = log.first_seq(job_id);
  if (!first)
    return first.error();
  for (const auto& x : *xs) {
    auto i = decode_incident(x.bytes);
    if (!i)
      return make_error(errc::corrupt_record,
                        "job " + job_id + " incident at event "
                          + std::to_string(x.first_seq) + ": "
                          + message_of(i.error()));
    // Stored with the removal of its events; one that reaches the stored
    // events would be built from them again.
    if (*first == 0 || i->last_seq < *first)
      result.push_back(std::move(*i));
  }
  return result;
}

} // namespace recoverd::storage
