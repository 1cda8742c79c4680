#include "actors/model/fault_center.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

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

// The entry is a fault for recovery in a job of `health` (spec §3.4 gates
// 1 and 4).
bool counts(const device_fault& f, const std::string& health) {
  switch (classify_level(f.fault_level)) {
    case level_class::no_fault:
    case level_class::not_handled: return false;
    case level_class::sub_health: return health == "SubHealthy";
    case level_class::fault:
    case level_class::unknown: return true;
  }
  return true;
}

// Global rank -> wire type of a snapshot of `health`; a normal fault wins
// over a retry fault on the same rank.
std::map<std::string, fault_type>
wire_faults(const job_spec& spec, const rank_index& ranks, bool retry_allowed,
            const std::vector<device_fault>& faults,
            const std::string& health) {
  std::map<std::string, fault_type> result;
  auto add = [&](const std::string& rank, fault_type type) {
    auto [slot, added] = result.emplace(rank, type);
    if (!added && type == fault_type::normal)
      slot->second = type;
  };
  for (const auto& f : faults) {
    if (!counts(f, health))
      continue;
    auto type = fault_type::normal;
    for (const auto& code : f.fault_codes) {
      if (retry_allowed && code.find("80E01801") != std::string::npos)
        type = fault_type::uce;
      else if (retry_allowed && code.find("8C1F860B") != std::string::npos)
        type = fault_type::network;
    }
    if (f.device_id.empty()) {
      // A node-level fault: every rank of the job on the node.
      for (auto i : ranks.pods_on(f.node_name))
        for (const auto& d : spec.pods[i].devices)
          add(d.rank_id, type);
    } else if (const auto* d
               = device_on(spec, ranks, f.node_name, f.device_id)) {
      add(d->rank_id, type);
    }
  }
  return result;
}

std::string quoted(const std::string& x) {
  return "\"" + excerpt(x) + "\"";
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

level_class classify_level(const std::string& level) {
  static const std::map<std::string, level_class, std::less<>> known = {
    {"", level_class::fault},
    {"ManuallySeparateNPU", level_class::fault},
    {"SeparateNPU", level_class::fault},
    {"PreSeparateNPU", level_class::not_handled},
    {"RestartNPU", level_class::fault},
    {"FreeRestartNPU", level_class::fault},
    {"RestartBusiness", level_class::fault},
    {"RestartRequest", level_class::fault},
    {"SubHealthFault", level_class::sub_health},
    {"NotHandleFault", level_class::not_handled},
    {"NormalNPU", level_class::no_fault},
    {"NormalNetwork", level_class::no_fault},
  };
  auto i = known.find(level);
  return i == known.end() ? level_class::unknown : i->second;
}

std::string health_of(const std::vector<device_fault>& faults) {
  bool sub_health = false;
  for (const auto& f : faults) {
    auto c = classify_level(f.fault_level);
    if (c == level_class::fault || c == level_class::unknown)
      return "UnHealthy";
    sub_health = sub_health || c == level_class::sub_health;
  }
  return sub_health ? "SubHealthy" : "Healthy";
}

expected<checked_snapshot> check_snapshot(const job_spec& spec,
                                          const job_device_faults& x,
                                          const rank_index* ranks) {
  const auto& hs = x.health_state;
  if (!hs.empty() && hs != "Healthy" && hs != "SubHealthy"
      && hs != "UnHealthy")
    return fail(errc::invalid_argument,
                "healthState: unknown value " + quoted(hs)
                  + " (allowed: Healthy, SubHealthy, UnHealthy, or empty to "
                    "compute it from the fault levels)");
  rank_index local;
  if (ranks == nullptr) {
    local = rank_index{spec};
    ranks = &local;
  }
  // One pass over the topology, one lookup per fault: linear in both (a
  // scan of the topology per fault took 11 s for 100k faults).
  std::unordered_map<std::string, const pod*> holder;
  if (!x.faults.empty())
    for (const auto& p : spec.pods)
      for (const auto& d : p.devices)
        holder.emplace(device_key(p.node_name, d.device_id), &p);
  checked_snapshot result;
  for (size_t i = 0; i < x.faults.size(); ++i) {
    const auto& f = x.faults[i];
    auto skip = [&](const std::string& why) {
      result.ignored.push_back("faults[" + std::to_string(i) + "]: " + why);
    };
    auto level = classify_level(f.fault_level);
    if (level == level_class::no_fault)
      continue;
    if (level == level_class::unknown) {
      skip("unknown fault level " + quoted(f.fault_level));
      continue;
    }
    if (f.fault_codes.empty()) {
      skip("no fault codes");
      continue;
    }
    if (f.device_id.empty()) {
      const auto& on_node = ranks->pods_on(f.node_name);
      if (on_node.empty()) {
        skip("node " + quoted(f.node_name) + " runs no pod of the job");
        continue;
      }
      if (!f.pod_uid.empty()
          && std::none_of(on_node.begin(), on_node.end(), [&](uint32_t p) {
               return spec.pods[p].uid == f.pod_uid;
             })) {
        skip("pod " + quoted(f.pod_uid) + " of node " + quoted(f.node_name)
             + " was replaced (no pod of the job there has that uid)");
        continue;
      }
    } else {
      auto p = holder.find(device_key(f.node_name, f.device_id));
      if (p == holder.end()) {
        skip("device " + quoted(f.device_id) + " on node "
             + quoted(f.node_name) + " is not in the job's topology");
        continue;
      }
      if (!f.pod_uid.empty() && f.pod_uid != p->second->uid) {
        skip("pod of node " + quoted(f.node_name) + " device "
             + quoted(f.device_id) + " was replaced (uid " + quoted(f.pod_uid)
             + " != " + quoted(p->second->uid) + ")");
        continue;
      }
    }
    result.kept.push_back(f);
  }
  result.health_state = hs.empty() ? health_of(result.kept) : hs;
  return result;
}

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
                   const std::string& health_state, const rank_index* ranks,
                   const std::string& before_health) {
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
  // The previous snapshot's faults as that snapshot's health counted them
  // (reference §4.1 step 4 keeps the previous converted set).
  auto old_faults
    = wire_faults(spec, *ranks, retry, before,
                  before_health.empty() ? health_state : before_health);
  // Only a running stress test filters: otherwise the snapshot is used as is.
  bool stressing = current.flow.state == st::wait_stress_test_finished;
  std::vector<device_fault> filtered;
  if (stressing)
    filtered = without_stress_codes(current, spec, *ranks, after);
  std::vector<fault_rank> fresh;
  bool normal = false;
  for (const auto& [rank, type] :
       wire_faults(spec, *ranks, retry, stressing ? filtered : after,
                   health_state)) {
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
