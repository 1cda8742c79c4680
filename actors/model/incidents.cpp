#include "actors/model/incidents.hpp"

#include <algorithm>
#include <cctype>

#include "actors/model/overload.hpp"

namespace recoverd {

namespace {

bool is_idle(flow_state state) {
  return state == st::init;
}

const char* text_of(const std::string& x) {
  return x.c_str();
}

const char* text_of(flow_state x) {
  return to_string(x);
}

template <class Xs>
std::string join(const Xs& xs, const char* sep) {
  std::string result;
  for (const auto& x : xs) {
    if (!result.empty())
      result += sep;
    result += text_of(x);
  }
  return result;
}

std::string fault_list(const std::vector<fault_rank>& xs) {
  std::vector<std::string> parts;
  for (const auto& f : xs)
    parts.push_back(f.rank_id + ":" + f.fault_type);
  return join(parts, ",");
}

std::string signal_text(const process_signal& sig) {
  auto result = sig.signal_type;
  if (!sig.change_strategy.empty())
    result += " " + sig.change_strategy;
  return result;
}

std::string describe_step(const flow_stepped& x) {
  std::string result = to_string(x.input.name);
  // "process" only marks a ReportProcessFault; its faults follow below.
  if (x.input.kind != report_kind::none
      && x.input.kind != report_kind::process) {
    result += " ";
    result += to_string(x.input.kind);
    if (x.input.kind != report_kind::strategy)
      result += " (code " + std::to_string(x.input.report.code)
        + (x.input.report.strategy.empty() ? "" : " " + x.input.report.strategy)
        + ")";
  }
  result += ": ";
  if (x.path.size() > 1)
    result += join(x.path, " -> ");
  else if (!x.path.empty())
    result += std::string{"stays in "} + to_string(x.path.front());
  if (!x.input.faults.empty())
    result += "; faults " + fault_list(x.input.faults);
  if (!x.input.strategies.empty())
    result += "; strategies " + join(x.input.strategies, ",");
  if (!x.input.switch_ranks.empty())
    result += "; switch ranks " + join(x.input.switch_ranks, ",");
  if (x.input.delivered)
    result += "; delivered " + signal_text(*x.input.delivered);
  const auto& next = x.change.values.flow.outbox;
  if (x.change.replaces(recovery_field::outbox) && next)
    result += "; to send " + signal_text(*next);
  for (const auto& sig : x.side_signals)
    result += "; sent " + signal_text(sig);
  for (const auto& [key, value] : x.annotations)
    result += "; annotation " + key + "=" + value;
  for (const auto& key : x.removed_annotations)
    result += "; removed annotation " + key;
  for (const auto& msg : x.om_messages)
    result += "; operator: " + msg;
  if (x.path.size() > 1 && is_idle(x.path.back()))
    result += "; outcome " + x.change.values.job.last_outcome;
  return result;
}

// Ranks in numeric order ("9" before "10").
bool rank_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// A fault type's readable name ("1" -> "normal").
std::string fault_type_name(const std::string& wire) {
  auto x = fault_type_from_string(wire);
  if (!x)
    return wire;
  switch (*x) {
    case fault_type::uce:
      return "uce";
    case fault_type::normal:
      return "normal";
    case fault_type::network:
      return "network";
  }
  return wire;
}

} // namespace

std::map<std::string, int64_t> incident::lost_by_phase() const {
  std::map<std::string, int64_t> result;
  for (const auto& p : phases)
    result[p.name] += p.duration_ms;
  return result;
}

const incident_phase* incident::phase(const std::string& name) const {
  for (const auto& p : phases)
    if (p.name == name)
      return &p;
  return nullptr;
}

std::string flow_kind(const flow_stepped& x, om_kind om) {
  if (x.input.name == ev::start_switch_nic)
    return "switch";
  std::string lower = to_string(x.input.name);
  std::transform(
    lower.begin(), lower.end(), lower.begin(),
    [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.find("stress") != std::string::npos)
    return "stress";
  if (om != om_kind::none)
    return to_string(om);
  return "recovery";
}

job_history::job_history(size_t keep) : keep_(keep) {
  // nop
}

job_history::job_history(fold_state s, size_t keep)
  : keep_(keep), s_(std::move(s)) {
  while (s_.finished.size() > keep_)
    s_.finished.pop_front();
}

void job_history::follow(const recovery_delta& d) {
  const auto& v = d.values;
  if (d.replaces(recovery_field::uuid))
    s_.facts.uuid = v.flow.uuid;
  if (d.replaces(recovery_field::decided))
    s_.facts.decided = v.flow.decided;
  if (d.replaces(recovery_field::om_kind))
    s_.facts.om = v.action.kind;
  if (d.replaces(recovery_field::last_outcome))
    s_.facts.last_outcome = v.job.last_outcome;
}

void job_history::reach(const event& ev, const char* name) {
  auto& x = *s_.active;
  if (x.phase(name) != nullptr)
    return;
  incident_phase p;
  p.name = name;
  p.seq = ev.seq;
  p.time_ms = ev.time_ms;
  p.since_start_ms = ev.time_ms - x.started_ms;
  auto previous = x.phases.empty() ? x.started_ms : x.phases.back().time_ms;
  p.duration_ms = ev.time_ms - previous;
  x.phases.push_back(std::move(p));
}

void job_history::open(const event& ev, const flow_stepped& x) {
  incident i;
  i.kind = flow_kind(x, s_.facts.om);
  i.first_seq = ev.seq;
  i.started_ms = ev.time_ms;
  s_.active = std::move(i);
  reach(ev, s_.active->kind == "recovery" ? "fault_seen" : "requested");
  attribute(ev, x);
}

void job_history::attribute(const event&, const flow_stepped& x) {
  auto& a = s_.active->attribution;
  // Places `a` at `rank`'s node and device, if the topology has the rank.
  auto place = [&](const std::string& rank) {
    auto i = s_.places.find(rank);
    if (i == s_.places.end())
      return false;
    a.node = i->second.first;
    a.device = i->second.second;
    return true;
  };
  std::vector<std::string> ranks;
  for (const auto& f : x.input.faults)
    ranks.push_back(f.rank_id);
  std::sort(ranks.begin(), ranks.end(), rank_less);
  if (x.input.kind == report_kind::process) {
    a.source = cause::agent_report;
    if (!ranks.empty())
      place(ranks.front());
    if (!x.input.faults.empty())
      a.level = fault_type_name(x.input.faults.front().fault_type);
    return;
  }
  if (x.input.name == ev::start_stress_test) {
    a.source = cause::stress_test;
    // A stress test runs on whole nodes.
    if (!x.input.stress_params.empty() && place(x.input.stress_params.begin()->first))
      a.device.clear();
    return;
  }
  if (x.input.name == ev::start_switch_nic) {
    a.source = cause::operator_request;
    if (!x.input.switch_ranks.empty())
      place(x.input.switch_ranks.front());
    return;
  }
  if (!s_.snapshot) {
    a.source = cause::other;
    if (!ranks.empty())
      place(ranks.front());
    return;
  }
  // The fault center's snapshot was decided together with this step: the
  // snapshot's faults on the step's ranks started it (its first fault when
  // the topology does not say which).
  a.source = cause::fault_center;
  std::vector<const device_fault*> matched;
  for (const auto& f : s_.snapshot->faults)
    for (const auto& r : ranks) {
      auto i = s_.places.find(r);
      if (i != s_.places.end() && i->second.first == f.node_name
          && (f.device_id.empty() || f.device_id == i->second.second)) {
        matched.push_back(&f);
        break;
      }
    }
  if (matched.empty() && !s_.snapshot->faults.empty())
    matched.push_back(&s_.snapshot->faults.front());
  if (matched.empty())
    return;
  a.node = matched.front()->node_name;
  a.device = matched.front()->device_id;
  a.level = matched.front()->fault_level;
  for (const auto* f : matched)
    a.codes.insert(a.codes.end(), f->fault_codes.begin(),
                   f->fault_codes.end());
  std::sort(a.codes.begin(), a.codes.end());
  a.codes.erase(std::unique(a.codes.begin(), a.codes.end()), a.codes.end());
}

void job_history::update(const event& ev, const flow_stepped& x,
                         bool milestones) {
  auto& i = *s_.active;
  ++i.steps;
  i.last_seq = ev.seq;
  i.last_time_ms = ev.time_ms;
  i.state = to_string(x.path.empty() ? st::init : x.path.back());
  if (i.uuid.empty())
    i.uuid = s_.facts.uuid;
  auto add_rank = [&](const std::string& rank) {
    if (std::find(i.fault_ranks.begin(), i.fault_ranks.end(), rank)
        == i.fault_ranks.end())
      i.fault_ranks.push_back(rank);
  };
  for (const auto& f : x.input.faults)
    add_rank(f.rank_id);
  // The fault cache only grows during a flow: the ranks a step adds are
  // the ranks it names.
  if (x.change.replaces(recovery_field::faults))
    for (const auto& entry : x.change.values.flow.faults)
      add_rank(entry.first);
  for (const auto& entry : x.change.faults_set)
    add_rank(entry.first);
  // Ranks in numeric order ("9" before "10").
  std::sort(i.fault_ranks.begin(), i.fault_ranks.end(), rank_less);
  // What the operator was told last (a stress result is not final: the
  // training continues after it).
  if (!x.om_messages.empty())
    i.operator_result = x.om_messages.back();
  if (!milestones)
    return;
  // Strategies decided in this step: `decided` only grows during a flow.
  const auto& decided = s_.facts.decided;
  if (decided.size() > i.strategies.size()) {
    for (auto k = i.strategies.size(); k < decided.size(); ++k)
      i.strategies.push_back(decided[k]);
    i.strategy = i.strategies.back();
    reach(ev, "strategy_decided");
  }
  if (x.input.name == ev::receive_report && x.input.kind == report_kind::stop)
    reach(ev, "stop_acknowledged");
  if (x.input.name == ev::receive_report
      && x.input.kind == report_kind::switch_nic)
    reach(ev, "switch_reported");
  if (x.input.name == ev::receive_report && x.input.kind == report_kind::stress)
    reach(ev, "stress_reported");
}

void job_history::close(const event& ev, std::string outcome) {
  auto& i = *s_.active;
  i.last_seq = ev.seq;
  i.last_time_ms = ev.time_ms;
  i.ended_ms = ev.time_ms;
  i.active = false;
  i.outcome = std::move(outcome);
  reach(ev, "result");
  ++s_.counts[{i.kind, i.strategy, i.outcome}];
  s_.tally.add(i);
  s_.finished.push_back(std::move(i));
  s_.active.reset();
  while (s_.finished.size() > keep_)
    s_.finished.pop_front();
}

void job_history::add(const event& ev) {
  s_.seq = ev.seq;
  s_.last_time_ms = std::max(s_.last_time_ms, ev.time_ms);
  // A snapshot only attributes the step decided together with it, which
  // is the next event.
  if (const auto* x = std::get_if<device_faults_reported>(&ev.body)) {
    s_.snapshot = *x;
    return;
  }
  fold(ev);
  s_.snapshot.reset();
}

void job_history::fold(const event& ev) {
  if (const auto* x = std::get_if<flow_stepped>(&ev.body)) {
    follow(x->change);
    const auto& path = x->path;
    // `applied`: the step's details went to the running flow already;
    // `closed_here`: a flow ended earlier in this step.
    bool applied = false;
    bool closed_here = false;
    for (size_t k = 1; k < path.size(); ++k) {
      const auto& from = path[k - 1];
      const auto& to = path[k];
      if (is_idle(from) && !is_idle(to)) {
        if (s_.active)
          close(ev, "interrupted");
        open(ev, *x);
        // Milestones of this step belong to the flow that ended earlier in
        // it, if one did; a flow begun after that only starts.
        update(ev, *x, !closed_here);
        applied = true;
      } else if (is_idle(to) && !is_idle(from) && s_.active) {
        if (!applied)
          update(ev, *x, true);
        applied = true;
        std::string outcome;
        if (k + 1 == path.size()) {
          outcome = s_.facts.last_outcome;
          // A link switch that ended without any recovery strategy ends
          // with what the operator was told.
          if (s_.active->kind != "recovery" && s_.active->strategies.empty()
              && !s_.active->operator_result.empty())
            outcome = s_.active->operator_result;
        } else {
          outcome = s_.active->operator_result.empty()
            ? std::string{"ended"}
            : s_.active->operator_result;
        }
        close(ev, outcome.empty() ? std::string{"ended"} : std::move(outcome));
        applied = false;
        closed_here = true;
      }
    }
    if (s_.active && !applied)
      update(ev, *x, true);
    return;
  }
  if (const auto* x = std::get_if<job_put>(&ev.body)) {
    if (x->created && s_.active)
      close(ev, "job re-created");
    if (x->created)
      s_.registered = false;
    // A re-created job begins a new life; the old one was observed until
    // now.
    if (x->created && s_.exists)
      s_.observed_ms += std::max<int64_t>(ev.time_ms - s_.life_started_ms, 0);
    if (x->created || !s_.exists)
      s_.life_started_ms = ev.time_ms;
    s_.exists = true;
    s_.places.clear();
    for (const auto& p : x->spec.pods)
      for (const auto& d : p.devices)
        s_.places[d.rank_id] = {p.node_name, d.device_id};
    return;
  }
  if (std::holds_alternative<job_deleted>(ev.body)) {
    if (s_.active)
      close(ev, "job deleted");
    if (s_.exists)
      s_.observed_ms += std::max<int64_t>(ev.time_ms - s_.life_started_ms, 0);
    // A deleted job's history outlives it: only its sums are worth keeping.
    s_.places.clear();
    s_.exists = false;
    s_.registered = false;
    return;
  }
  if (std::holds_alternative<job_registered>(ev.body)) {
    s_.registered = true;
    return;
  }
  if (const auto* x = std::get_if<subscriber_attached>(&ev.body)) {
    s_.subscription = {x->generation, x->role, x->peer, ev.time_ms};
    return;
  }
}

std::vector<incident> job_history::all() const {
  std::vector<incident> result{s_.finished.begin(), s_.finished.end()};
  if (s_.active)
    result.push_back(*s_.active);
  return result;
}

goodput_figures job_history::figures(int64_t now_ms) const {
  now_ms = std::max(now_ms, s_.last_time_ms);
  goodput_figures result;
  result.incidents = s_.tally.incidents;
  result.recoveries = s_.tally.recoveries;
  result.recovery_lost_ms = s_.tally.recovery_lost_ms;
  result.time_lost_ms = s_.tally.lost_ms;
  result.by_cause = s_.tally.by_cause;
  if (s_.active) {
    ++result.incidents;
    ++result.active;
    result.time_lost_ms += now_ms - s_.active->started_ms;
    ++result.by_cause[cause_label(s_.active->attribution.source)];
  }
  result.observed_ms = s_.observed_ms;
  if (s_.exists)
    result.observed_ms += std::max<int64_t>(now_ms - s_.life_started_ms, 0);
  result.finish();
  return result;
}

void job_history::add_kept(const incident& x) {
  ++s_.counts[{x.kind, x.strategy, x.outcome}];
  s_.tally.add(x);
}

std::vector<incident> build_incidents(const std::vector<event>& evs) {
  job_history h;
  for (const auto& ev : evs)
    h.add(ev);
  return h.all();
}

std::string describe(const event& ev) {
  return std::visit(
    overload{
      [](const job_put& x) {
        return std::string{x.created ? "job created" : "job updated"} + ": "
          + std::to_string(x.spec.pods.size()) + " pods, "
          + std::to_string(ranks_of(x.spec)) + " ranks"
          + (x.spec.recover_strategies.empty()
               ? std::string{}
               : ", strategies " + join(x.spec.recover_strategies, ","));
      },
      [](const job_deleted&) { return std::string{"job deleted"}; },
      [](const annotations_changed& x) {
        std::string result = "annotations by " + x.by + ":";
        for (const auto& [key, value] : x.set)
          result += " " + key + "=" + value;
        for (const auto& key : x.removed)
          result += " " + key + "-";
        return result;
      },
      [](const job_inited& x) {
        return "Init by " + (x.role.empty() ? std::string{"agent"} : x.role)
          + ": strategies " + join(x.config.strategies, ",")
          + (x.config.platform_mode ? ", platform mode" : "");
      },
      [](const job_registered& x) {
        return "Register by "
          + (x.role.empty() ? std::string{"agent"} : x.role);
      },
      [](const subscriber_attached& x) {
        return "agent stream #" + std::to_string(x.generation) + " attached ("
          + (x.role.empty() ? std::string{"-"} : x.role) + " at " + x.peer
          + ")";
      },
      [](const subscriber_detached& x) {
        return "agent stream #" + std::to_string(x.generation)
          + " detached: " + x.reason;
      },
      [](const device_faults_reported& x) {
        std::string result = "fault center: " + x.health_state + ", "
          + std::to_string(x.faults.size()) + " device faults";
        for (const auto& f : x.faults)
          result += " " + f.node_name + "/"
            + (f.device_id.empty() ? std::string{"*"} : f.device_id) + ":"
            + join(f.fault_codes, "+");
        return result;
      },
      [](const flow_stepped& x) { return describe_step(x); },
      // Event kinds added later still get their kind name.
      [](const auto&) { return std::string{}; },
    },
    ev.body);
}

} // namespace recoverd
