#include "storage/event_codec.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <google/protobuf/arena.h>

#include "actors/error.hpp"
#include "actors/model/overload.hpp"
#include "convert.hpp"
#include "events.pb.h"
#include "storage/wire_form.hpp"

namespace recoverd::storage {

namespace pe = recoverd::events::v1;
namespace pp = recoverd::platform::v1;

namespace {

void to_proto(const init_config& x, pe::InitConfig& out) {
  out.set_platformmode(x.platform_mode);
  for (const auto& s : x.strategies)
    out.add_strategies(s);
  out.set_processrecoverenable(x.process_recover_enable);
  out.set_subhealthystrategy(x.sub_healthy_strategy);
  out.set_framework(x.framework);
}

init_config from_proto(const pe::InitConfig& x) {
  return {x.platformmode(), convert::to_vector(x.strategies()),
          x.processrecoverenable(), x.subhealthystrategy(), x.framework()};
}

void to_proto(const recover_report& x, pe::RecoverReport& out) {
  out.set_code(x.code);
  out.set_strategy(x.strategy);
  for (const auto& r : x.isolate_ranks)
    out.add_isolateranks(r);
}

void stress_ops_to_proto(
  const stress_ops_map& xs,
  google::protobuf::Map<std::string, ::StressOpList>& out) {
  for (const auto& [key, ops] : xs) {
    auto& list = out[key];
    for (auto op : ops)
      list.add_ops(op);
  }
}

stress_ops_map stress_ops_from_proto(
  const google::protobuf::Map<std::string, ::StressOpList>& xs) {
  stress_ops_map result;
  for (const auto& [key, list] : xs)
    result[key] = {list.ops().begin(), list.ops().end()};
  return result;
}

recover_report from_proto(const pe::RecoverReport& x) {
  return {x.code(), x.strategy(), convert::to_vector(x.isolateranks())};
}

// Reads the names of the typed vocabulary; the first unknown one is kept in
// `bad` so that the record is refused as corrupt, naming it.
struct name_reader {
  std::string bad;

  template <class Enum, class Parse>
  Enum read(const std::string& text, Parse parse, Enum empty,
            const char* field) {
    if (text.empty())
      return empty;
    if (auto x = parse(text))
      return *x;
    if (bad.empty())
      bad = std::string{field} + " \"" + text + "\"";
    return empty;
  }

  flow_state state(const std::string& x, const char* field) {
    return read(x, state_from_string, st::init, field);
  }

  flow_event event(const std::string& x, const char* field) {
    return read(x, event_from_string, ev::none, field);
  }

  om_kind om(const std::string& x, const char* field) {
    return read(x, om_kind_from_string, om_kind::none, field);
  }

  report_kind report(const std::string& x, const char* field) {
    return read(x, report_kind_from_string, report_kind::none, field);
  }

  fault_type fault(const std::string& x, const char* field) {
    return read(x, fault_type_from_string, fault_type::normal, field);
  }
};

void to_proto(const recovery& x, pe::RecoveryState& out) {
  const auto& f = x.flow;
  out.set_state(to_string(f.state));
  out.set_uuid(f.uuid);
  auto& faults = *out.mutable_faults();
  for (const auto& [rank, type] : f.faults)
    faults[rank] = to_string(type);
  for (auto p : f.fault_pods)
    out.add_faultpods(p);
  for (const auto& s : f.agent_strategies)
    out.add_agentstrategies(s);
  for (const auto& s : f.decided)
    out.add_decided(s);
  for (const auto& r : f.results)
    to_proto(r, *out.add_results());
  if (f.outbox)
    convert::to_proto(*f.outbox, *out.mutable_outbox());
  if (f.awaited)
    convert::to_proto(*f.awaited, *out.mutable_awaited());
  out.set_deadlinems(f.deadline_ms);
  out.set_deadlineevent(to_string(f.deadline_event));
  out.set_flowstartedms(f.started_ms);
  out.set_health(f.health);
  out.mutable_originuids()->insert(f.origin_uids.begin(), f.origin_uids.end());
  out.set_waituntilms(f.wait_until_ms);
  out.set_pendingstrategy(f.pending_strategy);
  out.set_platformround(f.platform_round);
  for (auto p : f.in_place_pods)
    out.add_inplacepods(p);
  out.set_restartinplace(f.restart_in_place);
  out.set_inplacechecked(f.in_place_checked);
  for (const auto& n : f.isolate_nodes)
    out.add_isolatenodes(n);
  const auto& a = x.action;
  out.set_omkind(to_string(a.kind));
  out.set_omoperator(a.who);
  for (const auto& r : a.switch_ranks)
    out.add_switchranks(r);
  for (bool op : a.switch_ops)
    out.add_switchops(op);
  stress_ops_to_proto(a.stress_params, *out.mutable_stressparams());
  out.set_stressfault(a.stress_fault);
  const auto& j = x.job;
  out.set_label(j.label);
  out.set_retrytime(j.retry_time);
  out.set_resetjson(j.reset_json);
  out.set_resetcheck(j.reset_check);
  out.set_flows(j.flows);
  out.set_lastoutcome(j.last_outcome);
  out.set_omlastmessage(j.om_last_message);
  out.set_omdone(j.om_done);
  out.set_omlastkind(to_string(j.om_last_kind));
  out.mutable_unhealthynodes()->insert(j.unhealthy_nodes.begin(),
                                       j.unhealthy_nodes.end());
  out.set_overbudget(f.over_budget);
  for (auto t : j.recovery_starts)
    out.add_recoverystarts(t);
}

recovery from_proto(const pe::RecoveryState& x, name_reader& names) {
  recovery result;
  auto& f = result.flow;
  f.state = names.state(x.state(), "state");
  f.uuid = x.uuid();
  for (const auto& [rank, type] : x.faults())
    f.faults.emplace(rank, names.fault(type, "faults"));
  f.fault_pods = {x.faultpods().begin(), x.faultpods().end()};
  f.agent_strategies = convert::to_vector(x.agentstrategies());
  f.decided = convert::to_vector(x.decided());
  for (const auto& r : x.results())
    f.results.push_back(from_proto(r));
  if (x.has_outbox())
    f.outbox = convert::from_proto(x.outbox());
  if (x.has_awaited())
    f.awaited = convert::from_proto(x.awaited());
  f.deadline_ms = x.deadlinems();
  f.deadline_event = names.event(x.deadlineevent(), "deadlineEvent");
  f.started_ms = x.flowstartedms();
  f.health = x.health().empty() ? std::string{"Healthy"} : x.health();
  f.origin_uids = {x.originuids().begin(), x.originuids().end()};
  f.wait_until_ms = x.waituntilms();
  f.pending_strategy = x.pendingstrategy();
  f.platform_round = x.platformround();
  f.in_place_pods = {x.inplacepods().begin(), x.inplacepods().end()};
  f.restart_in_place = x.restartinplace();
  f.in_place_checked = x.inplacechecked();
  f.isolate_nodes = convert::to_vector(x.isolatenodes());
  auto& a = result.action;
  a.kind = names.om(x.omkind(), "omKind");
  a.who = x.omoperator();
  a.switch_ranks = convert::to_vector(x.switchranks());
  a.switch_ops = {x.switchops().begin(), x.switchops().end()};
  a.stress_params = stress_ops_from_proto(x.stressparams());
  a.stress_fault = x.stressfault();
  auto& j = result.job;
  j.label = x.label();
  j.retry_time = x.retrytime();
  j.reset_json = x.resetjson();
  j.reset_check = x.resetcheck();
  j.flows = x.flows();
  j.last_outcome = x.lastoutcome();
  j.om_last_message = x.omlastmessage();
  j.om_done = x.omdone();
  j.om_last_kind = names.om(x.omlastkind(), "omLastKind");
  j.unhealthy_nodes = {x.unhealthynodes().begin(), x.unhealthynodes().end()};
  f.over_budget = x.overbudget();
  j.recovery_starts = {x.recoverystarts().begin(), x.recoverystarts().end()};
  return result;
}

// A step's change: the replaced fields by name, their values as a partial
// RecoveryState (proto3 leaves the defaults of the others off the wire), and
// the fault cache's entries.
void to_proto(const recovery_delta& d, pe::FlowStepped& out) {
  for (size_t k = 0; k < recovery_field_count; ++k) {
    auto id = static_cast<recovery_field>(k);
    if (d.replaces(id))
      out.add_changed(to_string(id));
  }
  to_proto(d.values, *out.mutable_change());
  auto& set = *out.mutable_faultsset();
  for (const auto& [rank, type] : d.faults_set)
    set[rank] = to_string(type);
  for (const auto& rank : d.faults_removed)
    out.add_faultsremoved(rank);
}

recovery_delta delta_from_proto(const pe::FlowStepped& m, uint32_t version,
                                name_reader& names) {
  // Version 1 held the whole state after the step: upcast it to a change
  // that replaces every field.
  if (version == 1)
    return replace_all(from_proto(m.after(), names));
  recovery_delta d;
  for (const auto& name : m.changed()) {
    if (auto id = recovery_field_from_string(name))
      d.replace(*id);
    else if (names.bad.empty())
      names.bad = "changed field \"" + name + "\"";
  }
  d.values = from_proto(m.change(), names);
  for (const auto& [rank, type] : m.faultsset())
    d.faults_set.emplace(rank, names.fault(type, "faultsSet"));
  d.faults_removed = convert::to_vector(m.faultsremoved());
  return d;
}

flow_input input_from_proto(const pe::FlowStepped& m, name_reader& names) {
  flow_input in;
  in.name = names.event(m.input(), "input");
  for (const auto& f : m.faults())
    in.faults.push_back({f.rankid(), f.faulttype()});
  in.strategies = convert::to_vector(m.strategies());
  in.report = from_proto(m.report());
  in.kind = names.report(m.reportkind(), "reportKind");
  if (m.has_delivered())
    in.delivered = convert::from_proto(m.delivered());
  in.switch_ranks = convert::to_vector(m.switchranks());
  in.switch_ops = {m.switchops().begin(), m.switchops().end()};
  in.who = m.who();
  in.stress_params = stress_ops_from_proto(m.stressparams());
  for (const auto& [rank, r] : m.stressresult())
    for (const auto& [op, res] : r.rankresult())
      in.stress_result[rank][op] = {res.code(), res.result()};
  in.node = m.node();
  return in;
}

void fault_ranks_to_proto(
  const std::vector<fault_rank>& xs,
  google::protobuf::RepeatedPtrField<::FaultRank>* out) {
  for (const auto& f : xs) {
    auto* r = out->Add();
    r->set_rankid(f.rank_id);
    r->set_faulttype(f.fault_type);
  }
}

/// A per-thread first block for the arena of one kind of codec call.
template <class Tag>
google::protobuf::ArenaOptions first_block_of() {
  thread_local std::array<char, 32 * 1024> block;
  google::protobuf::ArenaOptions result;
  result.initial_block = block.data();
  result.initial_block_size = block.size();
  return result;
}

struct decoding {};
struct encoding {};

// Replay decodes every record at start-up and every report encodes one:
// building the message on an arena that starts in a per-thread block makes
// the many small allocations of its fields bump allocations, all released
// at once. One arena of a kind at a time per thread (the block is shared),
// which the codec calls below are; decoding and encoding use blocks of their
// own.
template <class Tag>
class scratch_arena {
public:
  scratch_arena() : arena_{first_block_of<Tag>()} {
  }

  // An empty message that lives as long as the arena.
  template <class Message>
  Message& make() {
    return *google::protobuf::Arena::CreateMessage<Message>(&arena_);
  }

  // The message parsed from `bytes`, or null when they do not parse.
  template <class Message>
  const Message* parse(std::string_view bytes) {
    auto* msg = &make<Message>();
    if (!msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return nullptr;
    return msg;
  }

private:
  google::protobuf::Arena arena_;
};

} // namespace

std::string encode_event(const event& ev) {
  scratch_arena<encoding> arena;
  auto& out = arena.make<pe::Event>();
  out.set_version(record_version);
  out.set_seq(ev.seq);
  out.set_timems(ev.time_ms);
  if (!ev.by.empty())
    out.set_by(ev.by);
  std::visit(overload{
               [&](const job_put& x) {
                 auto* m = out.mutable_jobput();
                 convert::to_proto(x.spec, *m->mutable_spec());
                 m->set_created(x.created);
               },
               [&](const job_deleted&) { out.mutable_jobdeleted(); },
               [&](const annotations_changed& x) {
                 auto* m = out.mutable_annotationschanged();
                 m->mutable_set()->insert(x.set.begin(), x.set.end());
                 for (const auto& k : x.removed)
                   m->add_removed(k);
                 m->set_by(x.by);
               },
               [&](const job_inited& x) {
                 auto* m = out.mutable_jobinited();
                 to_proto(x.config, *m->mutable_config());
                 m->set_role(x.role);
               },
               [&](const job_registered& x) {
                 out.mutable_jobregistered()->set_role(x.role);
               },
               [&](const subscriber_attached& x) {
                 auto* m = out.mutable_subscriberattached();
                 m->set_generation(x.generation);
                 m->set_role(x.role);
                 m->set_peer(x.peer);
               },
               [&](const subscriber_detached& x) {
                 auto* m = out.mutable_subscriberdetached();
                 m->set_generation(x.generation);
                 m->set_reason(x.reason);
               },
               [&](const device_faults_reported& x) {
                 auto* m = out.mutable_devicefaultsreported();
                 m->set_healthstate(x.health_state);
                 for (const auto& f : x.faults)
                   convert::to_proto(f, *m->add_faults());
               },
               [&](const flow_stepped& x) {
                 auto* m = out.mutable_flowstepped();
                 const auto& in = x.input;
                 m->set_input(to_string(in.name));
                 for (auto p : x.path)
                   m->add_path(to_string(p));
                 to_proto(x.change, *m);
                 m->mutable_annotations()->insert(x.annotations.begin(),
                                                  x.annotations.end());
                 if (in.delivered)
                   convert::to_proto(*in.delivered, *m->mutable_delivered());
                 for (const auto& sig : x.side_signals)
                   convert::to_proto(sig, *m->add_sidesignals());
                 fault_ranks_to_proto(in.faults, m->mutable_faults());
                 for (const auto& s : in.strategies)
                   m->add_strategies(s);
                 to_proto(in.report, *m->mutable_report());
                 m->set_reportkind(to_string(in.kind));
                 for (const auto& k : x.removed_annotations)
                   m->add_removedannotations(k);
                 for (const auto& msg : x.om_messages)
                   m->add_ommessages(msg);
                 m->set_omfinal(x.om_final);
                 for (const auto& r : in.switch_ranks)
                   m->add_switchranks(r);
                 for (bool op : in.switch_ops)
                   m->add_switchops(op);
                 m->set_who(in.who);
                 stress_ops_to_proto(in.stress_params,
                                     *m->mutable_stressparams());
                 for (const auto& [rank, ops] : in.stress_result) {
                   auto& r = (*m->mutable_stressresult())[rank];
                   for (const auto& [op, res] : ops) {
                     auto& o = (*r.mutable_rankresult())[op];
                     o.set_code(res.code);
                     o.set_result(res.result);
                   }
                 }
                 m->set_node(in.node);
               },
             },
             ev.body);
  return out.SerializeAsString();
}

caf::expected<event> decode_event(std::string_view bytes) {
  scratch_arena<decoding> arena;
  const auto* parsed = arena.parse<pe::Event>(bytes);
  if (parsed == nullptr)
    return make_error(errc::corrupt_record, "event record does not parse");
  const auto& in = *parsed;
  if (in.version() == 0 || in.version() > record_version)
    return make_error(errc::corrupt_record,
                      "event record version " + std::to_string(in.version())
                        + " is not supported");
  event result;
  result.seq = in.seq();
  result.time_ms = in.timems();
  result.by = in.by();
  switch (in.kind_case()) {
    case pe::Event::kJobPut:
      result.body = job_put{convert::from_proto(in.jobput().spec()),
                            in.jobput().created()};
      break;
    case pe::Event::kJobDeleted: result.body = job_deleted{}; break;
    case pe::Event::kAnnotationsChanged: {
      const auto& m = in.annotationschanged();
      result.body = annotations_changed{{m.set().begin(), m.set().end()},
                                        convert::to_vector(m.removed()),
                                        m.by()};
      break;
    }
    case pe::Event::kJobInited:
      result.body = job_inited{from_proto(in.jobinited().config()),
                               in.jobinited().role()};
      break;
    case pe::Event::kJobRegistered:
      result.body = job_registered{in.jobregistered().role()};
      break;
    case pe::Event::kSubscriberAttached: {
      const auto& m = in.subscriberattached();
      result.body = subscriber_attached{m.generation(), m.role(), m.peer()};
      break;
    }
    case pe::Event::kSubscriberDetached: {
      const auto& m = in.subscriberdetached();
      result.body = subscriber_detached{m.generation(), m.reason()};
      break;
    }
    case pe::Event::kDeviceFaultsReported: {
      const auto& m = in.devicefaultsreported();
      device_faults_reported x;
      x.health_state = m.healthstate();
      for (const auto& f : m.faults())
        x.faults.push_back(convert::from_proto(f));
      result.body = std::move(x);
      break;
    }
    case pe::Event::kFlowStepped: {
      const auto& m = in.flowstepped();
      flow_stepped x;
      name_reader names;
      x.input = input_from_proto(m, names);
      x.input.now_ms = in.timems();
      for (const auto& p : m.path())
        x.path.push_back(names.state(p, "path"));
      x.change = delta_from_proto(m, in.version(), names);
      x.annotations = {m.annotations().begin(), m.annotations().end()};
      for (const auto& sig : m.sidesignals())
        x.side_signals.push_back(convert::from_proto(sig));
      x.removed_annotations = convert::to_vector(m.removedannotations());
      x.om_messages = convert::to_vector(m.ommessages());
      x.om_final = m.omfinal();
      if (!names.bad.empty())
        return make_error(errc::corrupt_record,
                          "event record " + std::to_string(in.seq())
                            + " has an unknown " + names.bad);
      result.body = std::move(x);
      break;
    }
    case pe::Event::KIND_NOT_SET:
      return make_error(errc::corrupt_record,
                        "event record " + std::to_string(in.seq())
                          + " has no kind");
  }
  return result;
}

caf::expected<event> decode_stored_event(const std::string& job_id,
                                         uint64_t seq, std::string_view bytes) {
  auto ev = decode_event(bytes);
  if (!ev)
    return make_error(errc::corrupt_record,
                      "job " + job_id + " event " + std::to_string(seq) + ": "
                        + message_of(ev.error()));
  return ev;
}

namespace {

// Everything of `state` a snapshot holds but the spec.
void fill_state_but_spec(const job_model& state, pe::JobState& s) {
  s.set_exists(state.exists);
  s.set_inited(state.inited);
  to_proto(state.init, *s.mutable_init());
  s.set_registered(state.registered);
  s.set_createdatms(state.created_at_ms);
  s.set_updatedatms(state.updated_at_ms);
  s.set_healthstate(state.health_state);
  for (const auto& f : state.device_faults)
    convert::to_proto(f, *s.add_devicefaults());
  s.set_subscribergeneration(state.subscriber_generation);
  s.set_owner(state.owner);
  to_proto(state.rec, *s.mutable_recovery());
}

} // namespace

std::string encode_snapshot(const job_model& state) {
  scratch_arena<encoding> arena;
  auto& out = arena.make<pe::Snapshot>();
  out.set_version(record_version);
  out.set_seq(state.seq);
  auto* s = out.mutable_state();
  convert::to_proto(state.spec, *s->mutable_spec());
  fill_state_but_spec(state, *s);
  return out.SerializeAsString();
}

std::string encode_spec(const job_spec& spec) {
  scratch_arena<encoding> arena;
  auto& out = arena.make<pp::JobSpec>();
  convert::to_proto(spec, out);
  return out.SerializeAsString();
}

std::string encode_snapshot_after(job_model& model,
                                  std::optional<std::string>& spec_bytes,
                                  const std::vector<event>& evs) {
  auto keeps_spec = std::none_of(evs.begin(), evs.end(), [](const event& ev) {
    return touches_spec(ev.body);
  });
  if (!keeps_spec)
    return encode_snapshot(fold(model, evs));
  if (!spec_bytes)
    spec_bytes = encode_spec(model.spec);
  // Back in the model however the encoding ends, an exception included.
  struct spec_aside {
    job_model& m;
    job_spec spec;
    ~spec_aside() {
      m.spec = std::move(spec);
    }
  } aside{model, std::exchange(model.spec, job_spec{})};
  return encode_snapshot(fold(model, evs), *spec_bytes);
}

caf::expected<job_model> decode_snapshot(std::string_view bytes) {
  scratch_arena<decoding> arena;
  const auto* parsed = arena.parse<pe::Snapshot>(bytes);
  if (parsed == nullptr)
    return make_error(errc::corrupt_record, "snapshot record does not parse");
  const auto& in = *parsed;
  if (in.version() == 0 || in.version() > record_version)
    return make_error(errc::corrupt_record,
                      "snapshot record version " + std::to_string(in.version())
                        + " is not supported");
  const auto& s = in.state();
  job_model result;
  result.exists = s.exists();
  result.spec = convert::from_proto(s.spec());
  result.inited = s.inited();
  result.init = from_proto(s.init());
  result.registered = s.registered();
  result.created_at_ms = s.createdatms();
  result.updated_at_ms = s.updatedatms();
  result.health_state = s.healthstate();
  for (const auto& f : s.devicefaults())
    result.device_faults.push_back(convert::from_proto(f));
  result.subscriber_generation = s.subscribergeneration();
  result.owner = s.owner();
  name_reader names;
  result.rec = from_proto(s.recovery(), names);
  if (!names.bad.empty())
    return make_error(errc::corrupt_record,
                      "snapshot record has an unknown " + names.bad);
  result.seq = in.seq();
  // No rank index: the job actor builds it (`job`), and a replay at
  // start-up need not, for a job that may stay dormant.
  return result;
}

namespace {

// Splits the Snapshot record `bytes` into the record without its state's
// spec (into `rest`) and the spec's bytes; false when they are not
// well-formed, or when the spec comes in more than one piece.
bool split_spec(std::string_view bytes, std::string& rest,
                std::string_view& spec) {
  rest.clear();
  bool state_ok = true;
  size_t pieces = 0;
  bool ok = for_each_field(bytes, [&](const wire_field& top) {
    if (top.number != pe::Snapshot::kStateFieldNumber
        || top.type != wire::delimited) {
      rest.append(top.whole);
      return;
    }
    thread_local std::string state;
    state.clear();
    state_ok &= for_each_field(top.payload, [&](const wire_field& x) {
      if (x.number == pe::JobState::kSpecFieldNumber
          && x.type == wire::delimited) {
        spec = x.payload;
        ++pieces;
      } else {
        state.append(x.whole);
      }
    });
    append_message_head(rest, pe::Snapshot::kStateFieldNumber, state.size());
    rest.append(state);
  });
  // A parser merges the pieces of a spec (their pods add up); the encoder
  // writes one, so a record in pieces is left to the full decoder.
  return ok && state_ok && pieces <= 1;
}

// The id, name and namespace of the JobSpec `bytes` into `head`, and how
// many pods and devices it has into `size`; false when not well-formed.
bool scan_spec(std::string_view bytes, job_spec& head, spec_size& size) {
  bool pods_ok = true;
  bool ok = for_each_field(bytes, [&](const wire_field& x) {
         if (x.type != wire::delimited)
           return;
         switch (x.number) {
           case pp::JobSpec::kJobIdFieldNumber:
             head.job_id = x.payload;
             break;
           case pp::JobSpec::kNameFieldNumber:
             head.name = x.payload;
             break;
           case pp::JobSpec::kNamespaceFieldNumber:
             head.ns = x.payload;
             break;
           case pp::JobSpec::kPodsFieldNumber:
             ++size.pods;
             pods_ok &= for_each_field(x.payload, [&](const wire_field& d) {
                    if (d.number == pp::Pod::kDevicesFieldNumber
                        && d.type == wire::delimited)
                      ++size.ranks;
                  });
             break;
           default:
             break;
         }
       });
  return ok && pods_ok;
}

} // namespace

std::string encode_snapshot(const job_model& state,
                            std::string_view spec_bytes) {
  // The record as `encode_snapshot(state)` writes it, but for the order of
  // the fields: the state's spec comes last, as the bytes given (a parser
  // takes a message's fields in any order).
  scratch_arena<encoding> arena;
  auto& out = arena.make<pe::Snapshot>();
  out.set_version(record_version);
  out.set_seq(state.seq);
  auto& s = arena.make<pe::JobState>();
  fill_state_but_spec(state, s);
  auto state_size = s.ByteSizeLong();
  std::string spec_head;
  append_message_head(spec_head, pe::JobState::kSpecFieldNumber,
                      spec_bytes.size());
  std::string result = out.SerializeAsString();
  result.reserve(result.size() + 16 + state_size + spec_head.size()
                 + spec_bytes.size());
  append_message_head(result, pe::Snapshot::kStateFieldNumber,
                      state_size + spec_head.size() + spec_bytes.size());
  // With the sizes `ByteSizeLong` cached: a map's are not cheap.
  auto at = result.size();
  result.resize(at + state_size);
  s.SerializeWithCachedSizesToArray(
    reinterpret_cast<uint8_t*>(result.data() + at));
  result += spec_head;
  result += spec_bytes;
  return result;
}

spec_size size_of(const job_spec& spec) {
  return {static_cast<int32_t>(spec.pods.size()), ranks_of(spec)};
}

caf::expected<job_model> decode_snapshot_head(std::string_view bytes,
                                              spec_size& size) {
  size = {};
  thread_local std::string rest;
  std::string_view spec;
  job_spec head;
  if (!split_spec(bytes, rest, spec) || !scan_spec(spec, head, size)) {
    // Not well-formed, or a spec in pieces: the full decoder says why (or,
    // should it succeed, its answer is as good).
    auto full = decode_snapshot(bytes);
    if (full)
      size = size_of(full->spec);
    return full;
  }
  auto result = decode_snapshot(rest);
  if (!result)
    return result;
  result->spec.job_id = std::move(head.job_id);
  result->spec.name = std::move(head.name);
  result->spec.ns = std::move(head.ns);
  return result;
}

std::string encode_digest(const job_digest& x) {
  pe::JobDigest out;
  out.set_version(1);
  convert::to_proto(x.summary, *out.mutable_summary());
  out.set_owner(x.owner);
  return out.SerializeAsString();
}

std::optional<digest_record> digest_record_of(const job_model& state) {
  auto digest = to_digest(state);
  if (!digest)
    return std::nullopt;
  return digest_record{state.spec.job_id, state.seq, encode_digest(*digest)};
}

caf::expected<job_digest> decode_digest(std::string_view bytes) {
  pe::JobDigest in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error(errc::corrupt_record, "digest record does not parse");
  if (in.version() != 1)
    return make_error(errc::corrupt_record,
                      "digest record version " + std::to_string(in.version())
                        + " is not supported");
  return job_digest{convert::from_proto(in.summary()), in.owner()};
}

} // namespace recoverd::storage
