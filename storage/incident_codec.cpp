#include "storage/incident_codec.hpp"

#include "actors/error.hpp"
#include "history.pb.h"

namespace recoverd::storage {

namespace ph = recoverd::history::v1;

std::string encode_incident(const incident& x) {
  ph::IncidentRecord out;
  out.set_version(incident_record_version);
  out.set_kind(x.kind);
  out.set_uuid(x.uuid);
  out.set_firstseq(x.first_seq);
  out.set_lastseq(x.last_seq);
  out.set_startedms(x.started_ms);
  out.set_endedms(x.ended_ms);
  out.set_lasttimems(x.last_time_ms);
  out.set_state(x.state);
  out.set_strategy(x.strategy);
  for (const auto& s : x.strategies)
    out.add_strategies(s);
  out.set_outcome(x.outcome);
  out.set_operatorresult(x.operator_result);
  for (const auto& r : x.fault_ranks)
    out.add_faultranks(r);
  for (const auto& p : x.phases) {
    auto* q = out.add_phases();
    q->set_name(p.name);
    q->set_seq(p.seq);
    q->set_timems(p.time_ms);
    q->set_sincestartms(p.since_start_ms);
    q->set_durationms(p.duration_ms);
  }
  out.set_steps(x.steps);
  const auto& a = x.attribution;
  if (!a.source.empty()) {
    auto* y = out.mutable_attribution();
    y->set_source(a.source);
    y->set_node(a.node);
    y->set_device(a.device);
    for (const auto& c : a.codes)
      y->add_codes(c);
    y->set_level(a.level);
  }
  return out.SerializeAsString();
}

caf::expected<incident> decode_incident(std::string_view bytes) {
  ph::IncidentRecord in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error(errc::corrupt_record, "malformed incident record");
  if (in.version() > incident_record_version)
    return make_error(errc::corrupt_record,
                      "incident record version " + std::to_string(in.version())
                        + " is newer than this recoverd reads");
  incident x;
  x.kind = in.kind();
  x.uuid = in.uuid();
  x.first_seq = in.firstseq();
  x.last_seq = in.lastseq();
  x.started_ms = in.startedms();
  x.ended_ms = in.endedms();
  x.last_time_ms = in.lasttimems();
  // Only finished incidents are stored.
  x.active = false;
  x.state = in.state();
  x.strategy = in.strategy();
  x.strategies.assign(in.strategies().begin(), in.strategies().end());
  x.outcome = in.outcome();
  x.operator_result = in.operatorresult();
  x.fault_ranks.assign(in.faultranks().begin(), in.faultranks().end());
  for (const auto& q : in.phases())
    x.phases.push_back(
      {q.name(), q.seq(), q.timems(), q.sincestartms(), q.durationms()});
  x.steps = in.steps();
  if (in.has_attribution()) {
    const auto& y = in.attribution();
    x.attribution.source = y.source();
    x.attribution.node = y.node();
    x.attribution.device = y.device();
    x.attribution.codes.assign(y.codes().begin(), y.codes().end());
    x.attribution.level = y.level();
  }
  return x;
}

} // namespace recoverd::storage
