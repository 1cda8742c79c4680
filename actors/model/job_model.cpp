#include "actors/model/job_model.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "actors/model/error.hpp"
#include "actors/model/overload.hpp"
#include "actors/model/text.hpp"
#include "actors/model/validate.hpp"

namespace recoverd {

namespace {

// Strategies a job may configure, in the reference's priority order.
constexpr std::array<const char*, 6> known_strategies = {
  "retry", "recover-in-place", "recover", "elastic-training", "dump", "exit"};

int strategy_priority(const std::string& name) {
  for (size_t i = 0; i < known_strategies.size(); ++i)
    if (name == known_strategies[i])
      return static_cast<int>(i) + 1;
  return static_cast<int>(known_strategies.size()) + 1;
}

bool is_known_strategy(const std::string& name) {
  return strategy_priority(name) <= static_cast<int>(known_strategies.size());
}

failure bad(std::string field, std::string what) {
  return fail(errc::invalid_argument, field + ": " + what);
}

// Client text as a message echoes it: valid UTF-8, long ones cut.
std::string quoted(const std::string& x) {
  return "\"" + excerpt(x) + "\"";
}

bool same_faults(const std::vector<device_fault>& xs,
                 const std::vector<device_fault>& ys) {
  auto key = [](const device_fault& f) {
    return std::tie(f.node_name, f.device_id, f.fault_codes, f.fault_level,
                    f.pod_uid);
  };
  if (xs.size() != ys.size())
    return false;
  for (size_t i = 0; i < xs.size(); ++i)
    if (key(xs[i]) != key(ys[i]))
      return false;
  return true;
}

} // namespace

const char* kind_name(const event_body& body) {
  return std::visit(
    overload{
      [](const job_put&) { return "job_put"; },
      [](const job_deleted&) { return "job_deleted"; },
      [](const annotations_changed&) { return "annotations_changed"; },
      [](const job_inited&) { return "job_inited"; },
      [](const job_registered&) { return "job_registered"; },
      [](const subscriber_attached&) { return "subscriber_attached"; },
      [](const subscriber_detached&) { return "subscriber_detached"; },
      [](const device_faults_reported&) { return "device_faults_reported"; },
      [](const flow_stepped&) { return "flow_stepped"; },
    },
    body);
}

// -- apply --------------------------------------------------------------------

void apply_to(job_model& state, const event& ev) {
  std::visit(overload{
               [&](const job_put& x) {
                 if (x.created) {
                   // A (re-)created job starts afresh; only the sequence and
                   // the subscription counter continue, so ids stay unique.
                   auto generation = state.subscriber_generation;
                   state = job_model{};
                   state.subscriber_generation = generation;
                   state.created_at_ms = ev.time_ms;
                   state.owner = ev.by;
                 }
                 state.exists = true;
                 state.spec = x.spec;
                 state.ranks = make_rank_index(state.spec);
               },
               [&](const job_deleted&) {
                 // The id and the subscription counter outlive a deletion, so a
                 // re-created job continues its history.
                 auto id = std::move(state.spec.job_id);
                 auto generation = state.subscriber_generation;
                 state = job_model{};
                 state.spec.job_id = std::move(id);
                 state.subscriber_generation = generation;
               },
               [&](const annotations_changed& x) {
                 for (const auto& key : x.removed)
                   state.spec.annotations.erase(key);
                 for (const auto& [key, value] : x.set)
                   state.spec.annotations[key] = value;
               },
               [&](const job_inited& x) {
                 state.inited = true;
                 state.init = x.config;
               },
               [&](const job_registered&) {
                 state.registered = true;
                 state.rec.job.label = "on";
               },
               [&](const subscriber_attached& x) {
                 state.subscriber_generation = x.generation;
               },
               [&](const subscriber_detached&) {
                 // nop: audit only; live streams are not part of the durable
                 // state
               },
               [&](const device_faults_reported& x) {
                 state.health_state = x.health_state;
                 state.device_faults = x.faults;
               },
               [&](const flow_stepped& x) {
                 patch(state.rec, x.change);
                 for (const auto& key : x.removed_annotations)
                   state.spec.annotations.erase(key);
                 for (const auto& [key, value] : x.annotations)
                   state.spec.annotations[key] = value;
               },
             },
             ev.body);
  state.seq = ev.seq;
  state.updated_at_ms = ev.time_ms;
}

void apply_to(job_model& state, event&& ev) {
  // The large parts of an event are taken instead of copied: a step's
  // change is patched in first (the rest of the event then applies with an
  // empty change), a spec is moved in last.
  std::optional<job_spec> spec;
  if (auto* x = std::get_if<flow_stepped>(&ev.body)) {
    patch(state.rec, std::move(x->change));
    x->change = recovery_delta{};
  } else if (auto* x = std::get_if<job_put>(&ev.body)) {
    spec = std::move(x->spec);
  }
  apply_to(state, std::as_const(ev));
  if (spec) {
    state.spec = std::move(*spec);
    state.ranks = make_rank_index(state.spec);
  }
}

job_model apply(job_model state, const event& ev) {
  apply_to(state, ev);
  return state;
}

job_model apply(job_model state, event&& ev) {
  apply_to(state, std::move(ev));
  return state;
}

job_model fold(job_model state, const std::vector<event>& evs) {
  for (const auto& ev : evs)
    apply_to(state, ev);
  return state;
}

bool touches_spec(const event_body& body) {
  if (const auto* x = std::get_if<flow_stepped>(&body))
    return !x->annotations.empty() || !x->removed_annotations.empty();
  return std::holds_alternative<job_put>(body)
         || std::holds_alternative<job_deleted>(body)
         || std::holds_alternative<annotations_changed>(body);
}

// -- validation ---------------------------------------------------------------

failure validate_job_id(const std::string& job_id, const std::string& field) {
  if (job_id.empty())
    return bad(field, "must not be empty");
  if (job_id.size() > 256)
    return bad(field, "longer than 256 bytes");
  for (auto c : job_id)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return bad(field, "contains a control character");
  // A job id is a Kubernetes UID or a label value (spec/kubernetes-surface.md
  // §1), neither has a '/'; one would make the job unreachable under
  // /api/v1/jobs/{id}.
  if (job_id.find('/') != std::string::npos)
    return bad(field, quoted(job_id)
                        + " contains '/' (a job id is a Kubernetes UID or "
                          "label value, and must be one segment of "
                          "/api/v1/jobs/{id})");
  return failure{};
}

failure check_device_fault_count(size_t entries) {
  if (entries <= max_device_faults_per_request)
    return failure{};
  return bad("jobs[].faults",
             std::to_string(entries)
               + " device-fault entries in one request, more than the limit "
                 "of "
               + std::to_string(max_device_faults_per_request));
}

failure validate(const job_spec& spec) {
  if (auto err = validate_job_id(spec.job_id))
    return err;
  if (!spec.framework.empty() && spec.framework != "pytorch"
      && spec.framework != "mindspore")
    return bad("framework",
               "unknown framework " + quoted(spec.framework)
                 + " (allowed: \"\", pytorch, mindspore)");
  std::set<std::string> seen_strategies;
  for (size_t i = 0; i < spec.recover_strategies.size(); ++i) {
    const auto& s = spec.recover_strategies[i];
    auto field = "recoverStrategies[" + std::to_string(i) + "]";
    if (!is_known_strategy(s))
      return bad(field,
                 "unknown strategy " + quoted(s)
                   + " (allowed: retry, recover-in-place, recover, "
                     "elastic-training, dump, exit)");
    if (!seen_strategies.insert(s).second)
      return bad(field, "strategy " + quoted(s) + " listed twice");
  }
  if (spec.graceful_fault_tolerance && spec.process_recover_enable)
    return bad("gracefulFaultTolerance",
               "cannot be enabled together with processRecoverEnable "
               "(graceful fault tolerance and process-level recovery are "
               "mutually exclusive)");
  if (spec.fault_scheduling != "" && spec.fault_scheduling != "grace"
      && spec.fault_scheduling != "force")
    return bad("faultScheduling",
               "unknown value " + quoted(spec.fault_scheduling)
                 + " (allowed: \"\", grace, force)");
  const auto& sh = spec.sub_healthy_strategy;
  // Refused rather than accepted and never done: a job that counts on hot
  // switch must learn at once that it will not happen.
  if (sh == "hotSwitch")
    return bad("subHealthyStrategy",
               "hotSwitch is not supported by recoverd (hot switch is not "
               "implemented); use graceExit or ignore");
  if (sh != "" && sh != "graceExit" && sh != "ignore")
    return bad("subHealthyStrategy",
               "unknown value " + quoted(sh)
                 + " (allowed: \"\", graceExit, ignore)");
  for (const auto& [key, value] : spec.annotations)
    if (key.empty())
      return bad("annotations", "empty key");
  std::map<int32_t, size_t> pod_ranks;
  std::map<std::string, std::string> rank_owner; // rank -> "node/device"
  std::unordered_map<std::string, size_t> device_owner; // device key -> pod
  for (size_t i = 0; i < spec.pods.size(); ++i) {
    const auto& p = spec.pods[i];
    auto field = "pods[" + std::to_string(i) + "]";
    if (p.pod_rank < 0)
      return bad(field + ".podRank", "must be >= 0");
    if (auto [it, fresh] = pod_ranks.emplace(p.pod_rank, i); !fresh)
      return bad(field + ".podRank",
                 "duplicate pod rank " + std::to_string(p.pod_rank)
                   + " (also pods[" + std::to_string(it->second) + "])");
    if (p.uid.empty())
      return bad(field + ".uid", "must not be empty");
    if (p.node_name.empty())
      return bad(field + ".nodeName", "must not be empty");
    std::set<std::string> device_ids;
    for (size_t j = 0; j < p.devices.size(); ++j) {
      const auto& d = p.devices[j];
      auto dfield = field + ".devices[" + std::to_string(j) + "]";
      if (d.device_id.empty())
        return bad(dfield + ".deviceId", "must not be empty");
      if (!device_ids.insert(d.device_id).second)
        return bad(dfield + ".deviceId",
                   "duplicate device " + quoted(d.device_id) + " in pod");
      // Two pods on one node cannot hold the same device.
      if (auto [it, fresh]
          = device_owner.emplace(device_key(p.node_name, d.device_id), i);
          !fresh)
        return bad(dfield + ".deviceId",
                   "device " + quoted(d.device_id) + " of node "
                     + quoted(p.node_name) + " is already in pods["
                     + std::to_string(it->second) + "]");
      // "1" and "01" would be two ranks to a map and one to the agent.
      if (!is_canonical_rank(d.rank_id))
        return bad(dfield + ".rankId",
                   "must be a canonical non-negative decimal (digits only, "
                   "no sign, spaces or leading zeros, at most 9 digits), got "
                     + quoted(d.rank_id));
      auto where = p.node_name + "/" + d.device_id;
      if (auto [it, fresh] = rank_owner.emplace(d.rank_id, where); !fresh)
        return bad(dfield + ".rankId",
                   "rank " + d.rank_id + " is already on device " + it->second);
    }
  }
  return failure{};
}

std::vector<std::string> effective_strategies(const job_spec& spec) {
  std::vector<std::string> result;
  for (const auto& s : spec.recover_strategies)
    if (is_known_strategy(s))
      result.push_back(s);
  if (spec.fault_scheduling == "grace" || spec.fault_scheduling == "force")
    result.emplace_back("job-rescheduling");
  if (spec.pod_rescheduling)
    result.emplace_back("pod-rescheduling");
  result.emplace_back("exit");
  std::stable_sort(result.begin(), result.end(),
                   [](const auto& x, const auto& y) {
                     return strategy_priority(x) < strategy_priority(y);
                   });
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

init_config make_init_config(const job_spec& spec) {
  init_config result;
  result.platform_mode = spec.platform_mode
    || spec.annotations.count("ProcessRecoverStrategy") > 0;
  result.strategies = effective_strategies(spec);
  result.process_recover_enable = spec.process_recover_enable;
  result.sub_healthy_strategy = spec.sub_healthy_strategy;
  result.framework = spec.framework;
  return result;
}

// -- decide -------------------------------------------------------------------

namespace {

expected<decision> decide_put(const job_model& state, const put_cmd& cmd) {
  if (auto err = validate(cmd.spec))
    return err;
  if (state.exists && cmd.spec.job_id != state.spec.job_id)
    return bad("jobId", "does not match the job");
  job_put ev{cmd.spec, !state.exists};
  // An empty annotation map keeps what the job has: annotations are changed
  // through SetAnnotations, and recoverd writes some of them itself.
  if (state.exists && ev.spec.annotations.empty())
    ev.spec.annotations = state.spec.annotations;
  return decision{{std::move(ev)}, {}};
}

expected<decision> decide_annotate(const job_model& state,
                                   const annotate_cmd& cmd) {
  if (cmd.expected_seq != 0 && cmd.expected_seq != state.seq)
    return fail(errc::conflict,
                "job " + state.spec.job_id + " is at sequence number "
                  + std::to_string(state.seq) + ", not the expected "
                  + std::to_string(cmd.expected_seq)
                  + ": it changed since it was read; read it again");
  for (const auto& [key, value] : cmd.set)
    if (key.empty())
      return bad("set", "empty annotation key");
  for (const auto& key : cmd.remove) {
    if (key.empty())
      return bad("remove", "empty annotation key");
    if (cmd.set.count(key) > 0)
      return bad("remove", "key " + quoted(key) + " is both set and removed");
  }
  annotations_changed ev;
  ev.by = cmd.by;
  for (const auto& [key, value] : cmd.set) {
    auto i = state.spec.annotations.find(key);
    if (i == state.spec.annotations.end() || i->second != value)
      ev.set.emplace(key, value);
  }
  for (const auto& key : cmd.remove)
    if (state.spec.annotations.count(key) > 0)
      ev.removed.push_back(key);
  decision result;
  if (!ev.set.empty() || !ev.removed.empty())
    result.events.emplace_back(std::move(ev));
  return result;
}

// One step of the recovery machine on `device_faults`; nothing when the
// step changes nothing worth an event (e.g. a pod change nobody waits for).
expected<std::optional<flow_stepped>>
decide_step(const job_model& state, const flow_input& in, const timeouts& waits,
            const std::vector<device_fault>& device_faults) {
  if (in.name == ev::fault_absorbed && !in.delivered) {
    // The hot path of a fault storm: every rank's report joins the flow.
    flow_stepped e;
    e.path.push_back(state.rec.flow.state);
    auto ranks = state.ranks ? state.ranks : make_rank_index(state.spec);
    e.change = absorb(state.rec, state.spec, state.init, in, *ranks);
    e.input = in;
    return std::optional<flow_stepped>{std::move(e)};
  }
  auto s = step(state.rec, state.spec, state.init, in, waits, device_faults,
                state.ranks.get());
  if (!s)
    return s.error();
  flow_stepped e;
  static_cast<step_output&>(e) = std::move(*s);
  e.input = std::move(s->input);
  e.change = diff(state.rec, std::move(s->after));
  if (e.path.size() > 1 || !e.change.empty() || !e.side_signals.empty()
      || !e.annotations.empty() || !e.removed_annotations.empty()
      || e.input.delivered || !e.om_messages.empty()
      || e.input.name == ev::fault_absorbed
      || e.input.name == ev::node_health_cleared)
    return std::optional<flow_stepped>{std::move(e)};
  return std::optional<flow_stepped>{};
}

expected<decision> decide_faults(const job_model& state,
                                 const faults_cmd& cmd) {
  if (auto err = check_device_fault_count(cmd.faults.faults.size()))
    return err;
  // Entry by entry: a stale or unknown device is skipped and reported, the
  // job's other faults still count (spec §3.4).
  auto checked = check_snapshot(state.spec, cmd.faults, state.ranks.get());
  if (!checked)
    return checked.error();
  const auto& hs = checked->health_state;
  const auto& kept = checked->kept;
  decision result;
  result.ignored = std::move(checked->ignored);
  // The fault center repeats its snapshot about every second; only a change
  // is worth an event.
  if (hs != state.health_state || !same_faults(kept, state.device_faults))
    result.events.emplace_back(device_faults_reported{hs, kept});
  else
    return result;
  if (!cmd.then || !state.registered)
    return result;
  // Reference §4.1: new faults start, join or pre-empt a flow. The step
  // sees the new snapshot, as it would once the snapshot is applied (the
  // snapshot event changes no part of the machine's state).
  auto [name, fresh] = fault_center_input(state.rec, state.spec, state.init,
                                          state.device_faults, kept, hs,
                                          state.ranks.get(),
                                          state.health_state);
  if (name == ev::none)
    return result;
  auto in = *cmd.then;
  in.name = name;
  in.faults = std::move(fresh);
  auto e = decide_step(state, in, cmd.waits, kept);
  // A step the machine refuses leaves the snapshot recorded on its own.
  if (e && *e)
    result.events.emplace_back(std::move(**e));
  return result;
}

expected<decision> decide_init(const job_model& state, const init_cmd& cmd) {
  const auto& id = cmd.client.job_id;
  if (state.inited)
    return decision{{}, {0, "job(uid=" + id + ") init success"}};
  if (!state.spec.process_recover_enable
      && state.spec.sub_healthy_strategy != "hotSwitch")
    return decision{{},
                    {403,
                     "job(uid=" + id
                       + ") process-recover-enable and subhealthy "
                         "hotswtich not open:<nil>"}};
  return decision{{job_inited{make_init_config(state.spec), cmd.client.role}},
                  {0, "job(uid=" + id + ") init success"}};
}

expected<decision> decide_register(const job_model& state,
                                   const register_cmd& cmd) {
  if (state.registered)
    return decision{{}, {0, "register success"}};
  if (!state.inited)
    return decision{{}, {408, "jobId=" + cmd.client.job_id + " not inited"}};
  if (cmd.cap_reached)
    return decision{
      {},
      {500,
       "out of max serve jobs, reuse registry for jobId=" + cmd.client.job_id}};
  return decision{{job_registered{cmd.client.role}}, {0, "register success"}};
}

expected<decision> decide_subscribe(const job_model& state,
                                    const subscribe_cmd& cmd) {
  if (!state.registered)
    return fail(errc::not_registered,
                "jobId=" + cmd.client.job_id + " not registed");
  decision result;
  if (cmd.live_generation != 0)
    result.events.emplace_back(
      subscriber_detached{cmd.live_generation, "taken over"});
  result.events.emplace_back(subscriber_attached{
    state.subscriber_generation + 1, cmd.client.role, cmd.client.peer});
  return result;
}

} // namespace

expected<decision> decide(const job_model& state, const command& cmd) {
  return std::visit(
    overload{
      [&](const put_cmd& x) { return decide_put(state, x); },
      [&](const delete_cmd& x) -> expected<decision> {
        decision result;
        if (x.live_generation != 0)
          result.events.emplace_back(
            subscriber_detached{x.live_generation, "job deleted"});
        result.events.emplace_back(job_deleted{});
        return result;
      },
      [&](const annotate_cmd& x) { return decide_annotate(state, x); },
      [&](const faults_cmd& x) { return decide_faults(state, x); },
      [&](const init_cmd& x) { return decide_init(state, x); },
      [&](const register_cmd& x) { return decide_register(state, x); },
      [&](const subscribe_cmd& x) { return decide_subscribe(state, x); },
      [&](const flow_cmd& x) -> expected<decision> {
        if (!state.registered)
          return fail(errc::not_registered,
                      "jobId=" + state.spec.job_id + " not registed");
        decision result;
        auto e = decide_step(state, x.in, x.waits, state.device_faults);
        if (!e)
          return e.error();
        if (*e)
          result.events.emplace_back(std::move(**e));
        return result;
      },
      [&](const detach_cmd& x) -> expected<decision> {
        decision result;
        if (x.generation != 0 && x.generation == x.live_generation)
          result.events.emplace_back(
            subscriber_detached{x.generation, x.reason});
        return result;
      },
    },
    cmd);
}

// -- views --------------------------------------------------------------------

job_status to_status(const job_model& state, bool subscribed) {
  job_status result;
  result.spec = state.spec;
  result.inited = state.inited;
  result.registered = state.registered;
  result.subscribed = subscribed;
  result.recovery_state = to_string(state.rec.flow.state);
  result.process_recover_label = state.rec.job.label;
  result.last_seq = state.seq;
  result.created_at_ms = state.created_at_ms;
  result.updated_at_ms = state.updated_at_ms;
  result.device_faults = state.device_faults;
  result.health_state = state.health_state;
  result.uuid = state.rec.flow.uuid;
  result.reset_json = state.rec.job.reset_json;
  result.reset_check = state.rec.job.reset_check;
  result.last_outcome = state.rec.job.last_outcome;
  result.flows = state.rec.job.flows;
  return result;
}

job_summary to_summary(const job_model& state, bool subscribed) {
  job_summary result;
  result.job_id = state.spec.job_id;
  result.name = state.spec.name;
  result.ns = state.spec.ns;
  result.registered = state.registered;
  result.subscribed = subscribed;
  result.recovery_state = to_string(state.rec.flow.state);
  result.pods = static_cast<int32_t>(state.spec.pods.size());
  result.ranks = ranks_of(state.spec);
  result.last_seq = state.seq;
  for (const auto& [node, since] : state.rec.job.unhealthy_nodes)
    result.unhealthy_nodes.push_back(
      {node, state.spec.job_id, "UnHealthy",
       "stress test found a fault (result code 2)", since});
  return result;
}

int32_t ranks_of(const job_spec& spec) {
  int32_t n = 0;
  for (const auto& p : spec.pods)
    n += static_cast<int32_t>(p.devices.size());
  return n;
}

std::optional<job_digest> to_digest(const job_model& state) {
  if (!state.exists || state.rec.flow.deadline_ms > 0)
    return std::nullopt;
  return job_digest{to_summary(state, false), state.owner};
}

annotations_view to_annotations_view(const job_model& state) {
  return {state.spec.job_id, state.spec.annotations, state.rec.job.label,
          state.seq};
}

} // namespace recoverd
