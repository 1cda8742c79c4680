#include "actors/model/fault_center.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "actors/model/machines/machine.hpp"
#include "actors/model/text.hpp"

namespace recoverd {

using namespace machines;

namespace {

// The rank on (node, device), or null: a pod of the node holding the device.
const device* device_on(const job_spec& spec, const rank_index& ranks,
                        const std::string& node, const std::string& device_id) {
  for (auto i : ranks.pods_on(node))
    for (const auto& d : spec.pods[i].devices)
      if (d.device_id == device_id)
        return &d;
  return nullptr;
}

// Global rank -> wire type of a snapshot; a normal fault wins over a retry
// fault on the same rank.
std::map<std::string, fault_type>
wire_faults(const job_spec& spec, const rank_index& ranks, bool retry_allowed,
            const std::vector<device_fault>& faults) {
  std::map<std::string, fault_type> result;
  for (const auto& f : faults) {
    const auto* d = device_on(spec, ranks, f.node_name, f.device_id);
    if (d == nullptr)
      continue;
    auto type = fault_type::normal;
    for (const auto& code : f.fault_codes) {
      if (retry_allowed && code.find("80E01801") != std::string::npos)
        type = fault_type::uce;
      else if (retry_allowed && code.find("8C1F860B") != std::string::npos)
        type = fault_type::network;
    }
    auto [slot, added] = result.emplace(d->rank_id, type);
    if (!added && type == fault_type::normal)
      slot->second = type;
  }
  return result;
}

bool provoked_by_stress(const std::string& code) {
  return code.find("80818C05") != std::string::npos
    || code.find("80818C06") != std::string::npos;
}

// The faults a running stress test provokes on the stressed nodes
// (80818C05, 80818C06) are not faults (reference §9.2 step 4.1).
std::vector<device_fault>
without_stress_codes(const recovery& rec, const job_spec& spec,
                     const rank_index& ranks,
                     std::vector<device_fault> faults) {
  std::set<std::string> nodes;
  for (const auto& [rank, ops] : rec.action.stress_params)
    if (const auto* place = ranks.find(rank))
      nodes.insert(spec.pods[place->pod_index].node_name);
  std::vector<device_fault> kept;
  for (auto& f : faults) {
    if (nodes.count(f.node_name) > 0) {
      auto& codes = f.fault_codes;
      auto had = codes.size();
      codes.erase(
        std::remove_if(codes.begin(), codes.end(), provoked_by_stress),
        codes.end());
      if (had > 0 && codes.empty())
        continue;
    }
    kept.push_back(std::move(f));
  }
  return kept;
}

} // namespace

expected<flow_event> classify_process_fault(
  const recovery& current, const job_spec& spec, const init_config& init,
  const std::vector<fault_rank>& faults, const rank_index* ranks) {
  rank_index local;
  if (ranks == nullptr) {
    local = rank_index{spec};
    ranks = &local;
  }
  bool normal = false;
  for (size_t i = 0; i < faults.size(); ++i) {
    const auto& f = faults[i];
    auto field = "faultRanks[" + std::to_string(i) + "]";
    if (ranks->find(f.rank_id) == nullptr)
      return fail(errc::invalid_argument,
                  field + ".rankId: rank \"" + excerpt(f.rank_id)
                    + "\" is not in the job's topology");
    auto type = fault_type_from_string(f.fault_type);
    if (!type)
      return fail(errc::invalid_argument,
                  field + ".faultType: unknown type \""
                    + excerpt(f.fault_type) + "\" (allowed: 0, 1, 2)");
    normal = normal || *type == fault_type::normal;
  }
  if (current.flow.state == st::scale_running && normal)
    return ev::fault_occur;
  if (current.flow.state != st::init)
    return ev::fault_absorbed;
  if (normal)
    return ev::fault_occur;
  return supports_retry(spec, init) ? ev::fault_occur : ev::pre_exit;
}

std::pair<flow_event, std::vector<fault_rank>>
fault_center_input(const recovery& current, const job_spec& spec,
                   const init_config& init,
                   const std::vector<device_fault>& before,
                   const std::vector<device_fault>& after,
                   const std::string& health_state, const rank_index* ranks) {
  if (health_state == "SubHealthy"
      && !(init.sub_healthy_strategy == "graceExit"
           && is_dump_only(spec, init)))
    return {};
  rank_index local;
  if (ranks == nullptr) {
    local = rank_index{spec};
    ranks = &local;
  }
  bool retry = supports_retry(spec, init);
  auto old_faults = wire_faults(spec, *ranks, retry, before);
  // Only a running stress test filters: otherwise the snapshot is used as is.
  bool stressing = current.flow.state == st::wait_stress_test_finished;
  std::vector<device_fault> filtered;
  if (stressing)
    filtered = without_stress_codes(current, spec, *ranks, after);
  std::vector<fault_rank> fresh;
  bool normal = false;
  for (const auto& [rank, type] :
       wire_faults(spec, *ranks, retry, stressing ? filtered : after)) {
    auto i = old_faults.find(rank);
    if (i != old_faults.end() && i->second == type)
      continue;
    fresh.push_back({rank, to_string(type)});
    normal = normal || type == fault_type::normal;
  }
  if (fresh.empty())
    return {};
  std::sort(fresh.begin(), fresh.end(), [](const auto& x, const auto& y) {
    return rank_less(x.rank_id, y.rank_id);
  });
  // A flow is running: the faults join it (the reference would send a
  // pre-exit mid-recovery, §15.10).
  if (current.flow.state != st::init)
    return {ev::fault_absorbed, fresh};
  if (!retry || normal)
    return {ev::pre_exit, fresh};
  return {ev::fault_occur, fresh};
}

} // namespace recoverd
