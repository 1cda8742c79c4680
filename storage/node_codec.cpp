#include "storage/node_codec.hpp"

#include "actors/error.hpp"
#include "fleet.pb.h"
#include "storage/event_log.hpp"

namespace recoverd::storage {

namespace pf = recoverd::fleet::v1;

namespace {

void to_proto(const node_fault& x, pf::NodeFault& out) {
  out.set_source(to_string(x.source));
  out.set_jobid(x.job_id);
  out.set_device(x.device);
  for (const auto& c : x.codes)
    out.add_codes(c);
  out.set_level(x.level);
  out.set_timems(x.time_ms);
}

caf::expected<node_fault> from_proto(const pf::NodeFault& x) {
  auto source = node_fault_source_from(x.source());
  if (!source)
    return make_error(errc::corrupt_record,
                      "node fault with an unknown source: " + x.source());
  node_fault result;
  result.source = *source;
  result.job_id = x.jobid();
  result.device = x.device();
  result.codes = {x.codes().begin(), x.codes().end()};
  result.level = x.level();
  result.time_ms = x.timems();
  return result;
}

caf::error corrupt(const char* what) {
  return make_error(errc::corrupt_record, what);
}

// Refuses a `what` of a newer format than this code writes.
caf::error check_version(uint32_t version, const char* what) {
  if (version <= node_record_version)
    return caf::none;
  return make_error(errc::corrupt_record,
                    std::string{what} + " of a newer format (version "
                      + std::to_string(version) + ")");
}

} // namespace

std::string encode_node_event(const node_event& x) {
  pf::NodeEvent out;
  out.set_version(node_record_version);
  out.set_node(node_of(x));
  out.set_timems(time_of(x));
  if (const auto* f = std::get_if<node_fault_seen>(&x)) {
    to_proto(f->fault, *out.mutable_fault());
  } else if (const auto* s = std::get_if<node_stress_verdict>(&x)) {
    auto& v = *out.mutable_stress();
    v.set_jobid(s->job_id);
    v.set_isolated(s->isolated);
    v.set_failed(s->failed);
    v.set_code(s->code);
  } else if (const auto* c = std::get_if<node_cleared>(&x)) {
    out.mutable_cleared()->set_by(c->by);
  }
  return out.SerializeAsString();
}

caf::expected<node_event> decode_node_event(std::string_view bytes) {
  pf::NodeEvent x;
  if (!x.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return corrupt("malformed node event");
  if (auto err = check_version(x.version(), "node event"))
    return err;
  switch (x.body_case()) {
    case pf::NodeEvent::kFault: {
      auto f = from_proto(x.fault());
      if (!f)
        return f.error();
      return node_event{node_fault_seen{x.node(), std::move(*f)}};
    }
    case pf::NodeEvent::kStress: {
      const auto& s = x.stress();
      return node_event{node_stress_verdict{x.node(), s.jobid(), s.isolated(),
                                            s.failed(), s.code(), x.timems()}};
    }
    case pf::NodeEvent::kCleared:
      return node_event{node_cleared{x.node(), x.cleared().by(), x.timems()}};
    default:
      return corrupt("node event without a body");
  }
}

std::string encode_node_snapshot(const node_table& x) {
  pf::NodeRegistrySnapshot out;
  out.set_version(node_record_version);
  for (const auto& [name, r] : x.nodes) {
    auto& n = *out.add_nodes();
    n.set_node(name);
    n.set_score(r.score);
    n.set_scorems(r.score_ms);
    n.set_faults(r.faults);
    n.set_stresstests(r.stress_tests);
    n.set_stressfailures(r.stress_failures);
    for (const auto& f : r.recent)
      to_proto(f, *n.add_recent());
    n.set_lastfaultms(r.last_fault_ms);
    n.set_lastjobid(r.last_job_id);
    n.set_reason(to_string(r.reason));
    n.set_sincems(r.since_ms);
    n.set_clearedms(r.cleared_ms);
    n.set_clearedby(r.cleared_by);
  }
  return out.SerializeAsString();
}

caf::error decode_node_snapshot(std::string_view bytes, node_table& into) {
  pf::NodeRegistrySnapshot x;
  if (!x.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return corrupt("malformed node registry snapshot");
  if (auto err = check_version(x.version(), "node registry snapshot"))
    return err;
  std::map<std::string, node_record> nodes;
  for (const auto& n : x.nodes()) {
    auto reason = quarantine_reason_from(n.reason());
    if (!reason)
      return make_error(errc::corrupt_record,
                        "node " + n.node()
                          + " has an unknown quarantine reason: "
                          + n.reason());
    node_record r;
    r.score = n.score();
    r.score_ms = n.scorems();
    r.faults = n.faults();
    r.stress_tests = n.stresstests();
    r.stress_failures = n.stressfailures();
    for (const auto& f : n.recent()) {
      auto y = from_proto(f);
      if (!y)
        return y.error();
      r.recent.push_back(std::move(*y));
    }
    // A snapshot of a registry that kept more faults keeps the newest.
    while (r.recent.size() > into.cfg.max_recent_faults)
      r.recent.pop_front();
    r.last_fault_ms = n.lastfaultms();
    r.last_job_id = n.lastjobid();
    r.reason = *reason;
    r.since_ms = n.sincems();
    r.cleared_ms = n.clearedms();
    r.cleared_by = n.clearedby();
    nodes.emplace(n.node(), std::move(r));
  }
  into.nodes = std::move(nodes);
  return caf::none;
}

caf::expected<initial_nodes> replay_nodes(const event_log& log,
                                          const node_registry_config& cfg) {
  auto stream = log.read_fleet(node_stream);
  if (!stream)
    return stream.error();
  initial_nodes result;
  result.table.cfg = cfg;
  if (stream->snapshot) {
    if (auto err = decode_node_snapshot(stream->snapshot->bytes, result.table))
      return err;
    result.seq = stream->snapshot->seq;
    result.tail.snapshot_bytes = stream->snapshot->bytes.size();
  }
  for (const auto& x : stream->events) {
    auto ev = decode_node_event(x.bytes);
    if (!ev)
      return make_error(errc::corrupt_record,
                        "node stream event " + std::to_string(x.seq) + ": "
                          + message_of(ev.error()));
    result.table = recoverd::apply(std::move(result.table), *ev);
    result.seq = x.seq;
    result.tail.events += 1;
    result.tail.bytes += x.bytes.size();
  }
  return result;
}

} // namespace recoverd::storage
