// What the machines share: topology and configuration predicates and the
// context entry actions work on.

#include "actors/model/machines/machine.hpp"

#include <algorithm>
#include <set>

#include "actors/model/reset_document.hpp"

namespace recoverd::machines {

namespace {

bool contains_strategy(const init_config& init, const std::string& s) {
  return contains(init.strategies, s);
}

bool platform_allows(const job_spec& spec, const init_config& init,
                     const std::string& s) {
  return !init.platform_mode || platform_strategy(spec) == s;
}

std::vector<std::string> decimal(const std::set<int32_t>& xs) {
  std::vector<std::string> result;
  result.reserve(xs.size());
  for (auto x : xs)
    result.push_back(std::to_string(x));
  return result;
}

} // namespace

// -- predicates ---------------------------------------------------------------

bool job_running(const job_spec& spec) {
  return !spec.pods.empty()
    && std::all_of(spec.pods.begin(), spec.pods.end(),
                   [](const pod& p) { return p.running; });
}

int64_t rank_number(const std::string& rank) {
  return std::stoll(rank);
}

bool rank_less(const std::string& x, const std::string& y) {
  return rank_number(x) < rank_number(y);
}

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

std::string platform_strategy(const job_spec& spec) {
  auto i = spec.annotations.find("ProcessRecoverStrategy");
  if (i == spec.annotations.end())
    return {};
  std::string result;
  for (auto c : i->second)
    if (c != ' ' && c != ',')
      result.push_back(c);
  return result;
}

bool usable_platform_strategy(const std::string& plat) {
  return plat == "retry" || plat == "recover" || plat == "dump"
    || plat == "exit";
}

bool supports_retry(const job_spec& spec, const init_config& init) {
  return contains_strategy(init, "retry")
    && platform_allows(spec, init, "retry");
}

bool is_dump_only(const job_spec& spec, const init_config& init) {
  if (!init.process_recover_enable)
    return false;
  if (init.platform_mode)
    return platform_strategy(spec) == "dump" && contains_strategy(init, "dump");
  return !init.strategies.empty() && init.strategies.front() == "dump";
}

std::string go_list(const std::vector<std::string>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i > 0 ? " " : "") + xs[i];
  return out + "]";
}

// -- ctx ----------------------------------------------------------------------

bool ctx::configured(const std::string& s) const {
  return contains_strategy(init, s);
}

bool ctx::agent(const std::string& s) const {
  return contains(rec.flow.agent_strategies, s);
}

std::string ctx::plat() const {
  return platform_strategy(spec);
}

bool ctx::plat_allows(const std::string& s) const {
  return platform_allows(spec, init, s);
}

bool ctx::support_retry() const {
  return supports_retry(spec, init);
}

bool ctx::support_recover() const {
  return configured("recover") && agent("recover") && plat_allows("recover");
}

bool ctx::support_restart_in_place() const {
  return rec.flow.restart_in_place && configured("recover-in-place")
    && agent("recover") && plat_allows("recover");
}

bool ctx::support_dump() const {
  return configured("dump") && agent("dump") && plat_allows("dump");
}

bool ctx::dump_only() const {
  return is_dump_only(spec, init);
}

// With job or pod rescheduling configured, scale-in is taken only while the
// fault pods have not been rescheduled (the reference waits up to 20 s for
// that first).
bool ctx::can_scale_in() const {
  if (rec.flow.fault_pods.count(0) > 0 || !configured("elastic-training")
      || !agent("downgrade"))
    return false;
  if (!configured("job-rescheduling") && !configured("pod-rescheduling"))
    return true;
  return !pods_rescheduled();
}

std::vector<std::string> ctx::must_exit_pods() const {
  std::vector<std::string> result;
  for (const auto& p : pods_of(fault_list(true)))
    if (!rec.flow.restart_in_place
        || rec.flow.in_place_pods.count(std::stoi(p)) == 0)
      result.push_back(p);
  return result;
}

std::vector<std::string> ctx::exit_node_ranks() const {
  auto result = must_exit_pods();
  result.erase(std::remove_if(result.begin(), result.end(),
                              [this](const std::string& p) {
                                return replaced(std::stoi(p));
                              }),
               result.end());
  return result;
}

bool ctx::replaced(int32_t p) const {
  auto origin = rec.flow.origin_uids.find(p);
  if (origin == rec.flow.origin_uids.end())
    return false;
  const auto* q = ranks.find_pod(spec, p);
  return q != nullptr && q->uid != origin->second;
}

std::vector<std::string> ctx::in_place_pod_list() const {
  return decimal(rec.flow.in_place_pods);
}

std::vector<std::string> ctx::ranks_of(bool normal) const {
  std::vector<std::string> result;
  for (const auto& [rank, type] : rec.flow.faults)
    if ((type == fault_type::normal) == normal)
      result.push_back(rank);
  std::sort(result.begin(), result.end(), rank_less);
  return result;
}

bool ctx::has_normal() const {
  return std::any_of(
    rec.flow.faults.begin(), rec.flow.faults.end(),
    [](const auto& x) { return x.second == fault_type::normal; });
}

bool ctx::has_retry() const {
  return std::any_of(
    rec.flow.faults.begin(), rec.flow.faults.end(),
    [](const auto& x) { return x.second != fault_type::normal; });
}

std::vector<fault_rank> ctx::fault_list(bool normal) const {
  std::vector<fault_rank> result;
  for (const auto& r : ranks_of(normal))
    result.push_back({r, to_string(rec.flow.faults.at(r))});
  return result;
}

std::vector<fault_rank> ctx::all_faults() const {
  std::vector<std::string> ranks;
  ranks.reserve(rec.flow.faults.size());
  for (const auto& [rank, type] : rec.flow.faults)
    ranks.push_back(rank);
  std::sort(ranks.begin(), ranks.end(), rank_less);
  std::vector<fault_rank> result;
  result.reserve(ranks.size());
  for (const auto& r : ranks)
    result.push_back({r, to_string(rec.flow.faults.at(r))});
  return result;
}

std::vector<std::string>
ctx::pods_of(const std::vector<fault_rank>& faults) const {
  std::set<int32_t> pods;
  for (const auto& f : faults)
    if (const auto* place = ranks.find(f.rank_id))
      pods.insert(place->pod_rank);
  return decimal(pods);
}

std::vector<std::string> ctx::fault_pod_list() const {
  return decimal(rec.flow.fault_pods);
}

void ctx::retry_to_normal() {
  for (auto& [rank, type] : rec.flow.faults)
    type = fault_type::normal;
}

void ctx::expand_normal() {
  std::set<int32_t> pods;
  for (const auto& [rank, type] : rec.flow.faults)
    if (type == fault_type::normal)
      if (const auto* place = ranks.find(rank))
        pods.insert(place->pod_rank);
  for (auto p : pods) {
    add_fault_pod(p);
    if (rec.flow.restart_in_place && rec.flow.in_place_pods.count(p) > 0)
      continue;
    if (const auto* q = ranks.find_pod(spec, p))
      for (const auto& d : q->devices)
        rec.flow.faults[d.rank_id] = fault_type::normal;
  }
}

void ctx::write_reset(const std::string& op) {
  bool restart = rec.flow.restart_in_place;
  std::vector<int64_t> numbers;
  if (op == "fault")
    for (const auto& r : ranks_of(true))
      numbers.push_back(rank_number(r));
  if (op == "restartAllProcess")
    ++rec.job.retry_time;
  rec.job.reset_json = reset_document(op, numbers, in.now_ms / 1000,
                                      rec.job.retry_time, restart);
  rec.job.reset_check = sha256_hex(rec.job.reset_json);
}

merge_plan plan_merge(const flow_part& flow, const rank_index& ranks,
                      const std::vector<fault_rank>& faults) {
  merge_plan plan;
  for (const auto& f : faults) {
    auto type
      = fault_type_from_string(f.fault_type).value_or(fault_type::normal);
    auto normal = type == fault_type::normal;
    if (auto i = plan.set.find(f.rank_id); i != plan.set.end()) {
      if (normal)
        i->second = type;
    } else if (auto j = flow.faults.find(f.rank_id); j == flow.faults.end()) {
      plan.set.emplace(f.rank_id, type);
    } else if (normal && j->second != type) {
      plan.set.emplace(f.rank_id, type);
    }
    plan.unhealthy = plan.unhealthy || normal;
    if (const auto* place = ranks.find(f.rank_id))
      plan.pods.insert(place->pod_rank);
  }
  return plan;
}

void ctx::merge(const std::vector<fault_rank>& faults) {
  auto plan = plan_merge(rec.flow, ranks, faults);
  for (auto& [rank, type] : plan.set)
    rec.flow.faults[rank] = type;
  if (plan.unhealthy)
    rec.flow.health = "UnHealthy";
  for (auto p : plan.pods)
    add_fault_pod(p);
}

void ctx::add_fault_pod(int32_t p) {
  if (!rec.flow.fault_pods.insert(p).second)
    return;
  // Only a fault pod's uid is ever compared, so only fault pods keep one:
  // a flow on a 16k-rank job stores a few uids, not 2,048.
  if (const auto* q = ranks.find_pod(spec, p))
    rec.flow.origin_uids.emplace(p, q->uid);
}

flow_event ctx::arm(millis wait, flow_event event) {
  if (wait.count() <= 0)
    return event;
  rec.flow.deadline_ms = in.now_ms + wait.count();
  rec.flow.deadline_event = event;
  return ev::none;
}

process_signal ctx::signal(const std::string& type) const {
  process_signal sig;
  sig.uuid = rec.flow.uuid;
  sig.job_id = spec.job_id;
  sig.signal_type = type;
  return sig;
}

flow_event ctx::notify(process_signal sig) {
  rec.flow.outbox = std::move(sig);
  rec.flow.deadline_ms = in.now_ms + std::max<int64_t>(1, waits.notify.count());
  rec.flow.deadline_event = ev::notify_fail;
  return ev::none;
}

flow_event ctx::wait_report() {
  rec.flow.deadline_ms = in.now_ms + std::max<int64_t>(1, waits.report.count());
  rec.flow.deadline_event = ev::receive_timeout;
  return ev::none;
}

void ctx::set_status(const std::string& value) {
  out.annotations["ProcessRecoverStatus"] = value;
}

bool ctx::any_pod_rescheduled() const {
  for (auto p : rec.flow.fault_pods) {
    const auto* q = ranks.find_pod(spec, p);
    auto origin = rec.flow.origin_uids.find(p);
    if (q != nullptr && q->running && origin != rec.flow.origin_uids.end()
        && origin->second != q->uid)
      return true;
  }
  return false;
}

bool ctx::pods_rescheduled() const {
  if (rec.flow.fault_pods.empty())
    return false;
  for (auto p : rec.flow.fault_pods) {
    const auto* q = ranks.find_pod(spec, p);
    auto origin = rec.flow.origin_uids.find(p);
    if (q == nullptr || !q->running
        || (origin != rec.flow.origin_uids.end() && origin->second == q->uid))
      return false;
  }
  return true;
}

} // namespace recoverd::machines
