#include "storage/incident_codec.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "actors/error.hpp"
#include "history.pb.h"
#include "storage/event_codec.hpp"

namespace recoverd::storage {

namespace ph = recoverd::history::v1;

namespace {

void to_record(const incident& x, ph::IncidentRecord& out) {
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
}

caf::expected<incident> from_record(const ph::IncidentRecord& in, bool active) {
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
  x.active = active;
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

void to_record(const duration_histogram& x, ph::HistogramRecord& out) {
  for (auto n : x.buckets)
    out.add_buckets(n);
  out.set_summs(x.sum_ms);
  out.set_count(x.count);
}

duration_histogram from_record(const ph::HistogramRecord& in) {
  duration_histogram x;
  x.buckets.assign(in.buckets().begin(), in.buckets().end());
  x.sum_ms = in.summs();
  x.count = in.count();
  return x;
}

void to_record(const goodput_tally& x, ph::GoodputTallyRecord& out) {
  out.set_incidents(x.incidents);
  out.set_lostms(x.lost_ms);
  out.set_recoveries(x.recoveries);
  out.set_recoverylostms(x.recovery_lost_ms);
  for (const auto& [cause, n] : x.by_cause) {
    auto* y = out.add_bycause();
    y->set_cause(cause);
    y->set_count(n);
  }
  for (const auto& [key, h] : x.flow_durations) {
    auto* y = out.add_flowdurations();
    y->set_kind(std::get<0>(key));
    y->set_strategy(std::get<1>(key));
    y->set_outcome(std::get<2>(key));
    to_record(h, *y->mutable_histogram());
  }
  for (const auto& [cause, h] : x.lost_by_cause) {
    auto* y = out.add_lostbycause();
    y->set_cause(cause);
    to_record(h, *y->mutable_histogram());
  }
}

goodput_tally from_record(const ph::GoodputTallyRecord& in) {
  goodput_tally x;
  x.incidents = in.incidents();
  x.lost_ms = in.lostms();
  x.recoveries = in.recoveries();
  x.recovery_lost_ms = in.recoverylostms();
  for (const auto& y : in.bycause())
    x.by_cause[y.cause()] = y.count();
  for (const auto& y : in.flowdurations())
    x.flow_durations[{y.kind(), y.strategy(), y.outcome()}]
      = from_record(y.histogram());
  for (const auto& y : in.lostbycause())
    x.lost_by_cause[y.cause()] = from_record(y.histogram());
  return x;
}

} // namespace

std::string encode_incident(const incident& x) {
  ph::IncidentRecord out;
  to_record(x, out);
  return out.SerializeAsString();
}

caf::expected<incident> decode_incident(std::string_view bytes) {
  ph::IncidentRecord in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error(errc::corrupt_record, "malformed incident record");
  // Only finished incidents are stored.
  return from_record(in, false);
}

std::string encode_history(const job_history::fold_state& x) {
  ph::JobHistoryRecord out;
  out.set_version(history_record_version);
  for (const auto& i : x.finished)
    to_record(i, *out.add_finished());
  if (x.active)
    to_record(*x.active, *out.mutable_active());
  for (const auto& [key, n] : x.counts) {
    auto* y = out.add_counts();
    y->set_kind(std::get<0>(key));
    y->set_strategy(std::get<1>(key));
    y->set_outcome(std::get<2>(key));
    y->set_count(n);
  }
  to_record(x.tally, *out.mutable_tally());
  out.set_observedms(x.observed_ms);
  out.set_lifestartedms(x.life_started_ms);
  out.set_lasttimems(x.last_time_ms);
  auto* sub = out.mutable_subscription();
  sub->set_generation(x.subscription.generation);
  sub->set_role(x.subscription.role);
  sub->set_peer(x.subscription.peer);
  sub->set_timems(x.subscription.time_ms);
  out.set_exists(x.exists);
  out.set_registered(x.registered);
  out.set_seq(x.seq);
  out.set_flowuuid(x.facts.uuid);
  for (const auto& s : x.facts.decided)
    out.add_decided(s);
  out.set_operatoraction(to_string(x.facts.om));
  out.set_lastoutcome(x.facts.last_outcome);
  // In rank order: the same fold always gives the same bytes.
  std::vector<const std::string*> ranks;
  ranks.reserve(x.places.size());
  for (const auto& entry : x.places)
    ranks.push_back(&entry.first);
  std::sort(ranks.begin(), ranks.end(),
            [](const auto* a, const auto* b) { return *a < *b; });
  for (const auto* r : ranks) {
    const auto& [node, device] = x.places.at(*r);
    auto* y = out.add_places();
    y->set_rank(*r);
    y->set_node(node);
    y->set_device(device);
  }
  if (x.snapshot)
    out.set_snapshotevent(
      encode_event(event{x.seq, x.last_time_ms, *x.snapshot}));
  return out.SerializeAsString();
}

caf::expected<job_history::fold_state> decode_history(std::string_view bytes) {
  ph::JobHistoryRecord in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error(errc::corrupt_record, "malformed history record");
  if (in.version() > history_record_version)
    return make_error(errc::corrupt_record,
                      "history record version " + std::to_string(in.version())
                        + " is newer than this recoverd reads");
  job_history::fold_state x;
  for (const auto& y : in.finished()) {
    auto i = from_record(y, false);
    if (!i)
      return i.error();
    x.finished.push_back(std::move(*i));
  }
  if (in.has_active()) {
    auto i = from_record(in.active(), true);
    if (!i)
      return i.error();
    x.active = std::move(*i);
  }
  for (const auto& y : in.counts())
    x.counts[{y.kind(), y.strategy(), y.outcome()}] = y.count();
  x.tally = from_record(in.tally());
  x.observed_ms = in.observedms();
  x.life_started_ms = in.lifestartedms();
  x.last_time_ms = in.lasttimems();
  const auto& sub = in.subscription();
  x.subscription = {sub.generation(), sub.role(), sub.peer(), sub.timems()};
  x.exists = in.exists();
  x.registered = in.registered();
  x.seq = in.seq();
  x.facts.uuid = in.flowuuid();
  x.facts.decided.assign(in.decided().begin(), in.decided().end());
  auto om = om_kind_from_string(in.operatoraction());
  if (!om)
    return make_error(errc::corrupt_record,
                      "history record names an unknown operator action: "
                        + in.operatoraction());
  x.facts.om = *om;
  x.facts.last_outcome = in.lastoutcome();
  for (const auto& y : in.places())
    x.places[y.rank()] = {y.node(), y.device()};
  if (!in.snapshotevent().empty()) {
    auto ev = decode_event(in.snapshotevent());
    if (!ev)
      return ev.error();
    auto* snap = std::get_if<device_faults_reported>(&ev->body);
    if (snap == nullptr)
      return make_error(errc::corrupt_record,
                        "history record holds a snapshot event of kind "
                          + std::string{kind_name(ev->body)});
    x.snapshot = std::move(*snap);
  }
  return x;
}

} // namespace recoverd::storage
