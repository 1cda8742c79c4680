#include "actors/recovery.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "actors/error.hpp"

namespace recoverd {

namespace {

// -- topology helpers ---------------------------------------------------------

/// Global rank -> pod rank, from the job's topology (no devices-per-pod
/// arithmetic: pods may differ in size and ranks need not be contiguous).
std::map<std::string, int32_t> pod_of_rank(const job_spec& spec) {
  std::map<std::string, int32_t> result;
  for (const auto& p : spec.pods)
    for (const auto& d : p.devices)
      result.emplace(d.rank_id, p.pod_rank);
  return result;
}

const pod* find_pod(const job_spec& spec, int32_t pod_rank) {
  for (const auto& p : spec.pods)
    if (p.pod_rank == pod_rank)
      return &p;
  return nullptr;
}

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

// -- configuration predicates --------------------------------------------------

bool contains_strategy(const init_config& init, const std::string& s) {
  return contains(init.strategies, s);
}

/// The platform's strategy (reference §7), trimmed of spaces and commas.
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

/// A platform strategy recoverd can act on (`exit` included: §15.9 fix).
bool usable_platform_strategy(const std::string& plat) {
  return plat == "retry" || plat == "recover" || plat == "dump"
         || plat == "exit";
}

bool platform_allows(const job_spec& spec, const init_config& init,
                     const std::string& s) {
  return !init.platform_mode || platform_strategy(spec) == s;
}

/// supportRetry of reference §5.5: the agent is not consulted.
bool supports_retry(const job_spec& spec, const init_config& init) {
  return contains_strategy(init, "retry") && platform_allows(spec, init, "retry");
}

/// dumpOnly of reference §5.5.
bool is_dump_only(const job_spec& spec, const init_config& init) {
  if (!init.process_recover_enable)
    return false;
  if (init.platform_mode)
    return platform_strategy(spec) == "dump" && contains_strategy(init, "dump");
  return !init.strategies.empty() && init.strategies.front() == "dump";
}

// -- the context entry actions work on ----------------------------------------

void merge_faults(recovery& rec, const job_spec& spec,
                  const std::vector<fault_rank>& faults);

struct ctx {
  recovery& rec;
  const job_spec& spec;
  const init_config& init;
  const flow_input& in;
  const timeouts& waits;
  flow_step& out;
  const std::vector<device_fault>* device_faults = nullptr;

  bool configured(const std::string& s) const {
    return contains_strategy(init, s);
  }

  bool agent(const std::string& s) const {
    return contains(rec.agent_strategies, s);
  }

  std::string plat() const {
    return platform_strategy(spec);
  }

  bool plat_allows(const std::string& s) const {
    return platform_allows(spec, init, s);
  }

  bool support_retry() const {
    return supports_retry(spec, init);
  }

  bool support_recover() const {
    return configured("recover") && agent("recover") && plat_allows("recover");
  }

  bool support_restart_in_place() const {
    return rec.restart_in_place && configured("recover-in-place")
           && agent("recover") && plat_allows("recover");
  }

  // Pods whose faults make them exit (every normal-fault pod that does not
  // restart in place).
  std::vector<std::string> must_exit_pods() const {
    std::vector<std::string> result;
    for (const auto& p : pods_of(fault_list(true)))
      if (!rec.restart_in_place
          || rec.in_place_pods.count(std::stoi(p)) == 0)
        result.push_back(p);
    return result;
  }

  std::vector<std::string> in_place_pod_list() const {
    std::vector<std::string> result;
    for (auto p : rec.in_place_pods)
      result.push_back(std::to_string(p));
    return result;
  }

  bool support_dump() const {
    return configured("dump") && agent("dump") && plat_allows("dump");
  }

  // DP scale-in (reference §5.5 canScaleIn). With job or pod rescheduling
  // configured, scale-in is taken only while the fault pods have not been
  // rescheduled (the reference waits up to 20 s for that first).
  bool can_scale_in() const {
    if (rec.fault_pods.count(0) > 0 || !configured("elastic-training")
        || !agent("downgrade"))
      return false;
    if (!configured("job-rescheduling") && !configured("pod-rescheduling"))
      return true;
    return !pods_rescheduled();
  }

  bool dump_only() const {
    return is_dump_only(spec, init);
  }

  std::vector<std::string> ranks_of(bool normal) const {
    std::vector<std::string> result;
    for (const auto& [rank, type] : rec.faults)
      if ((type == "1") == normal)
        result.push_back(rank);
    std::sort(result.begin(), result.end(), rank_less);
    return result;
  }

  bool has_normal() const {
    return !ranks_of(true).empty();
  }

  bool has_retry() const {
    return !ranks_of(false).empty();
  }

  std::vector<fault_rank> fault_list(bool normal) const {
    std::vector<fault_rank> result;
    for (const auto& r : ranks_of(normal))
      result.push_back({r, rec.faults.at(r)});
    return result;
  }

  std::vector<fault_rank> all_faults() const {
    std::vector<std::string> ranks;
    for (const auto& [rank, type] : rec.faults)
      ranks.push_back(rank);
    std::sort(ranks.begin(), ranks.end(), rank_less);
    std::vector<fault_rank> result;
    for (const auto& r : ranks)
      result.push_back({r, rec.faults.at(r)});
    return result;
  }

  std::vector<std::string> pods_of(const std::vector<fault_rank>& faults) const {
    auto index = pod_of_rank(spec);
    std::set<int32_t> pods;
    for (const auto& f : faults)
      if (auto i = index.find(f.rank_id); i != index.end())
        pods.insert(i->second);
    std::vector<std::string> result;
    for (auto p : pods)
      result.push_back(std::to_string(p));
    return result;
  }

  std::vector<std::string> fault_pod_list() const {
    std::vector<std::string> result;
    for (auto p : rec.fault_pods)
      result.push_back(std::to_string(p));
    return result;
  }

  // Turns every retry fault into a normal one.
  void retry_to_normal() {
    for (auto& [rank, type] : rec.faults)
      type = "1";
  }

  // Expands every normal fault to all ranks of its pod, as type "1"; pods
  // that restart in place keep their ranks as they are.
  void expand_normal() {
    auto index = pod_of_rank(spec);
    std::set<int32_t> pods;
    for (const auto& [rank, type] : rec.faults)
      if (type == "1")
        if (auto i = index.find(rank); i != index.end())
          pods.insert(i->second);
    for (auto p : pods) {
      if (rec.restart_in_place && rec.in_place_pods.count(p) > 0) {
        rec.fault_pods.insert(p);
        continue;
      }
      rec.fault_pods.insert(p);
      if (const auto* q = find_pod(spec, p))
        for (const auto& d : q->devices)
          rec.faults[d.rank_id] = "1";
    }
  }

  void write_reset(const std::string& op) {
    bool restart = rec.restart_in_place;
    std::vector<int64_t> ranks;
    if (op == "fault")
      for (const auto& r : ranks_of(true))
        ranks.push_back(rank_number(r));
    if (op == "restartAllProcess")
      ++rec.retry_time;
    rec.reset_json = reset_document(op, ranks, in.now_ms / 1000,
                                    rec.retry_time, restart);
    rec.reset_check = sha256_hex(rec.reset_json);
  }

  // Waits `wait`, then the machine receives `event`. A zero wait returns the
  // event at once, so tests and benchmarks can run with waits at 0.
  std::string arm(millis wait, const std::string& event) {
    if (wait.count() <= 0)
      return event;
    rec.deadline_ms = in.now_ms + wait.count();
    rec.deadline_event = event;
    return {};
  }

  process_signal signal(const std::string& type) const {
    process_signal sig;
    sig.uuid = rec.uuid;
    sig.job_id = spec.job_id;
    sig.signal_type = type;
    return sig;
  }

  // Puts `sig` in the outbox; if nobody takes it in time, notifyFail.
  std::string notify(process_signal sig) {
    rec.outbox = std::move(sig);
    rec.deadline_ms = in.now_ms + std::max<int64_t>(1, waits.notify.count());
    rec.deadline_event = "notifyFail";
    return {};
  }

  std::string wait_report() {
    rec.deadline_ms = in.now_ms + std::max<int64_t>(1, waits.report.count());
    rec.deadline_event = "receiveTimeout";
    return {};
  }

  void set_status(const std::string& value) {
    out.annotations["ProcessRecoverStatus"] = value;
  }

  // Some fault pod runs again under a new uid (scale-out trigger).
  bool any_pod_rescheduled() const {
    for (auto p : rec.fault_pods) {
      const auto* q = find_pod(spec, p);
      auto origin = rec.origin_uids.find(p);
      if (q != nullptr && q->running && origin != rec.origin_uids.end()
          && origin->second != q->uid)
        return true;
    }
    return false;
  }

  bool pods_rescheduled() const {
    if (rec.fault_pods.empty())
      return false;
    for (auto p : rec.fault_pods) {
      const auto* q = find_pod(spec, p);
      auto origin = rec.origin_uids.find(p);
      if (q == nullptr || !q->running
          || (origin != rec.origin_uids.end() && origin->second == q->uid))
        return false;
    }
    return true;
  }
};

using entry_fn = std::function<std::string(ctx&)>;

struct rule {
  const char* from;
  const char* event;
  const char* to;
  entry_fn entry;
};

std::string no_action(ctx&) {
  return {};
}

// -- entry actions --------------------------------------------------------------

// R1 B/C: dying-gasp dump for dump-only jobs, otherwise the flush notice.
std::string begin_flush(ctx& c) {
  if (c.dump_only() && c.has_normal()) {
    if (!c.agent("dump"))
      c.rec.agent_strategies.push_back("dump");
    return "dumpForFault";
  }
  c.write_reset("notifyFaultFlushing");
  return "notifyFinish";
}

// R1 A, platform mode: has the platform written a usable strategy yet?
std::string on_plat_strategy_check(ctx& c) {
  if (usable_platform_strategy(c.plat())) {
    c.rec.wait_until_ms = 0;
    return begin_flush(c);
  }
  if (c.in.now_ms >= c.rec.wait_until_ms)
    return "waitPlatStrategyTimeout";
  return c.arm(std::min(c.waits.poll,
                        millis{c.rec.wait_until_ms - c.in.now_ms}),
               "platStrategyCheck");
}

// R1: a fault starts a flow.
std::string on_fault_occur(ctx& c) {
  if (!c.init.platform_mode)
    return begin_flush(c);
  c.rec.wait_until_ms = c.in.now_ms + c.waits.platform.count();
  return on_plat_strategy_check(c);
}

// R2: stopTrain with a fresh uuid.
std::string on_notify_stop_train(ctx& c) {
  c.rec.uuid = c.in.fresh_uuid;
  auto sig = c.signal("stopTrain");
  sig.actions = {"stop_train"};
  sig.fault_ranks = c.all_faults();
  return c.notify(std::move(sig));
}

// R4: dying-gasp dump for dump-only jobs.
std::string on_notify_dump(ctx& c) {
  if (c.rec.uuid.empty())
    c.rec.uuid = c.in.fresh_uuid;
  c.expand_normal();
  c.write_reset("fault");
  auto sig = c.signal("saveAndExit");
  sig.actions = {"save_and_exit"};
  sig.node_rank_ids = c.fault_pod_list();
  sig.fault_ranks = c.fault_list(true);
  return c.notify(std::move(sig));
}

std::string on_wait_report(ctx& c) {
  return c.wait_report();
}

// R10 / R36: normalise the caches, then flush.
std::string on_flush(ctx& c) {
  bool both_retry_types = false;
  {
    bool zero = false;
    bool two = false;
    for (const auto& [rank, type] : c.rec.faults) {
      zero = zero || type == "0";
      two = two || type == "2";
    }
    both_retry_types = zero && two;
  }
  bool last_retry = !c.rec.results.empty()
                    && c.rec.results.back().strategy == "retry";
  if (last_retry || c.has_normal() || !c.support_retry() || both_retry_types)
    c.retry_to_normal();
  if (c.has_retry() && !c.has_normal() && c.configured("retry"))
    return "flushFinished";
  return c.arm(c.waits.fault_flush, "flushFinished");
}

// The globalFault of retry faults (reference §5.4 case 1).
std::string send_retry_global_fault(ctx& c) {
  auto sig = c.signal("globalFault");
  sig.actions = {"on_global_rank"};
  sig.fault_ranks = c.fault_list(false);
  for (const auto& f : sig.fault_ranks)
    if (f.fault_type == "2")
      sig.timeout = 33;
  return c.notify(std::move(sig));
}

// The globalFault of normal faults, expanded to whole pods (case 2).
std::string send_normal_global_fault(ctx& c) {
  if (c.configured("recover-in-place") && !c.rec.in_place_pods.empty()
      && !c.rec.in_place_checked) {
    // Reference §5.4 step 3: give the faults time to clear before deciding
    // which pods restart in place.
    c.rec.in_place_checked = true;
    return c.arm(c.waits.recover_in_place, "inPlaceChecked");
  }
  c.expand_normal();
  c.write_reset("fault");
  auto sig = c.signal("globalFault");
  sig.actions = {"on_global_rank", "fault_nodes_exit"};
  sig.fault_ranks = c.fault_list(true);
  sig.node_rank_ids = c.must_exit_pods();
  return c.notify(std::move(sig));
}

// After the recover-in-place wait: pods whose device fault has not cleared
// must exit; the others restart in place.
std::string on_in_place_checked(ctx& c) {
  std::set<int32_t> faulty;
  if (c.device_faults != nullptr)
    for (const auto& f : *c.device_faults)
      for (const auto& p : c.spec.pods)
        if (p.node_name == f.node_name)
          for (const auto& d : p.devices)
            if (d.device_id == f.device_id)
              faulty.insert(p.pod_rank);
  for (auto p : faulty)
    c.rec.in_place_pods.erase(p);
  c.rec.restart_in_place = !c.rec.in_place_pods.empty();
  return send_normal_global_fault(c);
}

// Platform mode (reference §7): write ProcessConfirmFault, then wait for
// ProcessResultFault.
std::string start_platform_round(ctx& c) {
  auto existing = c.spec.annotations.find("ProcessConfirmFault");
  if (existing != c.spec.annotations.end() && !existing->second.empty())
    return "writeConfirmFaultOrWaitResultFaultTimeout";
  std::string list;
  for (const auto& f : c.all_faults()) {
    if (!list.empty())
      list += ',';
    list += f.rank_id + ":" + f.fault_type;
  }
  c.out.annotations["ProcessConfirmFault"] = list;
  // Fix of reference §15.9: a result left from an earlier round is removed,
  // so only the platform's answer to this round counts.
  if (c.spec.annotations.count("ProcessResultFault") > 0)
    c.out.removed_annotations.push_back("ProcessResultFault");
  c.rec.platform_round = true;
  c.rec.wait_until_ms = c.in.now_ms + c.waits.platform.count();
  c.rec.deadline_ms = c.rec.wait_until_ms;
  c.rec.deadline_event = "writeConfirmFaultOrWaitResultFaultTimeout";
  return {};
}

// Platform mode: the platform's result list arrived?
std::string on_result_fault_check(ctx& c) {
  auto keep_waiting = [&c] {
    c.rec.deadline_ms = c.rec.wait_until_ms;
    c.rec.deadline_event = "writeConfirmFaultOrWaitResultFaultTimeout";
    return std::string{};
  };
  if (!c.rec.platform_round)
    return {};
  auto result = c.spec.annotations.find("ProcessResultFault");
  if (result == c.spec.annotations.end())
    return keep_waiting();
  c.rec.platform_round = false;
  c.rec.wait_until_ms = 0;
  // Union of the result list and the confirm list; normal wins over retry.
  auto index = pod_of_rank(c.spec);
  size_t start = 0;
  const auto& text = result->second;
  while (start < text.size()) {
    auto end = text.find(',', start);
    if (end == std::string::npos)
      end = text.size();
    auto item = text.substr(start, end - start);
    start = end + 1;
    auto colon = item.find(':');
    if (colon == std::string::npos)
      continue;
    auto rank = item.substr(0, colon);
    auto type = item.substr(colon + 1);
    if (index.count(rank) == 0 || (type != "0" && type != "1" && type != "2"))
      continue;
    auto& slot = c.rec.faults[rank];
    if (slot.empty() || type == "1")
      slot = type;
    c.rec.fault_pods.insert(index.at(rank));
  }
  // Re-read the strategy; `exit` is accepted here.
  if (!usable_platform_strategy(c.plat()))
    return "writeConfirmFaultOrWaitResultFaultTimeout";
  if (!c.has_normal() && c.has_retry())
    return send_retry_global_fault(c);
  return send_normal_global_fault(c);
}

// R13: the global fault notice (reference §5.4).
std::string on_global_fault(ctx& c) {
  if (c.has_retry() && !c.has_normal()) {
    if (c.init.platform_mode)
      return start_platform_round(c);
    return send_retry_global_fault(c);
  }
  // Resource force-release before the normal-fault notice.
  return c.arm(c.waits.resource_release, "resourceReleased");
}

std::string on_resource_released(ctx& c) {
  if (c.init.platform_mode)
    return start_platform_round(c);
  return send_normal_global_fault(c);
}

// §5.5: the strategy ladder.
std::string choose(ctx& c) {
  const auto& results = c.rec.results;
  if (results.empty()) {
    if (c.support_retry() && !c.has_normal()) {
      if (c.agent("retry"))
        return "retry";
      c.retry_to_normal();
      c.expand_normal();
      return c.support_dump() ? "dump" : "exit";
    }
    if (c.support_restart_in_place())
      return "recover-in-place";
    if (c.support_recover())
      return "recover";
    if (c.can_scale_in())
      return "downgrade";
    if (c.support_dump())
      return "dump";
    return "exit";
  }
  const auto& last = results.back().strategy;
  if (last == "retry") {
    if (c.support_restart_in_place())
      return "recover-in-place";
    if (c.support_recover())
      return "recover";
    if (c.can_scale_in())
      return "downgrade";
    return c.support_dump() ? "dump" : "exit";
  }
  if (last == "recover" || last == "downgrade" || last == "upgrade")
    return c.support_dump() ? "dump" : "exit";
  return "exit";
}

std::string send_strategy(ctx& c, const std::string& strategy) {
  auto sig = c.signal("changeStrategy");
  sig.actions = {"change_strategy"};
  sig.change_strategy = strategy;
  if (strategy == "recover-in-place") {
    // Reference §5.5 step 4: sent as recover with extraParams.
    c.expand_normal();
    c.write_reset("fault");
    sig.change_strategy = "recover";
    sig.extra_params = "recover-in-place";
    sig.actions.push_back("fault_nodes_restart");
    sig.fault_ranks = c.all_faults();
    sig.node_rank_ids = c.in_place_pod_list();
    return c.notify(std::move(sig));
  }
  if (c.rec.restart_in_place && strategy != "retry") {
    // Any other strategy: every in-place pod exits after all.
    c.rec.restart_in_place = false;
    c.rec.in_place_pods.clear();
    c.expand_normal();
    sig.actions.push_back("fault_nodes_exit");
    sig.fault_ranks = c.all_faults();
    sig.node_rank_ids = c.must_exit_pods();
    if (strategy == "downgrade")
      sig.extra_params = R"({"scale-in-strategy": "DP"})";
    return c.notify(std::move(sig));
  }
  if (strategy == "retry") {
    sig.fault_ranks = c.fault_list(false);
  } else {
    sig.fault_ranks = c.fault_list(true);
    sig.node_rank_ids = c.pods_of(sig.fault_ranks);
  }
  if (strategy == "downgrade")
    sig.extra_params = R"({"scale-in-strategy": "DP"})";
  if (strategy == "upgrade")
    sig.extra_params = R"({"scale-out-strategy": "DP"})";
  return c.notify(std::move(sig));
}

// R31: the recover wait gave up on rescheduling; try DP scale-in.
std::string on_notify_scale_in(ctx& c) {
  c.rec.decided.push_back("downgrade");
  return send_strategy(c, "downgrade");
}

// The downgrade branch of the result check (reference §5.6).
std::string on_check_scale_in_isolate(ctx& c) {
  if (c.rec.results.empty())
    return "recoverFail";
  const auto& r = c.rec.results.back();
  if (r.code == 0)
    return "scaleInSuccessEvent"; // the reference drops this and gets stuck
  if (r.code != 201)
    return "recoverFail";
  auto index = pod_of_rank(c.spec);
  std::set<int32_t> pods;
  for (const auto& rank : r.isolate_ranks) {
    auto i = index.find(rank);
    if (i == index.end())
      return "notifyFail";
    if (c.rec.fault_pods.count(i->second) == 0)
      pods.insert(i->second);
  }
  auto sig = c.signal("faultNodesExit");
  sig.actions = {"fault_nodes_exit"};
  for (auto p : pods) {
    c.rec.fault_pods.insert(p);
    sig.node_rank_ids.push_back(std::to_string(p));
  }
  return c.notify(std::move(sig));
}

// DP scale-out: once a replacement pod runs, bring the job back to full
// size.
std::string on_scale_running(ctx& c) {
  // A check while the upgrade signal still waits for the agent keeps it.
  if (!c.rec.decided.empty() && c.rec.decided.back() == "upgrade")
    return send_strategy(c, "upgrade");
  if (!job_running(c.spec) || !c.any_pod_rescheduled())
    return {};
  c.rec.decided.push_back("upgrade");
  return send_strategy(c, "upgrade");
}

// R17 / R35 / R39: decide and send changeStrategy.
std::string on_decide(ctx& c) {
  if (c.in.report_kind == "strategy")
    c.rec.agent_strategies = c.in.strategies;
  auto strategy = choose(c);
  if (strategy == "recover" && c.init.platform_mode
      && c.spec.annotations.count("RankTableReady") > 0
      && c.spec.annotations.at("RankTableReady") != "true")
    strategy = c.support_dump() ? "dump" : "exit";
  c.rec.decided.push_back(strategy);
  bool network_fault = false;
  for (const auto& [rank, type] : c.rec.faults)
    network_fault = network_fault || type == "2";
  if (strategy == "retry" && network_fault) {
    // HCCL routing convergence before a step retry.
    c.rec.pending_strategy = strategy;
    auto next = c.arm(c.waits.hccl_convergence, "hcclConverged");
    if (!next.empty())
      return send_strategy(c, strategy);
    return {};
  }
  return send_strategy(c, strategy);
}

std::string on_hccl_converged(ctx& c) {
  auto strategy = c.rec.pending_strategy;
  c.rec.pending_strategy.clear();
  return send_strategy(c, strategy);
}

// §5.6: the result check.
std::string on_check_result(ctx& c) {
  if (!c.rec.decided.empty() && c.rec.decided.back() == "exit") {
    c.set_status("exit-completed");
    return "checkFinish";
  }
  if (c.rec.results.empty())
    return "checkFinish";
  const auto& r = c.rec.results.back();
  bool ok = r.code == 0;
  if (r.strategy == "retry") {
    c.set_status(ok ? "retry-success" : "retry-failed");
    if (ok)
      return "recoverSuccess";
    if (r.code == 405)
      return "recoverableRetryError";
    auto& xs = c.rec.agent_strategies;
    xs.erase(std::remove(xs.begin(), xs.end(), "recover"), xs.end());
    if (r.code == 499)
      xs.erase(std::remove(xs.begin(), xs.end(), "dump"), xs.end());
    return "unRecoverableRetryError";
  }
  if (r.strategy == "recover") {
    c.set_status(ok ? "recover-success" : "recover-failed");
    return ok ? "recoverSuccess" : "recoverFail";
  }
  if (r.strategy == "downgrade")
    return ok ? "scaleInSuccessEvent" : "recoverFail";
  if (r.strategy == "upgrade")
    return ok ? "scaleOutSuccessEvent" : "recoverFail";
  if (r.strategy == "dump") {
    c.set_status(ok ? "dump-success" : "dump-failed");
    auto sig = c.signal("changeStrategy");
    sig.actions = {"change_strategy"};
    sig.change_strategy = "exit";
    sig.extra_params = "dump_exit";
    sig.node_rank_ids = c.fault_pod_list();
    c.out.side_signals.push_back(std::move(sig));
    return "checkFinish";
  }
  // A report for a strategy the daemon did not decide: judge by the decided
  // one instead of trusting the report (reference §15.3).
  c.set_status(c.rec.decided.empty() ? "exit-completed"
                                     : c.rec.decided.back() + "-failed");
  return "recoverFail";
}

// R37
std::string on_kill_pod_for_retry(ctx& c) {
  c.retry_to_normal();
  c.expand_normal();
  c.write_reset("fault");
  return "finishKillPod";
}

// R22: waiting for the recover result while pods are rescheduled.
std::string on_wait_recover(ctx& c) {
  c.rec.wait_until_ms = c.in.now_ms + c.waits.reschedule.count();
  c.rec.deadline_ms = c.in.now_ms + std::max<int64_t>(1, std::min(
                                                     c.waits.report.count(),
                                                     c.waits.reschedule.count()));
  c.rec.deadline_event = "rescheduleCheck";
  return {};
}

std::string on_reschedule_check(ctx& c) {
  if (c.pods_rescheduled() || (c.rec.restart_in_place && job_running(c.spec)
                               && c.must_exit_pods().empty())) {
    c.write_reset("clear");
    c.rec.wait_until_ms = 0;
    return c.wait_report();
  }
  if (c.in.now_ms >= c.rec.wait_until_ms && c.rec.wait_until_ms != 0)
    return c.can_scale_in() ? "needTryScaleStrategyInEvent" : "scheduleTimeout";
  c.rec.deadline_ms = c.rec.wait_until_ms;
  c.rec.deadline_event = "rescheduleCheck";
  return {};
}

// R38: did the platform reschedule the job after dump/exit?
std::string on_listen_schedule(ctx& c) {
  if (c.init.platform_mode || c.pods_rescheduled())
    return "scheduleSuccess";
  c.rec.wait_until_ms = c.in.now_ms + c.waits.exit_reschedule.count();
  return c.arm(std::min(c.waits.poll, c.waits.exit_reschedule),
               "scheduleCheck");
}

std::string on_schedule_check(ctx& c) {
  if (c.pods_rescheduled())
    return "scheduleSuccess";
  if (c.in.now_ms >= c.rec.wait_until_ms)
    return job_running(c.spec) ? "scheduleSuccess" : "scheduleTimeout";
  return c.arm(std::min(c.waits.poll,
                        millis{c.rec.wait_until_ms - c.in.now_ms}),
               "scheduleCheck");
}

// R40
std::string on_restart_all(ctx& c) {
  c.write_reset("restartAllProcess");
  return "notifySuccess";
}

std::string on_wait_restart_all(ctx& c) {
  return c.arm(c.init.platform_mode ? millis{0} : c.waits.restart_all,
               "restartFinish");
}

// R41
std::string on_fault_clear(ctx& c) {
  c.write_reset("clear");
  return "clearSuccess";
}

// R43: job-level fallback.
std::string on_fault_retry(ctx& c) {
  c.rec.label = "pause";
  auto sig = c.signal("changeStrategy");
  sig.actions = {"change_strategy"};
  sig.change_strategy = "exit";
  sig.extra_params = "dump_exit";
  sig.node_rank_ids = c.fault_pod_list();
  c.out.side_signals.push_back(std::move(sig));
  c.rec.wait_until_ms = c.in.now_ms + c.waits.job_fallback.count();
  return c.arm(std::max(millis{1}, std::min(c.waits.poll, c.waits.job_fallback)),
               "fallbackCheck");
}

std::string on_fallback_check(ctx& c) {
  if (job_running(c.spec)) {
    c.rec.label = "on";
    return "finish";
  }
  if (c.in.now_ms >= c.rec.wait_until_ms)
    return "scheduleTimeout";
  return c.arm(std::max(millis{1},
                        std::min(c.waits.poll,
                                 millis{c.rec.wait_until_ms - c.in.now_ms})),
               "fallbackCheck");
}

// R45
std::string on_kill_job(ctx& c) {
  auto sig = c.signal("killMaster");
  c.rec.outbox = std::move(sig);
  // The reference gives up on a killMaster nobody takes after 60 s and ends
  // the flow anyway.
  c.rec.deadline_ms = c.in.now_ms
                      + std::max<int64_t>(1, c.waits.notify.count());
  c.rec.deadline_event = "finish";
  return {};
}

// Back to idle: the flow is over.
std::string on_reset(ctx& c) {
  auto& r = c.rec;
  // The state the flow ended from tells how it ended.
  const auto& from = c.out.path.size() >= 2 ? c.out.path[c.out.path.size() - 2]
                                            : std::string{};
  auto status = c.out.annotations.find("ProcessRecoverStatus");
  if (from == st::notify_kill_job)
    r.last_outcome = "killed";
  else if (from == st::fault_retry)
    r.last_outcome = "job-level-fallback";
  else if (status != c.out.annotations.end())
    r.last_outcome = status->second;
  else
    r.last_outcome = "recovered";
  ++r.flows;
  r.uuid.clear();
  r.faults.clear();
  r.fault_pods.clear();
  r.agent_strategies.clear();
  r.decided.clear();
  r.results.clear();
  r.outbox.reset();
  r.deadline_ms = 0;
  r.deadline_event.clear();
  r.flow_started_ms = 0;
  r.origin_uids.clear();
  r.wait_until_ms = 0;
  r.pending_strategy.clear();
  r.platform_round = false;
  r.in_place_pods.clear();
  r.restart_in_place = false;
  r.in_place_checked = false;
  r.om_kind.clear();
  r.om_operator.clear();
  r.switch_ranks.clear();
  r.switch_ops.clear();
  r.stress_params.clear();
  r.stress_fault = false;
  r.isolate_nodes.clear();
  r.health = "Healthy";
  // Fix of reference §15.9: the confirm list of a finished round is removed,
  // so the next round is not blocked by it.
  if (c.init.platform_mode && c.spec.annotations.count("ProcessConfirmFault") > 0)
    c.out.removed_annotations.push_back("ProcessConfirmFault");
  c.write_reset("clear");
  return {};
}

// -- link switch (reference §8.2) ----------------------------------------------

std::string om(ctx& c, const std::string& msg, bool final = false) {
  c.out.om_messages.push_back(msg);
  c.out.om_final = c.out.om_final || final;
  c.rec.om_last_message = msg;
  c.rec.om_last_kind = c.rec.om_kind;
  c.rec.om_done = final;
  return {};
}

// The operator action ends without a further message (the streams close).
void om_end(ctx& c) {
  c.out.om_final = true;
  c.rec.om_done = true;
}

// Forgets the running operator action (its outcome stays for late readers).
void om_clear(ctx& c) {
  c.rec.om_kind.clear();
  c.rec.switch_ranks.clear();
  c.rec.switch_ops.clear();
  c.rec.stress_params.clear();
  c.rec.stress_fault = false;
}

// An operator action begins: pause training (reference §8.2 / §9.2 step 1).
std::string begin_om(ctx& c, const std::string& kind, int64_t pause_timeout) {
  c.rec.om_kind = kind;
  c.rec.om_operator = c.in.who;
  c.rec.om_done = false;
  c.rec.om_last_message.clear();
  c.rec.om_last_kind = kind;
  c.rec.flow_started_ms = c.in.now_ms;
  c.rec.uuid = c.in.fresh_uuid;
  auto sig = c.signal("stopTrain");
  sig.actions = {"pause_train"};
  sig.timeout = pause_timeout;
  return c.notify(std::move(sig));
}

std::string on_start_switch(ctx& c) {
  c.rec.switch_ranks = c.in.switch_ranks;
  c.rec.switch_ops = c.in.switch_ops;
  return begin_om(c, "switch", 0);
}

// The outbox marks what goes to the worker stream (SwitchRankList or
// StressTestRankParams); the job actor builds it from the state.
std::string notify_worker(ctx& c, const char* what) {
  process_signal marker;
  marker.uuid = c.rec.uuid;
  marker.job_id = c.spec.job_id;
  marker.signal_type = what;
  return c.notify(std::move(marker));
}

std::string on_notify_switch_nic(ctx& c) {
  return notify_worker(c, "SwitchRankList");
}

std::string on_notify_continue(ctx& c) {
  auto sig = c.signal("changeStrategy");
  sig.actions = {"change_strategy"};
  sig.change_strategy = "continue";
  sig.fault_ranks = c.fault_list(true);
  sig.node_rank_ids = c.pods_of(sig.fault_ranks);
  return c.notify(std::move(sig));
}

// An operator action that cannot go on kills the job (reference §8.2).
std::string on_om_kill(ctx& c) {
  const auto& path = c.out.path;
  std::string from = path.size() >= 2 ? path[path.size() - 2] : std::string{};
  bool failed = c.in.name == "receiveReport" && c.in.report.code == 499;
  std::string what = c.rec.om_kind == "stress" ? "stress test failed"
                                               : "switch nic failed";
  std::string msg = "om failed, send signal failed";
  if (from == st::wait_pause_complete)
    msg = failed ? "om failed, pause train failed" : "pause train timeout";
  else if (from == st::notify_switch_nic)
    msg = "send switch nic signal failed, please check manually";
  else if (from == st::notify_stress_test)
    msg = "send stress test signal failed, please check manually";
  else if (from == st::wait_continue_train)
    msg = what + (failed ? ", continue train failed" : ", continue train timeout");
  om(c, msg, true);
  return on_kill_job(c);
}

std::string on_switch_failed(ctx& c) {
  std::string why = c.in.report_kind == "switch" ? "switch nic failed"
                    : c.in.report_kind == "status"
                      ? "report error when switching nic"
                      : "report switch nic timeout";
  om(c, "switch nic failed, " + why, true);
  om_clear(c);
  return on_notify_stop_train(c);
}

// The operator action ended and training goes on.
std::string on_om_finished(ctx& c) {
  if (c.rec.om_kind == "switch")
    om(c, "switch nic finish", true);
  else
    om_end(c); // the stress result was the operator's message
  // Faults that arrived during the action are handled right after it
  // (design §4.7): the flow continues as a recovery instead of ending.
  if (!c.rec.faults.empty()) {
    om_clear(c);
    c.rec.uuid.clear();
    return "faultOccur";
  }
  return on_reset(c);
}

// -- online stress test (reference §9.2) --------------------------------------

std::string on_start_stress(ctx& c) {
  c.rec.stress_params = c.in.stress_params;
  return begin_om(c, "stress", 900);
}

std::string on_notify_stress(ctx& c) {
  return notify_worker(c, "StressTestRankParams");
}

// A uuid distinct from `u` but derived from it (a step has one fresh uuid;
// the reference gives the auxiliary start-agent signals their own).
std::string derived_uuid(const std::string& u) {
  auto head = u.substr(0, u.find('-'));
  return head + "-" + sha256_hex(u).substr(0, 32);
}

// The workers run the test: tell the agent to hold its start-agent logic,
// flush faults, and wait for the result.
std::string on_stress_running(ctx& c) {
  c.rec.uuid = c.in.fresh_uuid;
  auto sig = c.signal("pauseStartAgent");
  sig.actions = {"pause_start_agent"};
  c.out.side_signals.push_back(std::move(sig));
  c.write_reset("notifyFaultFlushing");
  return c.wait_report();
}

// ReportRecoverStatus(406) while the test runs: a fault; wait on for the
// result, then recover whatever it says.
std::string on_stress_fault(ctx& c) {
  c.rec.stress_fault = true;
  om(c, "recv fault, when stressing test");
  return c.wait_report();
}

// Go's %v of a string slice: [a b c].
std::string go_list(const std::vector<std::string>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i > 0 ? " " : "") + xs[i];
  return out + "]";
}

// Takes the stress result (reference §9.2 step 4): clears the reset
// document, lets the agent start again, classifies each (rank, op) code,
// and tells the operator. Fills `isolate_nodes` and the fault cache.
void take_stress_result(ctx& c) {
  c.write_reset("clear");
  c.rec.uuid = derived_uuid(c.in.fresh_uuid);
  auto sig = c.signal("continueStartAgent");
  sig.actions = {"continue_start_agent"};
  c.out.side_signals.push_back(std::move(sig));
  std::set<std::string> isolate;
  std::vector<fault_rank> faulty;
  nlohmann::json detail = nlohmann::json::object();
  for (const auto& [rank, ops] : c.in.stress_result) {
    const pod* host = nullptr;
    std::string device;
    for (const auto& p : c.spec.pods)
      for (const auto& d : p.devices)
        if (d.rank_id == rank) {
          host = &p;
          device = d.device_id;
        }
    if (host == nullptr)
      continue; // validated before; a spec change since is not fatal
    bool rank_fault = false;
    for (const auto& [op, r] : ops) {
      detail[host->node_name][device][op] = {{"code", r.code},
                                             {"result", r.result}};
      if (r.code == "2")
        isolate.insert(host->node_name);
      rank_fault = rank_fault || r.code == "3" || r.code == "4";
    }
    if (rank_fault)
      faulty.push_back({rank, "1"});
  }
  merge_faults(c.rec, c.spec, faulty);
  c.rec.isolate_nodes.assign(isolate.begin(), isolate.end());
  std::vector<std::string> ranks;
  for (const auto& f : faulty)
    ranks.push_back(f.rank_id);
  std::sort(ranks.begin(), ranks.end(), rank_less);
  auto json = detail.dump();
  bool failed = !isolate.empty() || !faulty.empty() || c.rec.stress_fault;
  if (!isolate.empty())
    om(c, "stress test find fault, isolate node:" + go_list(c.rec.isolate_nodes)
            + ",result:" + json, failed);
  else if (!faulty.empty())
    om(c, "stress test timeout fault, faultRank:" + go_list(ranks)
            + ",result:" + json, failed);
  else
    om(c, "stress test finish, result:" + json, failed);
}

std::string on_stress_passed(ctx& c) {
  take_stress_result(c);
  return on_notify_continue(c);
}

// stressTestFail (reference §9.2 step 5): every rank of an isolated node is
// a fault, the node is recorded unhealthy, and a recovery stops training.
std::string on_stress_failed(ctx& c) {
  take_stress_result(c);
  std::vector<fault_rank> node_faults;
  for (const auto& node : c.rec.isolate_nodes) {
    c.rec.unhealthy_nodes[node] = c.in.now_ms;
    for (const auto& p : c.spec.pods)
      if (p.node_name == node)
        for (const auto& d : p.devices)
          node_faults.push_back({d.rank_id, "1"});
  }
  merge_faults(c.rec, c.spec, node_faults);
  c.rec.isolate_nodes.clear();
  om_clear(c);
  return on_notify_stop_train(c);
}

std::string on_stress_timeout(ctx& c) {
  om(c, "stress test failed, report stress test timeout", true);
  om_clear(c);
  return on_notify_stop_train(c);
}

// -- the table ----------------------------------------------------------------

const std::vector<rule>& rules() {
  using namespace st;
  static const std::vector<rule> table = {
    {init, "faultOccur", notify_wait_fault_flushing, on_fault_occur},                // R1
    {notify_wait_fault_flushing, "platStrategyCheck", notify_wait_fault_flushing,
     on_plat_strategy_check},                                                        // R1 A
    {notify_wait_fault_flushing, "notifyFinish", notify_stop_train,
     on_notify_stop_train},                                                          // R2
    {notify_wait_fault_flushing, "waitPlatStrategyTimeout", fault_retry,
     on_fault_retry},                                                                // R3
    {notify_wait_fault_flushing, "dumpForFault", notify_dump, on_notify_dump},      // R4
    {notify_wait_fault_flushing, "notifyFail", notify_kill_job, on_kill_job},       // R5
    {notify_stop_train, "notifySuccess", wait_stop_complete, on_wait_report},       // R6
    {notify_stop_train, "notifyFail", fault_clear, on_fault_clear},                 // R7
    {notify_dump, "notifySuccess", wait_dump_status, on_wait_report},          // R8
    {notify_dump, "notifyFail", fault_clear, on_fault_clear},                       // R9
    {wait_stop_complete, "receiveReport", wait_fault_flush_finished, on_flush},     // R10
    {wait_stop_complete, "receiveTimeout", fault_clear, on_fault_clear},            // R11
    {wait_stop_complete, "processNotReadyEvent", notify_kill_job, on_kill_job},     // R12
    {wait_fault_flush_finished, "flushFinished", notify_global_fault,
     on_global_fault},                                                               // R13
    {notify_global_fault, "resourceReleased", notify_global_fault,
     on_resource_released},                                                          // R13 (wait)
    {notify_global_fault, "notifySuccess", wait_recover_strategy, on_wait_report},  // R14
    {notify_global_fault, "notifyFail", notify_kill_job, on_kill_job},              // R15
    {notify_global_fault, "inPlaceChecked", notify_global_fault,
     on_in_place_checked},                                                           // §5.4 step 3
    {notify_global_fault, "resultFaultCheck", notify_global_fault,
     on_result_fault_check},                                                         // §7 round
    {notify_global_fault, "writeConfirmFaultOrWaitResultFaultTimeout",
     fault_retry, on_fault_retry},                                                   // R16
    {wait_recover_strategy, "receiveReport", notify_decided_strategy, on_decide},   // R17
    {wait_recover_strategy, "receiveTimeout", fault_clear, on_fault_clear},         // R18
    {notify_decided_strategy, "hcclConverged", notify_decided_strategy,
     on_hccl_converged},                                                             // R17 (wait)
    {notify_decided_strategy, "notifyFail", fault_clear, on_fault_clear},           // R19
    {notify_decided_strategy, "notifyRetryStrategySuccess", wait_step_retry_status,
     on_wait_report},                                                                // R21
    {notify_decided_strategy, "notifyRecoverStrategySuccess",
     wait_process_recover_status, on_wait_recover},                                  // R22
    {notify_decided_strategy, "notifyDumpStrategySuccess", wait_dump_status,
     on_wait_report},                                                           // R23
    {notify_decided_strategy, "notifyExitStrategySuccess", check_recover_result,
     on_check_result},                                                               // R24
    {wait_step_retry_status, "receiveReport", check_recover_result,
     on_check_result},                                                               // R26
    {wait_step_retry_status, "receiveTimeout", fault_retry, on_fault_retry},        // R27
    {wait_process_recover_status, "receiveReport", check_recover_result,
     on_check_result},                                                               // R28
    {wait_process_recover_status, "rescheduleCheck", wait_process_recover_status,
     on_reschedule_check},                                                           // R22 (watcher)
    {wait_process_recover_status, "scheduleTimeout", fault_clear, on_fault_clear},  // R29
    {wait_process_recover_status, "receiveTimeout", fault_clear, on_fault_clear},   // R29
    {wait_dump_status, "receiveReport", check_recover_result, on_check_result},     // R32
    {wait_dump_status, "receiveTimeout", fault_clear, on_fault_clear},              // R33
    {check_recover_result, "recoverSuccess", init, on_reset},                       // R34
    {check_recover_result, "recoverFail", notify_decided_strategy, on_decide},      // R35
    {check_recover_result, "recoverableRetryError", wait_fault_flush_finished,
     on_flush},                                                                      // R36
    {check_recover_result, "unRecoverableRetryError",
     kill_pod_for_unrecoverable_retry, on_kill_pod_for_retry},                       // R37
    {check_recover_result, "checkFinish", listen_schedule_result,
     on_listen_schedule},                                                            // R38
    {kill_pod_for_unrecoverable_retry, "finishKillPod", notify_decided_strategy,
     on_decide},                                                                     // R39
    {listen_schedule_result, "scheduleCheck", listen_schedule_result,
     on_schedule_check},                                                             // R38 (poll)
    {listen_schedule_result, "scheduleSuccess", notify_restart_all_process,
     on_restart_all},                                                                // R40
    {listen_schedule_result, "scheduleTimeout", fault_clear, on_fault_clear},       // R40
    {notify_restart_all_process, "notifySuccess", wait_restart_all_process,
     on_wait_restart_all},                                                           // R40b
    {notify_restart_all_process, "notifyFail", fault_clear, on_fault_clear},        // R40b
    {wait_restart_all_process, "restartFinish", fault_clear, on_fault_clear},       // R40c
    {fault_clear, "clearSuccess", fault_retry, on_fault_retry},                     // R41
    {fault_clear, "clearFail", notify_kill_job, on_kill_job},                       // R41
    {fault_retry, "fallbackCheck", fault_retry, on_fallback_check},                 // R43 (poll)
    {fault_retry, "finish", init, on_reset},                                        // R44
    {fault_retry, "changeSwitchPauseError", notify_kill_job, on_kill_job},          // R44
    {fault_retry, "changeSwitchEnableError", notify_kill_job, on_kill_job},         // R44
    {fault_retry, "scheduleTimeout", notify_kill_job, on_kill_job},                 // R44
    {notify_kill_job, "finish", init, on_reset},                                    // R46
    // DP scale-in / scale-out (getDPScaleStrategyRules)
    {notify_decided_strategy, "notifyScaleInStrategySuccessEvent",
     wait_scale_in_isolate, on_wait_report},                                         // R25
    {wait_process_recover_status, "needTryScaleStrategyInEvent", notify_scale_in,
     on_notify_scale_in},                                                            // R31
    {notify_scale_in, "notifyScaleInStrategySuccessEvent", wait_scale_in_isolate,
     on_wait_report},
    {notify_scale_in, "notifyFail", fault_clear, on_fault_clear},
    {wait_scale_in_isolate, "receiveReport", check_scale_in_isolate,
     on_check_scale_in_isolate},
    {wait_scale_in_isolate, "receiveTimeout", notify_decided_strategy, on_decide},
    {check_scale_in_isolate, "notifyFaultNodesExitSuccessEvent",
     wait_scale_in_status, on_wait_report},
    {check_scale_in_isolate, "notifyFail", notify_decided_strategy, on_decide},
    {check_scale_in_isolate, "recoverFail", notify_decided_strategy, on_decide},
    {check_scale_in_isolate, "scaleInSuccessEvent", scale_running,
     on_scale_running},                                                              // fix of §15.5
    {wait_scale_in_status, "receiveReport", check_recover_result, on_check_result},
    {wait_scale_in_status, "receiveTimeout", fault_clear, on_fault_clear},
    {check_recover_result, "scaleInSuccessEvent", scale_running, on_scale_running},
    {check_recover_result, "scaleOutSuccessEvent", init, on_reset},
    {scale_running, "scaleCheck", scale_running, on_scale_running},
    {scale_running, "notifyScaleOutStrategySuccessEvent", wait_scale_out_status,
     on_wait_report},
    {scale_running, "faultOccur", notify_stop_train, on_notify_stop_train},
    {scale_running, "finish", init, on_reset},
    {scale_running, "notifyFail", scale_running, on_scale_running},
    {wait_scale_out_status, "receiveReport", check_recover_result, on_check_result},
    {wait_scale_out_status, "receiveTimeout", fault_clear, on_fault_clear},
    // Link switch (reference §8.2)
    {init, "startSwitchNic", notify_pause_train, on_start_switch},
    {notify_pause_train, "notifySuccess", wait_pause_complete, on_wait_report},
    {notify_pause_train, "notifyFail", notify_kill_job, on_om_kill},
    {wait_pause_complete, "switchNicRecvPause", notify_switch_nic,
     on_notify_switch_nic},
    {wait_pause_complete, "processPauseFail", notify_kill_job, on_om_kill},
    {wait_pause_complete, "receiveTimeout", notify_kill_job, on_om_kill},
    {notify_switch_nic, "notifySuccess", wait_switch_nic_finished,
     on_wait_report},
    {notify_switch_nic, "notifyFail", notify_kill_job, on_om_kill},
    {wait_switch_nic_finished, "receiveReport", notify_continue_train,
     on_notify_continue},
    {wait_switch_nic_finished, "switchNicFail", notify_stop_train,
     on_switch_failed},
    {wait_switch_nic_finished, "waitSwitchNicRecvFault", notify_stop_train,
     on_switch_failed},
    {wait_switch_nic_finished, "receiveTimeout", notify_stop_train,
     on_switch_failed},
    {notify_continue_train, "notifyContinueSuccessEvent", wait_continue_train,
     on_wait_report},
    {notify_continue_train, "notifyFail", notify_kill_job, on_om_kill},
    {wait_continue_train, "switchNicRecvContinue", init, on_om_finished},
    {wait_continue_train, "continueTrainFail", notify_kill_job, on_om_kill},
    {wait_continue_train, "receiveTimeout", notify_kill_job, on_om_kill},
    // Online stress test (reference §9.2); pause and continue as above.
    {init, "startStressTest", notify_pause_train, on_start_stress},
    {wait_pause_complete, "stressTestRecvPause", notify_stress_test,
     on_notify_stress},
    {notify_stress_test, "notifySuccess", wait_stress_test_finished,
     on_stress_running},
    {notify_stress_test, "notifyFail", notify_kill_job, on_om_kill},
    {wait_stress_test_finished, "receiveReport", notify_continue_train,
     on_stress_passed},
    {wait_stress_test_finished, "stressTestRecvFault", wait_stress_test_finished,
     on_stress_fault},
    {wait_stress_test_finished, "stressTestFail", notify_stop_train,
     on_stress_failed},
    {wait_stress_test_finished, "receiveTimeout", notify_stop_train,
     on_stress_timeout},
    {wait_continue_train, "stressTestRecvContinue", init, on_om_finished},
  };
  return table;
}

const rule* find_rule(const std::string& state, const std::string& event) {
  for (const auto& r : rules())
    if (state == r.from && event == r.event)
      return &r;
  return nullptr;
}

// Merges reported faults into the caches; a normal type replaces a retry type.
void merge_faults(recovery& rec, const job_spec& spec,
                  const std::vector<fault_rank>& faults) {
  auto index = pod_of_rank(spec);
  for (const auto& f : faults) {
    auto& type = rec.faults[f.rank_id];
    if (type.empty() || f.fault_type == "1")
      type = f.fault_type;
    if (f.fault_type == "1")
      rec.health = "UnHealthy";
    if (auto i = index.find(f.rank_id); i != index.end())
      rec.fault_pods.insert(i->second);
  }
}

// A stress result that ends in a recovery: a node to isolate, a faulty
// rank, or a fault reported while the test ran.
bool stress_fails(const recovery& rec, const stress_results& results) {
  if (rec.stress_fault)
    return true;
  for (const auto& [rank, ops] : results)
    for (const auto& [op, r] : ops)
      if (r.code == "2" || r.code == "3" || r.code == "4")
        return true;
  return false;
}

} // namespace

const std::vector<transition>& transitions() {
  static const std::vector<transition> result = [] {
    std::vector<transition> xs;
    for (const auto& r : rules())
      xs.push_back({r.from, r.event, r.to});
    return xs;
  }();
  return result;
}

std::string expected_report(const std::string& state) {
  if (state == st::wait_stop_complete || state == st::wait_pause_complete)
    return "stop";
  if (state == st::wait_switch_nic_finished)
    return "switch";
  if (state == st::wait_stress_test_finished)
    return "stress";
  if (state == st::wait_continue_train)
    return "status";
  if (state == st::wait_recover_strategy)
    return "strategy";
  if (state == st::wait_step_retry_status
      || state == st::wait_process_recover_status
      || state == st::wait_dump_status || state == st::wait_scale_in_isolate
      || state == st::wait_scale_in_status || state == st::wait_scale_out_status)
    return "status";
  return {};
}

caf::expected<flow_step> step(const recovery& current, const job_spec& spec,
                              const init_config& init, const flow_input& in,
                              const timeouts& waits,
                              const std::vector<device_fault>& device_faults) {
  flow_step out;
  out.input = in.name;
  out.faults = in.faults;
  out.strategies = in.strategies;
  out.report = in.report;
  out.report_kind = in.report_kind;
  out.delivered = in.delivered;
  out.switch_ranks = in.switch_ranks;
  out.switch_ops = in.switch_ops;
  out.who = in.who;
  out.stress_params = in.stress_params;
  out.stress_result = in.stress_result;
  out.node = in.node;
  out.after = current;
  auto& rec = out.after;
  out.path.push_back(rec.state);
  auto event = in.name;
  // Inputs that are not transitions of the reference table.
  if (in.report_kind == "process" && contains(init.strategies, "recover-in-place")) {
    // Software faults reported by the framework: their pods may restart in
    // place (reference §3.7 step 4).
    auto index = pod_of_rank(spec);
    for (const auto& f : in.faults)
      if (auto i = index.find(f.rank_id); i != index.end())
        rec.in_place_pods.insert(i->second);
  }
  if (event == "faultAbsorbed") {
    // A fault during a running flow joins it (reference §4.2).
    merge_faults(rec, spec, in.faults);
    return out;
  }
  if (event == "nodeHealthCleared") {
    // An operator cleared a node a stress test isolated.
    if (rec.unhealthy_nodes.erase(in.node) == 0)
      return make_error(errc::invalid_argument,
                        "node " + in.node + " is not recorded unhealthy");
    return out;
  }
  if (event == "preExit") {
    // Fault-center path for jobs without step retry (reference §4.1 step 8):
    // tell the agent, no flow starts.
    process_signal sig;
    sig.uuid = in.fresh_uuid;
    sig.job_id = spec.job_id;
    sig.signal_type = "preExitProcess";
    sig.actions = {"pre exit process"};
    for (const auto& f : in.faults)
      sig.fault_ranks.push_back({f.rank_id, "1"});
    auto index = pod_of_rank(spec);
    std::set<int32_t> pods;
    for (const auto& f : in.faults)
      if (auto i = index.find(f.rank_id); i != index.end())
        pods.insert(i->second);
    for (auto p : pods)
      sig.node_rank_ids.push_back(std::to_string(p));
    out.side_signals.push_back(std::move(sig));
    return out;
  }
  if (event == "annotationsChanged") {
    if (rec.deadline_event == "platStrategyCheck")
      event = "platStrategyCheck";
    else if (rec.state == st::notify_global_fault && rec.platform_round)
      event = "resultFaultCheck";
    else
      return out;
  }
  if (event == "jobChanged") {
    // Pod changes matter only to the polled waits; re-check them now.
    if (rec.state == st::wait_process_recover_status)
      event = "rescheduleCheck";
    else if (rec.state == st::listen_schedule_result)
      event = "scheduleCheck";
    else if (rec.state == st::fault_retry)
      event = "fallbackCheck";
    else if (rec.state == st::scale_running)
      event = "scaleCheck";
    else
      return out;
  }
  if (event == "faultOccur") {
    if (rec.state != st::init && rec.state != st::scale_running)
      return make_error(errc::unexpected_report,
                        "faultOccur is not accepted in state " + rec.state);
    merge_faults(rec, spec, in.faults);
    if (rec.state == st::init) {
      rec.flow_started_ms = in.now_ms;
      for (const auto& p : spec.pods)
        rec.origin_uids[p.pod_rank] = p.uid;
    }
  }
  if (event == "receiveReport") {
    auto want = expected_report(rec.state);
    // A 406 status during a switch or stress test reports a fault
    // (reference §8.2 step 4, §9.2 step 4).
    bool om_fault = (rec.state == st::wait_switch_nic_finished
                     || rec.state == st::wait_stress_test_finished)
                    && in.report_kind == "status" && in.report.code == 406;
    bool stress = rec.om_kind == "stress";
    if ((want.empty() || want != in.report_kind) && !om_fault)
      return make_error(errc::unexpected_report,
                        "not expected in state " + rec.state);
    if (om_fault)
      event = stress ? "stressTestRecvFault" : "waitSwitchNicRecvFault";
    else if (rec.state == st::wait_pause_complete)
      event = in.report.code == 499 ? "processPauseFail"
              : stress              ? "stressTestRecvPause"
                                    : "switchNicRecvPause";
    else if (rec.state == st::wait_switch_nic_finished && in.report.code != 0)
      event = "switchNicFail";
    else if (rec.state == st::wait_stress_test_finished
             && stress_fails(rec, in.stress_result))
      event = "stressTestFail";
    else if (rec.state == st::wait_continue_train)
      event = in.report.code == 499 ? "continueTrainFail"
              : stress              ? "stressTestRecvContinue"
                                    : "switchNicRecvContinue";
    else if (in.report_kind == "stop" && in.report.code == 404)
      event = "processNotReadyEvent";
    if (in.report_kind == "status" && rec.om_kind.empty())
      rec.results.push_back(in.report);
  }
  ctx c{rec, spec, init, in, waits, out, &device_faults};
  for (int hops = 0; !event.empty(); ++hops) {
    const auto* r = find_rule(rec.state, event);
    if (r == nullptr) {
      if (hops == 0)
        return make_error(errc::unexpected_report,
                          event + " is not accepted in state " + rec.state);
      // An entry action produced an event its state has no rule for: a bug
      // in the table. Stay, but say so in the path.
      out.path.push_back("(no rule for " + event + ")");
      break;
    }
    if (hops > 64)
      return make_error(errc::invalid_argument, "recovery machine loops");
    bool self_loop = std::string{r->from} == r->to;
    rec.state = r->to;
    if (!self_loop || r->entry != nullptr) {
      rec.outbox.reset();
      rec.deadline_ms = 0;
      rec.deadline_event.clear();
    }
    if (!self_loop)
      out.path.push_back(rec.state);
    event = r->entry ? r->entry(c) : no_action(c);
  }
  return out;
}

biz_status validate_switch(const recovery& current, const job_spec& spec,
                           bool registered, bool subscribed,
                           const std::vector<nic_op>& ops,
                           std::vector<std::string>& ranks,
                           std::vector<bool>& to_backup) {
  const auto& id = spec.job_id;
  if (!registered)
    return {413, "job:" + id + " is not registered"};
  if (!job_running(spec))
    return {413, "job:" + id + " is not running"};
  if (ops.empty())
    return {413, "nicOps is empty: nothing to switch"};
  if (!subscribed)
    return {413, "job:" + id + " has no agent subscribed"};
  for (const auto& op : ops) {
    const pod* host = nullptr;
    const device* dev = nullptr;
    for (const auto& p : spec.pods)
      if (p.node_name == op.node) {
        host = &p;
        for (const auto& d : p.devices)
          if (d.device_id == op.device)
            dev = &d;
      }
    if (host == nullptr)
      return {413, "node:" + op.node + " not exist in job:" + id};
    if (op.device.empty())
      return {413, "dev or op is empty"};
    if (dev == nullptr)
      return {413, "device:" + op.device + " not exist in node:" + op.node};
    if (host->super_pod_id < 0)
      return {413, "node:" + op.node + " should operate in superPodID"};
    ranks.push_back(dev->rank_id);
    to_backup.push_back(op.to_backup);
  }
  if (current.state != st::init)
    return {411, "jobId=" + id + " nic is swtiching, or job recovering"};
  return {0, "switching operation was successfully distributed"};
}

biz_status validate_stress(const recovery& current, const job_spec& spec,
                           bool registered, bool subscribed,
                           const stress_request& req, stress_ops_map& params) {
  const auto& id = spec.job_id;
  if (!registered)
    return {413, "job:" + id + " is not registered"};
  if (!job_running(spec))
    return {413, "job:" + id + " is not running"};
  auto bad_ops = [](const std::string& node,
                    const std::vector<int64_t>& ops) -> std::optional<biz_status> {
    std::set<int64_t> seen;
    for (auto op : ops) {
      if (op != 0 && op != 1)
        return biz_status{413, "op:" + std::to_string(op)
                                 + " not exist in support operation:[0 1]"};
      if (!seen.insert(op).second)
        return biz_status{413, "node:" + node + " stress test ops should not repeat"};
    }
    return std::nullopt;
  };
  auto add_node = [&](const std::string& node, const std::vector<int64_t>& ops) {
    bool found = false;
    for (const auto& p : spec.pods)
      if (p.node_name == node) {
        found = true;
        for (const auto& d : p.devices)
          params[d.rank_id] = ops;
      }
    return found;
  };
  if (!req.all_nodes_ops.empty()) {
    // allNodesOps wins; stressParam is ignored unchecked (reference §9.1).
    if (auto bad = bad_ops("AllNodes", req.all_nodes_ops))
      return *bad;
    for (const auto& p : spec.pods)
      add_node(p.node_name, req.all_nodes_ops);
  } else {
    if (req.node_ops.empty())
      return {413, "stress test node is nil"};
    for (const auto& [node, ops] : req.node_ops) {
      if (ops.empty())
        return {413, "node:" + node + " stress test ops is 0"};
      if (!add_node(node, ops))
        return {413, "node:" + node + " not exist in job:" + id};
      if (auto bad = bad_ops(node, ops))
        return *bad;
    }
  }
  if (params.empty())
    return {413, "job:" + id + " has no ranks to stress"};
  if (!subscribed)
    return {413, "job:" + id + " has no agent subscribed"};
  if (current.state != st::init)
    return {411, "jobId=" + id + " om is running, or job recovering"};
  return {0, "stress test operation was successfully distributed"};
}

caf::error validate_stress_results(const job_spec& spec,
                                   const stress_results& results) {
  if (results.empty())
    return make_error(errc::invalid_argument, "stressResult is empty");
  auto index = pod_of_rank(spec);
  for (const auto& [rank, ops] : results) {
    if (index.count(rank) == 0)
      return make_error(errc::invalid_argument,
                        "stressResult: rank " + rank + " is not in job "
                          + spec.job_id);
    for (const auto& [op, r] : ops)
      if (r.code.size() != 1 || r.code[0] < '0' || r.code[0] > '4')
        return make_error(errc::invalid_argument,
                          "stressResult: rank " + rank + " op " + op
                            + " has unknown code \"" + r.code
                            + "\" (allowed: 0..4)");
  }
  return {};
}

caf::expected<std::string>
classify_process_fault(const recovery& current, const job_spec& spec,
                       const init_config& init,
                       const std::vector<fault_rank>& faults) {
  auto index = pod_of_rank(spec);
  bool normal = false;
  for (size_t i = 0; i < faults.size(); ++i) {
    const auto& f = faults[i];
    auto field = "faultRanks[" + std::to_string(i) + "]";
    if (index.count(f.rank_id) == 0)
      return make_error(errc::invalid_argument,
                        field + ".rankId: rank \"" + f.rank_id
                          + "\" is not in the job's topology");
    if (f.fault_type != "0" && f.fault_type != "1" && f.fault_type != "2")
      return make_error(errc::invalid_argument,
                        field + ".faultType: unknown type \"" + f.fault_type
                          + "\" (allowed: 0, 1, 2)");
    normal = normal || f.fault_type == "1";
  }
  if (current.state == st::scale_running && normal)
    return std::string{"faultOccur"};
  if (current.state != st::init)
    return std::string{"faultAbsorbed"};
  if (normal)
    return std::string{"faultOccur"};
  return std::string{supports_retry(spec, init) ? "faultOccur" : "preExit"};
}

namespace {

std::map<std::string, std::string>
wire_faults(const job_spec& spec, bool retry_allowed,
            const std::vector<device_fault>& faults) {
  std::map<std::string, std::string> result;
  for (const auto& f : faults)
    for (const auto& p : spec.pods) {
      if (p.node_name != f.node_name)
        continue;
      for (const auto& d : p.devices) {
        if (d.device_id != f.device_id)
          continue;
        std::string type = "1";
        for (const auto& code : f.fault_codes) {
          if (retry_allowed && code.find("80E01801") != std::string::npos)
            type = "0";
          else if (retry_allowed && code.find("8C1F860B") != std::string::npos)
            type = "2";
        }
        auto& slot = result[d.rank_id];
        if (slot.empty() || type == "1")
          slot = type;
      }
    }
  return result;
}

// The faults a running stress test provokes on the stressed nodes
// (80818C05, 80818C06) are not faults (reference §9.2 step 4.1).
std::vector<device_fault> without_stress_codes(const recovery& rec,
                                               const job_spec& spec,
                                               std::vector<device_fault> faults) {
  std::set<std::string> nodes;
  for (const auto& p : spec.pods)
    for (const auto& d : p.devices)
      if (rec.stress_params.count(d.rank_id) > 0)
        nodes.insert(p.node_name);
  std::vector<device_fault> kept;
  for (auto& f : faults) {
    if (nodes.count(f.node_name) > 0) {
      auto& codes = f.fault_codes;
      auto had = codes.size();
      codes.erase(std::remove_if(codes.begin(), codes.end(),
                                 [](const std::string& code) {
                                   return code.find("80818C05") != std::string::npos
                                          || code.find("80818C06")
                                               != std::string::npos;
                                 }),
                  codes.end());
      if (had > 0 && codes.empty())
        continue;
    }
    kept.push_back(std::move(f));
  }
  return kept;
}

} // namespace

std::pair<std::string, std::vector<fault_rank>>
fault_center_input(const recovery& current, const job_spec& spec,
                   const init_config& init,
                   const std::vector<device_fault>& before,
                   const std::vector<device_fault>& after,
                   const std::string& health_state) {
  if (health_state == "SubHealthy"
      && !(init.sub_healthy_strategy == "graceExit" && is_dump_only(spec, init)))
    return {};
  bool retry = supports_retry(spec, init);
  auto old_faults = wire_faults(spec, retry, before);
  std::vector<fault_rank> fresh;
  bool normal = false;
  // Only a running stress test filters: otherwise the snapshot is used as is.
  std::vector<device_fault> filtered;
  if (current.state == st::wait_stress_test_finished)
    filtered = without_stress_codes(current, spec, after);
  const auto& seen = current.state == st::wait_stress_test_finished ? filtered
                                                                    : after;
  for (const auto& [rank, type] : wire_faults(spec, retry, seen)) {
    auto i = old_faults.find(rank);
    if (i != old_faults.end() && i->second == type)
      continue;
    fresh.push_back({rank, type});
    normal = normal || type == "1";
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const auto& x, const auto& y) { return rank_less(x.rank_id, y.rank_id); });
  if (fresh.empty())
    return {};
  // A flow is running: the faults join it (the reference would send a
  // pre-exit mid-recovery, §15.10).
  if (current.state != st::init)
    return {"faultAbsorbed", fresh};
  if (!retry || normal)
    return {"preExit", fresh};
  return {"faultOccur", fresh};
}

std::string send_result_event(const process_signal& sig) {
  const auto& t = sig.signal_type;
  if (t == "keep-alive" || t == "pauseStartAgent" || t == "continueStartAgent"
      || t == "preExitProcess")
    return {};
  if (t == "killMaster")
    return "finish";
  if (sig.extra_params == "dump_exit")
    return {};
  if (t == "faultNodesExit")
    return "notifyFaultNodesExitSuccessEvent";
  if (t != "changeStrategy")
    return "notifySuccess";
  static const std::map<std::string, std::string> by_strategy = {
    {"retry", "notifyRetryStrategySuccess"},
    {"recover", "notifyRecoverStrategySuccess"},
    {"dump", "notifyDumpStrategySuccess"},
    {"exit", "notifyExitStrategySuccess"},
    {"continue", "notifyContinueSuccessEvent"},
    {"downgrade", "notifyScaleInStrategySuccessEvent"},
    {"upgrade", "notifyScaleOutStrategySuccessEvent"},
    {"migration", "notifySuccess"},
  };
  auto i = by_strategy.find(sig.change_strategy);
  return i == by_strategy.end() ? std::string{} : i->second;
}

std::string reset_document(const std::string& op,
                           const std::vector<int64_t>& ranks,
                           int64_t update_time_s, int32_t retry_time,
                           bool restart_fault_process) {
  // Go's encoding/json of the reference's struct: no spaces, field order,
  // an empty list as [].
  std::string out = "{\"RankList\":[";
  if (op == "fault")
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0)
        out += ',';
      out += "{\"RankId\":" + std::to_string(ranks[i])
             + ",\"LogicId\":0,\"Status\":\"fault\",\"Policy\":\"\","
               "\"InitialPolicy\":\"\",\"ErrorCode\":null,"
               "\"ErrorCodeHex\":\"\"}";
    }
  out += "],\"UpdateTime\":" + std::to_string(update_time_s);
  out += ",\"RetryTime\":" + std::to_string(retry_time);
  out += ",\"FaultFlushing\":";
  out += op == "notifyFaultFlushing" ? "true" : "false";
  out += ",\"GracefulExit\":0,\"RestartFaultProcess\":";
  out += op == "fault" && restart_fault_process ? "true" : "false";
  out += "}";
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string result;
  for (unsigned int i = 0; i < len; ++i) {
    result.push_back(hex[digest[i] >> 4]);
    result.push_back(hex[digest[i] & 0xf]);
  }
  return result;
}

} // namespace recoverd
