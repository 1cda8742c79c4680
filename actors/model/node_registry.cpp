#include "actors/model/node_registry.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <string_view>

#include "actors/model/fault_center.hpp"
#include "actors/model/job_model.hpp"

namespace recoverd {

namespace {

// Weights by fault-center level. A level that separates a device is enough
// on its own to reach the default threshold; restarts add up over a few
// faults within a half-life; advisory levels need many.
struct level_weight {
  const char* level;
  double weight;
};

constexpr level_weight level_weights[] = {
  {"ManuallySeparateNPU", 3.0},
  {"SeparateNPU", 3.0},
  {"RestartNPU", 1.0},
  {"FreeRestartNPU", 1.0},
  {"PreSeparateNPU", 1.0},
  {"RestartBusiness", 0.5},
  {"RestartRequest", 0.5},
  {"", 0.5},
  {"SubHealthFault", 0.25},
  {"NotHandleFault", 0.25},
};

constexpr double unknown_level_weight = 0.5;
constexpr double agent_report_weight = 1.0;
constexpr double stress_isolated_weight = 3.0;
constexpr double stress_rank_fault_weight = 1.0;

// Adds `f` to `r`: score, counts, the bounded list of recent faults.
void add_fault(node_record& r, node_fault f, const node_registry_config& cfg) {
  r.score = score_at(r, f.time_ms, cfg) + fault_weight(f);
  r.score_ms = std::max(r.score_ms, f.time_ms);
  r.faults += 1;
  r.last_fault_ms = std::max(r.last_fault_ms, f.time_ms);
  r.last_job_id = f.job_id;
  r.recent.push_back(std::move(f));
  while (r.recent.size() > cfg.max_recent_faults)
    r.recent.pop_front();
}

// Whether `score` reaches the threshold. Faults seconds apart must add up to
// their sum: three chip restarts within a minute reach a threshold of 3 even
// though the first two decayed a little meanwhile. So a score within 0.1% of
// the threshold reaches it (0.1% is what a half-life of 1 h takes off in 5 s).
bool reaches(double score, const node_registry_config& cfg) {
  return score >= cfg.quarantine_score * (1 - 1e-3);
}

void quarantine(node_record& r, quarantine_reason why, int64_t now_ms) {
  // The first reason stays: a node a stress test isolated is still listed
  // as such when its score crosses the threshold too.
  if (r.quarantined())
    return;
  r.reason = why;
  r.since_ms = now_ms;
}

struct applier {
  node_table& reg;

  void operator()(const node_fault_seen& x) {
    auto& r = reg.nodes[x.node];
    add_fault(r, x.fault, reg.cfg);
    if (reaches(r.score, reg.cfg))
      quarantine(r, quarantine_reason::score, x.fault.time_ms);
  }

  void operator()(const node_stress_verdict& x) {
    auto& r = reg.nodes[x.node];
    r.stress_tests += 1;
    if (x.failed) {
      r.stress_failures += 1;
      node_fault f;
      f.source = node_fault_source::stress_test;
      f.job_id = x.job_id;
      f.codes = {x.code};
      f.level = x.isolated ? "isolated" : "";
      f.time_ms = x.time_ms;
      add_fault(r, std::move(f), reg.cfg);
    }
    if (x.isolated)
      quarantine(r, quarantine_reason::stress_test, x.time_ms);
    else if (reaches(r.score, reg.cfg))
      quarantine(r, quarantine_reason::score, x.time_ms);
  }

  void operator()(const node_cleared& x) {
    auto i = reg.nodes.find(x.node);
    if (i == reg.nodes.end())
      return;
    auto& r = i->second;
    r.reason = quarantine_reason::none;
    r.since_ms = 0;
    r.score = 0;
    r.score_ms = x.time_ms;
    r.cleared_ms = x.time_ms;
    r.cleared_by = x.by;
  }
};

// The value of `all` whose name is `x`, if any.
template <class Enum>
std::optional<Enum> parse_name(const std::string& x,
                               std::initializer_list<Enum> all) {
  for (auto e : all)
    if (x == to_string(e))
      return e;
  return std::nullopt;
}

} // namespace

const char* to_string(node_fault_source x) {
  switch (x) {
    case node_fault_source::agent_report:
      return "agent-report";
    case node_fault_source::fault_center:
      return "fault-center";
    case node_fault_source::stress_test:
      return "stress-test";
  }
  return "agent-report";
}

std::optional<node_fault_source> node_fault_source_from(const std::string& x) {
  return parse_name(x, {node_fault_source::agent_report,
                        node_fault_source::fault_center,
                        node_fault_source::stress_test});
}

const char* to_string(quarantine_reason x) {
  switch (x) {
    case quarantine_reason::none:
      return "";
    case quarantine_reason::stress_test:
      return "stress-test";
    case quarantine_reason::score:
      return "score";
  }
  return "";
}

std::optional<quarantine_reason> quarantine_reason_from(const std::string& x) {
  return parse_name(x, {quarantine_reason::none, quarantine_reason::stress_test,
                        quarantine_reason::score});
}

int64_t time_of(const node_event& e) {
  struct {
    int64_t operator()(const node_fault_seen& x) const {
      return x.fault.time_ms;
    }
    int64_t operator()(const node_stress_verdict& x) const {
      return x.time_ms;
    }
    int64_t operator()(const node_cleared& x) const {
      return x.time_ms;
    }
  } f;
  return std::visit(f, e);
}

const std::string& node_of(const node_event& e) {
  return std::visit([](const auto& x) -> const std::string& { return x.node; },
                    e);
}

failure validate(const node_registry_config& cfg) {
  if (cfg.half_life_ms <= 0)
    return {errc::invalid_argument,
            "node-score-half-life: must be above 0"};
  if (!(cfg.quarantine_score > 0) || !std::isfinite(cfg.quarantine_score))
    return {errc::invalid_argument,
            "node-quarantine-score: must be a number above 0"};
  if (cfg.max_recent_faults == 0)
    return {errc::invalid_argument, "max_recent_faults: must be above 0"};
  return {};
}

double fault_weight(const node_fault& f) {
  switch (f.source) {
    case node_fault_source::agent_report:
      return agent_report_weight;
    case node_fault_source::stress_test:
      return f.level == "isolated" ? stress_isolated_weight
                                   : stress_rank_fault_weight;
    case node_fault_source::fault_center:
      break;
  }
  for (const auto& x : level_weights)
    if (f.level == x.level)
      return x.weight;
  return unknown_level_weight;
}

double score_at(const node_record& r, int64_t now_ms,
                const node_registry_config& cfg) {
  // Events that arrive a little out of order (two jobs' commits) do not
  // grow the score backwards in time.
  auto elapsed = std::max<int64_t>(0, now_ms - r.score_ms);
  return r.score
    * std::exp2(-static_cast<double>(elapsed)
                / static_cast<double>(cfg.half_life_ms));
}

node_table apply(node_table reg, const node_event& e) {
  if (node_of(e).empty())
    return reg;
  std::visit(applier{reg}, e);
  return reg;
}

namespace {

bool same_entry(const device_fault& x, const device_fault& y) {
  return x.node_name == y.node_name && x.device_id == y.device_id
    && x.fault_codes == y.fault_codes && x.fault_level == y.fault_level;
}

// Where global rank `rank` sits in `m` and its pod, or no pod when the
// job has no such rank.
std::pair<const rank_place*, const pod*>
pod_of_rank(const job_model& m, const rank_index& ranks,
            const std::string& rank) {
  const auto* place = ranks.find(rank);
  if (place == nullptr || place->pod_index >= m.spec.pods.size())
    return {place, nullptr};
  return {place, &m.spec.pods[place->pod_index]};
}

void observe_fault_center(const job_model& before, const event& ev,
                          const device_faults_reported& x,
                          std::vector<node_observation>& out) {
  for (const auto& f : x.faults) {
    if (f.node_name.empty() || classify_level(f.fault_level)
                                 == level_class::no_fault)
      continue;
    // A fault center reports the job's whole current view each time: only
    // entries new to the job are new faults.
    auto known = std::any_of(before.device_faults.begin(),
                             before.device_faults.end(),
                             [&](const auto& y) { return same_entry(f, y); });
    if (known)
      continue;
    node_fault nf;
    nf.source = node_fault_source::fault_center;
    nf.job_id = before.spec.job_id;
    nf.device = f.device_id;
    nf.codes = f.fault_codes;
    nf.level = f.fault_level;
    nf.time_ms = ev.time_ms;
    out.emplace_back(node_fault_seen{f.node_name, std::move(nf)});
  }
}

void observe_agent_faults(const job_model& before, const rank_index& ranks,
                          const event& ev, const flow_input& in,
                          std::vector<node_observation>& out) {
  // A report names a rank or a few: a list, not a tree, of those seen.
  std::vector<std::string_view> named;
  for (const auto& f : in.faults) {
    // A rank the running flow already holds as faulted is the same fault
    // reported again (agents repeat reports; every rank of a pod reports
    // it): it counts once per flow.
    if (before.rec.flow.faults.count(f.rank_id) != 0
        || std::find(named.begin(), named.end(), f.rank_id) != named.end())
      continue;
    named.emplace_back(f.rank_id);
    auto [place, p] = pod_of_rank(before, ranks, f.rank_id);
    if (p == nullptr || p->node_name.empty())
      continue;
    node_fault nf;
    nf.source = node_fault_source::agent_report;
    nf.job_id = before.spec.job_id;
    nf.device = p->devices[place->device_index].device_id;
    nf.codes = {f.fault_type};
    nf.time_ms = ev.time_ms;
    out.emplace_back(node_fault_seen{p->node_name, std::move(nf)});
  }
}

void observe_stress(const job_model& before, const rank_index& ranks,
                    const event& ev, const flow_input& in,
                    std::vector<node_observation>& out) {
  // Worst code per node: "2" isolates, "3" and "4" are rank faults.
  std::map<std::string, std::string> worst;
  for (const auto& [rank, ops] : in.stress_result) {
    auto p = pod_of_rank(before, ranks, rank).second;
    if (p == nullptr || p->node_name.empty())
      continue;
    auto& w = worst[p->node_name];
    if (w.empty())
      w = "0";
    for (const auto& entry : ops) {
      const auto& code = entry.second.code;
      if (code == "2" || (w != "2" && code > w))
        w = code;
    }
  }
  for (auto& [node, code] : worst) {
    node_stress_verdict v;
    v.node = node;
    v.job_id = before.spec.job_id;
    v.isolated = code == "2";
    v.failed = code == "2" || code == "3" || code == "4";
    v.code = code;
    v.time_ms = ev.time_ms;
    out.emplace_back(std::move(v));
  }
}

} // namespace

std::vector<node_observation> observe(const job_model& before,
                                      const event& ev) {
  std::vector<node_observation> result;
  if (const auto* x = std::get_if<device_faults_reported>(&ev.body)) {
    observe_fault_center(before, ev, *x, result);
    return result;
  }
  const auto* x = std::get_if<flow_stepped>(&ev.body);
  if (x == nullptr)
    return result;
  const auto& in = x->input;
  bool agent = in.kind == report_kind::process && !in.faults.empty();
  bool stress = in.kind == report_kind::stress && !in.stress_result.empty();
  if (!agent && !stress)
    return result;
  auto ranks = before.ranks ? before.ranks : make_rank_index(before.spec);
  if (agent)
    observe_agent_faults(before, *ranks, ev, in, result);
  if (stress)
    observe_stress(before, *ranks, ev, in, result);
  return result;
}

std::vector<node_event> decide(const node_table&,
                               std::vector<node_observation> xs) {
  std::vector<node_event> result;
  result.reserve(xs.size());
  for (auto& x : xs)
    std::visit(
      [&](auto& y) {
        if (!y.node.empty())
          result.emplace_back(std::move(y));
      },
      x);
  return result;
}

std::optional<node_event> decide_clear(const node_table& reg,
                                       const std::string& node,
                                       const std::string& by, int64_t now_ms) {
  auto i = reg.nodes.find(node);
  if (i == reg.nodes.end()
      || (!i->second.quarantined() && score_at(i->second, now_ms, reg.cfg) <= 0))
    return std::nullopt;
  return node_event{node_cleared{node, by, now_ms}};
}

node_listing list(const node_table& reg, int64_t now_ms,
                  bool quarantined_only) {
  node_listing result;
  result.threshold = reg.cfg.quarantine_score;
  result.half_life_ms = reg.cfg.half_life_ms;
  for (const auto& [name, r] : reg.nodes) {
    if (quarantined_only && !r.quarantined())
      continue;
    node_view v;
    v.node = name;
    v.score = score_at(r, now_ms, reg.cfg);
    v.faults = r.faults;
    v.stress_failures = r.stress_failures;
    v.last_fault_ms = r.last_fault_ms;
    v.last_job_id = r.last_job_id;
    v.reason = r.reason;
    v.since_ms = r.since_ms;
    result.nodes.push_back(std::move(v));
  }
  return result;
}

node_counts count(const node_table& reg) {
  node_counts result;
  result.tracked = reg.nodes.size();
  for (const auto& entry : reg.nodes)
    result.quarantined += entry.second.quarantined() ? 1 : 0;
  return result;
}

} // namespace recoverd
