// Process-level recovery (reference §5): rows R1..R46 and their entry
// actions.

#include "actors/model/machines/machine.hpp"

#include <algorithm>
#include <set>

#include "actors/model/fault_center.hpp"
#include "actors/model/text.hpp"

namespace recoverd::machines {

namespace {

// R1 B/C: dying-gasp dump for dump-only jobs, otherwise the flush notice.
flow_event begin_flush(ctx& c) {
  if (c.dump_only() && c.has_normal()) {
    if (!c.agent("dump"))
      c.rec.flow.agent_strategies.push_back("dump");
    return ev::dump_for_fault;
  }
  c.write_reset("notifyFaultFlushing");
  return ev::notify_finish;
}

// R1 A, platform mode: has the platform written a usable strategy yet?
flow_event on_plat_strategy_check(ctx& c) {
  if (usable_platform_strategy(c.plat())) {
    c.rec.flow.wait_until_ms = 0;
    return begin_flush(c);
  }
  if (c.in.now_ms >= c.rec.flow.wait_until_ms)
    return ev::wait_plat_strategy_timeout;
  return c.arm(
    std::min(c.waits.poll, millis{c.rec.flow.wait_until_ms - c.in.now_ms}),
    ev::plat_strategy_check);
}

// The restart budget (crash-loop guard, not in the reference): a fault
// recovery may start if fewer than N started within the window; the
// daemon's budget unless the job's annotation sets its own (a malformed
// annotation keeps the daemon's, so a typo cannot switch the guard off).
bool within_budget(ctx& c) {
  auto flows = c.waits.budget_flows;
  auto window = c.waits.budget_window;
  auto own = c.spec.annotations.find(restart_budget_annotation);
  if (own != c.spec.annotations.end()) {
    uint32_t n = 0;
    millis w{0};
    if (parse_restart_budget(own->second, n, w)) {
      flows = n;
      window = w;
    }
  }
  auto& starts = c.rec.job.recovery_starts;
  if (flows == 0) {
    starts.clear();
    return true;
  }
  starts.erase(std::remove_if(starts.begin(), starts.end(),
                              [&](int64_t t) {
                                return t <= c.in.now_ms - window.count();
                              }),
               starts.end());
  if (starts.size() >= flows)
    return false;
  starts.push_back(c.in.now_ms);
  return true;
}

// R1: a fault starts a flow.
flow_event on_fault_occur(ctx& c) {
  if (!within_budget(c)) {
    c.rec.flow.over_budget = true;
    return c.waits.budget_exit ? ev::budget_exit : ev::budget_reschedule;
  }
  if (!c.init.platform_mode)
    return begin_flush(c);
  c.rec.flow.wait_until_ms = c.in.now_ms + c.waits.platform.count();
  return on_plat_strategy_check(c);
}

// R4: dying-gasp dump for dump-only jobs.
flow_event on_notify_dump(ctx& c) {
  if (c.rec.flow.uuid.empty())
    c.rec.flow.uuid = c.in.fresh_uuid;
  c.expand_normal();
  c.write_reset("fault");
  auto sig = c.signal("saveAndExit");
  sig.actions = {"save_and_exit"};
  sig.node_rank_ids = c.fault_pod_list();
  sig.fault_ranks = c.fault_list(true);
  return c.notify(std::move(sig));
}

// R10 / R36: normalise the caches, then flush.
flow_event on_flush(ctx& c) {
  bool both_retry_types = false;
  {
    bool zero = false;
    bool two = false;
    for (const auto& [rank, type] : c.rec.flow.faults) {
      zero = zero || type == fault_type::uce;
      two = two || type == fault_type::network;
    }
    both_retry_types = zero && two;
  }
  bool last_retry = !c.rec.flow.results.empty()
    && c.rec.flow.results.back().strategy == "retry";
  if (last_retry || c.has_normal() || !c.support_retry() || both_retry_types)
    c.retry_to_normal();
  if (c.has_retry() && !c.has_normal() && c.configured("retry"))
    return ev::flush_finished;
  return c.arm(c.waits.fault_flush, ev::flush_finished);
}

// The globalFault of retry faults (reference §5.4 case 1).
flow_event send_retry_global_fault(ctx& c) {
  auto sig = c.signal("globalFault");
  sig.actions = {"on_global_rank"};
  sig.fault_ranks = c.fault_list(false);
  for (const auto& f : sig.fault_ranks)
    if (f.fault_type == "2")
      sig.timeout = 33;
  return c.notify(std::move(sig));
}

// The globalFault of normal faults, expanded to whole pods (case 2).
flow_event send_normal_global_fault(ctx& c) {
  if (c.configured("recover-in-place") && !c.rec.flow.in_place_pods.empty()
      && !c.rec.flow.in_place_checked) {
    // Reference §5.4 step 3: give the faults time to clear before deciding
    // which pods restart in place.
    c.rec.flow.in_place_checked = true;
    return c.arm(c.waits.recover_in_place, ev::in_place_checked);
  }
  c.expand_normal();
  c.write_reset("fault");
  auto sig = c.signal("globalFault");
  sig.actions = {"on_global_rank", "fault_nodes_exit"};
  sig.fault_ranks = c.fault_list(true);
  sig.node_rank_ids = c.exit_node_ranks();
  return c.notify(std::move(sig));
}

// After the recover-in-place wait: pods whose device fault has not cleared
// must exit; the others restart in place.
flow_event on_in_place_checked(ctx& c) {
  std::set<int32_t> faulty;
  if (c.device_faults != nullptr)
    for (const auto& f : *c.device_faults) {
      // Levels that are no fault for recovery do not keep a pod from
      // restarting in place.
      auto level = classify_level(f.fault_level);
      if (level == level_class::not_handled || level == level_class::no_fault)
        continue;
      for (const auto& p : c.spec.pods)
        if (p.node_name == f.node_name)
          for (const auto& d : p.devices)
            if (f.device_id.empty() || d.device_id == f.device_id)
              faulty.insert(p.pod_rank);
    }
  for (auto p : faulty)
    c.rec.flow.in_place_pods.erase(p);
  c.rec.flow.restart_in_place = !c.rec.flow.in_place_pods.empty();
  return send_normal_global_fault(c);
}

// Platform mode (reference §7): write ProcessConfirmFault, then wait for
// ProcessResultFault.
flow_event start_platform_round(ctx& c) {
  auto existing = c.spec.annotations.find("ProcessConfirmFault");
  if (existing != c.spec.annotations.end() && !existing->second.empty())
    return ev::confirm_fault_timeout;
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
  c.rec.flow.platform_round = true;
  c.rec.flow.wait_until_ms = c.in.now_ms + c.waits.platform.count();
  c.rec.flow.deadline_ms = c.rec.flow.wait_until_ms;
  c.rec.flow.deadline_event = ev::confirm_fault_timeout;
  return {};
}

// Platform mode: the platform's result list arrived?
flow_event on_result_fault_check(ctx& c) {
  auto keep_waiting = [&c] {
    c.rec.flow.deadline_ms = c.rec.flow.wait_until_ms;
    c.rec.flow.deadline_event = ev::confirm_fault_timeout;
    return ev::none;
  };
  if (!c.rec.flow.platform_round)
    return {};
  auto result = c.spec.annotations.find("ProcessResultFault");
  if (result == c.spec.annotations.end())
    return keep_waiting();
  c.rec.flow.platform_round = false;
  c.rec.flow.wait_until_ms = 0;
  // Union of the result list and the confirm list; normal wins over retry.
  size_t start = 0;
  const auto& text = result->second;
  std::vector<fault_rank> listed;
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
    if (c.ranks.find(rank) == nullptr || !fault_type_from_string(type))
      continue;
    listed.push_back({std::move(rank), std::move(type)});
  }
  // The platform's list joins the caches; the job's health stays as the
  // faults that started the flow made it.
  auto health = c.rec.flow.health;
  c.merge(listed);
  c.rec.flow.health = std::move(health);
  // Re-read the strategy; `exit` is accepted here.
  if (!usable_platform_strategy(c.plat()))
    return ev::confirm_fault_timeout;
  if (!c.has_normal() && c.has_retry())
    return send_retry_global_fault(c);
  return send_normal_global_fault(c);
}

// R13: the global fault notice (reference §5.4).
flow_event on_global_fault(ctx& c) {
  if (c.has_retry() && !c.has_normal()) {
    if (c.init.platform_mode)
      return start_platform_round(c);
    return send_retry_global_fault(c);
  }
  // Resource force-release before the normal-fault notice.
  return c.arm(c.waits.resource_release, ev::resource_released);
}

flow_event on_resource_released(ctx& c) {
  if (c.init.platform_mode)
    return start_platform_round(c);
  return send_normal_global_fault(c);
}

// §5.5: the strategy ladder.
std::string choose(ctx& c) {
  const auto& results = c.rec.flow.results;
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

flow_event on_hccl_converged(ctx& c) {
  auto strategy = c.rec.flow.pending_strategy;
  c.rec.flow.pending_strategy.clear();
  return send_strategy(c, strategy);
}

// R37
flow_event on_kill_pod_for_retry(ctx& c) {
  c.retry_to_normal();
  c.expand_normal();
  c.write_reset("fault");
  return ev::finish_kill_pod;
}

// R22: waiting for the recover result while pods are rescheduled.
flow_event on_wait_recover(ctx& c) {
  c.rec.flow.wait_until_ms = c.in.now_ms + c.waits.reschedule.count();
  c.rec.flow.deadline_ms
    = c.in.now_ms
    + std::max<int64_t>(
        1, std::min(c.waits.report.count(), c.waits.reschedule.count()));
  c.rec.flow.deadline_event = ev::reschedule_check;
  return {};
}

flow_event on_reschedule_check(ctx& c) {
  if (c.pods_rescheduled()
      || (c.rec.flow.restart_in_place && job_running(c.spec)
          && c.must_exit_pods().empty())) {
    c.write_reset("clear");
    c.rec.flow.wait_until_ms = 0;
    return c.wait_report();
  }
  if (c.in.now_ms >= c.rec.flow.wait_until_ms && c.rec.flow.wait_until_ms != 0)
    return c.can_scale_in() ? ev::need_try_scale_in : ev::schedule_timeout;
  c.rec.flow.deadline_ms = c.rec.flow.wait_until_ms;
  c.rec.flow.deadline_event = ev::reschedule_check;
  return {};
}

// R38: did the platform reschedule the job after dump/exit?
flow_event on_listen_schedule(ctx& c) {
  if (c.init.platform_mode || c.pods_rescheduled())
    return ev::schedule_success;
  c.rec.flow.wait_until_ms = c.in.now_ms + c.waits.exit_reschedule.count();
  return c.arm(std::min(c.waits.poll, c.waits.exit_reschedule),
               ev::schedule_check);
}

flow_event on_schedule_check(ctx& c) {
  if (c.pods_rescheduled())
    return ev::schedule_success;
  if (c.in.now_ms >= c.rec.flow.wait_until_ms)
    return job_running(c.spec) ? ev::schedule_success : ev::schedule_timeout;
  return c.arm(
    std::min(c.waits.poll, millis{c.rec.flow.wait_until_ms - c.in.now_ms}),
    ev::schedule_check);
}

// R40
flow_event on_restart_all(ctx& c) {
  c.write_reset("restartAllProcess");
  return ev::notify_success;
}

flow_event on_wait_restart_all(ctx& c) {
  return c.arm(c.init.platform_mode ? millis{0} : c.waits.restart_all,
               ev::restart_finish);
}

// R43: job-level fallback.
flow_event on_fault_retry(ctx& c) {
  c.rec.job.label = "pause";
  auto sig = c.signal("changeStrategy");
  sig.actions = {"change_strategy"};
  sig.change_strategy = "exit";
  sig.extra_params = "dump_exit";
  sig.node_rank_ids = c.fault_pod_list();
  c.out.side_signals.push_back(std::move(sig));
  c.rec.flow.wait_until_ms = c.in.now_ms + c.waits.job_fallback.count();
  return c.arm(
    std::max(millis{1}, std::min(c.waits.poll, c.waits.job_fallback)),
    ev::fallback_check);
}

flow_event on_fallback_check(ctx& c) {
  if (job_running(c.spec)) {
    c.rec.job.label = "on";
    return ev::finish;
  }
  if (c.in.now_ms >= c.rec.flow.wait_until_ms)
    return ev::schedule_timeout;
  return c.arm(
    std::max(
      millis{1},
      std::min(c.waits.poll, millis{c.rec.flow.wait_until_ms - c.in.now_ms})),
    ev::fallback_check);
}

} // namespace

flow_event no_action(ctx&) {
  return {};
}

flow_event on_wait_report(ctx& c) {
  return c.wait_report();
}

// R2: stopTrain with a fresh uuid.
flow_event on_notify_stop_train(ctx& c) {
  c.rec.flow.uuid = c.in.fresh_uuid;
  auto sig = c.signal("stopTrain");
  sig.actions = {"stop_train"};
  sig.fault_ranks = c.all_faults();
  return c.notify(std::move(sig));
}

flow_event send_strategy(ctx& c, const std::string& strategy) {
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
  if (c.rec.flow.restart_in_place && strategy != "retry") {
    // Any other strategy: every in-place pod exits after all.
    c.rec.flow.restart_in_place = false;
    c.rec.flow.in_place_pods.clear();
    c.expand_normal();
    sig.actions.push_back("fault_nodes_exit");
    sig.fault_ranks = c.all_faults();
    sig.node_rank_ids = c.exit_node_ranks();
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

// R17 / R35 / R39: decide and send changeStrategy.
flow_event on_decide(ctx& c) {
  if (c.in.kind == report_kind::strategy)
    c.rec.flow.agent_strategies = c.in.strategies;
  auto strategy = choose(c);
  if (strategy == "recover" && c.init.platform_mode
      && c.spec.annotations.count("RankTableReady") > 0
      && c.spec.annotations.at("RankTableReady") != "true")
    strategy = c.support_dump() ? "dump" : "exit";
  c.rec.flow.decided.push_back(strategy);
  bool network_fault = false;
  for (const auto& [rank, type] : c.rec.flow.faults)
    network_fault = network_fault || type == fault_type::network;
  if (strategy == "retry" && network_fault) {
    // HCCL routing convergence before a step retry.
    c.rec.flow.pending_strategy = strategy;
    auto next = c.arm(c.waits.hccl_convergence, ev::hccl_converged);
    if (next != ev::none)
      return send_strategy(c, strategy);
    return {};
  }
  return send_strategy(c, strategy);
}

// §5.6: the result check.
flow_event on_check_result(ctx& c) {
  if (!c.rec.flow.decided.empty() && c.rec.flow.decided.back() == "exit") {
    c.set_status("exit-completed");
    return ev::check_finish;
  }
  if (c.rec.flow.results.empty())
    return ev::check_finish;
  const auto& r = c.rec.flow.results.back();
  bool ok = r.code == 0;
  if (r.strategy == "retry") {
    c.set_status(ok ? "retry-success" : "retry-failed");
    if (ok)
      return ev::recover_success;
    if (r.code == 405)
      return ev::recoverable_retry_error;
    auto& xs = c.rec.flow.agent_strategies;
    xs.erase(std::remove(xs.begin(), xs.end(), "recover"), xs.end());
    if (r.code == 499)
      xs.erase(std::remove(xs.begin(), xs.end(), "dump"), xs.end());
    return ev::unrecoverable_retry_error;
  }
  if (r.strategy == "recover") {
    c.set_status(ok ? "recover-success" : "recover-failed");
    return ok ? ev::recover_success : ev::recover_fail;
  }
  if (r.strategy == "downgrade")
    return ok ? ev::scale_in_success : ev::recover_fail;
  if (r.strategy == "upgrade")
    return ok ? ev::scale_out_success : ev::recover_fail;
  if (r.strategy == "dump") {
    c.set_status(ok ? "dump-success" : "dump-failed");
    auto sig = c.signal("changeStrategy");
    sig.actions = {"change_strategy"};
    sig.change_strategy = "exit";
    sig.extra_params = "dump_exit";
    sig.node_rank_ids = c.fault_pod_list();
    c.out.side_signals.push_back(std::move(sig));
    return ev::check_finish;
  }
  // A report for a strategy the daemon did not decide: judge by the decided
  // one instead of trusting the report (reference §15.3).
  c.set_status(c.rec.flow.decided.empty()
                 ? "exit-completed"
                 : c.rec.flow.decided.back() + "-failed");
  return ev::recover_fail;
}

// R41
flow_event on_fault_clear(ctx& c) {
  c.write_reset("clear");
  return ev::clear_success;
}

// R45
flow_event on_kill_job(ctx& c) {
  auto sig = c.signal("killMaster");
  c.rec.flow.outbox = std::move(sig);
  // The reference gives up on a killMaster nobody takes after 60 s and ends
  // the flow anyway.
  c.rec.flow.deadline_ms
    = c.in.now_ms + std::max<int64_t>(1, c.waits.notify.count());
  c.rec.flow.deadline_event = ev::finish;
  return {};
}

// Back to idle: the flow is over.
flow_event on_reset(ctx& c) {
  auto& r = c.rec;
  // The state the flow ended from tells how it ended.
  auto from
    = c.out.path.size() >= 2 ? c.out.path[c.out.path.size() - 2] : st::init;
  auto status = c.out.annotations.find("ProcessRecoverStatus");
  if (r.flow.over_budget)
    r.job.last_outcome = from == st::notify_kill_job
                           ? "restart-budget-killed"
                           : "restart-budget-fallback";
  else if (from == st::notify_kill_job)
    r.job.last_outcome = "killed";
  else if (from == st::fault_retry)
    r.job.last_outcome = "job-level-fallback";
  else if (status != c.out.annotations.end())
    r.job.last_outcome = status->second;
  else
    r.job.last_outcome = "recovered";
  ++r.job.flows;
  // The flow and its operator action end: what outlives them is `job`.
  r.flow = {};
  r.action = {};
  // Fix of reference §15.9: the confirm list of a finished round is removed,
  // so the next round is not blocked by it.
  if (c.init.platform_mode
      && c.spec.annotations.count("ProcessConfirmFault") > 0)
    c.out.removed_annotations.push_back("ProcessConfirmFault");
  c.write_reset("clear");
  return {};
}

const std::vector<rule>& recovery_rules() {
  static const std::vector<rule> table = {
    {st::init, ev::fault_occur, st::notify_wait_fault_flushing,
     on_fault_occur}, // R1
    {st::notify_wait_fault_flushing, ev::plat_strategy_check,
     st::notify_wait_fault_flushing, on_plat_strategy_check}, // R1 A
    {st::notify_wait_fault_flushing, ev::notify_finish, st::notify_stop_train,
     on_notify_stop_train}, // R2
    {st::notify_wait_fault_flushing, ev::wait_plat_strategy_timeout,
     st::fault_retry, on_fault_retry}, // R3
    {st::notify_wait_fault_flushing, ev::dump_for_fault, st::notify_dump,
     on_notify_dump}, // R4
    {st::notify_wait_fault_flushing, ev::notify_fail, st::notify_kill_job,
     on_kill_job}, // R5
    // Past the restart budget: no recovery in place (not in the reference).
    {st::notify_wait_fault_flushing, ev::budget_reschedule, st::fault_retry,
     on_fault_retry},
    {st::notify_wait_fault_flushing, ev::budget_exit, st::notify_kill_job,
     on_kill_job},
    {st::notify_stop_train, ev::notify_success, st::wait_stop_complete,
     on_wait_report}, // R6
    {st::notify_stop_train, ev::notify_fail, st::fault_clear,
     on_fault_clear}, // R7
    {st::notify_dump, ev::notify_success, st::wait_dump_status,
     on_wait_report},                                                    // R8
    {st::notify_dump, ev::notify_fail, st::fault_clear, on_fault_clear}, // R9
    {st::wait_stop_complete, ev::receive_report, st::wait_fault_flush_finished,
     on_flush}, // R10
    {st::wait_stop_complete, ev::receive_timeout, st::fault_clear,
     on_fault_clear}, // R11
    {st::wait_stop_complete, ev::process_not_ready, st::notify_kill_job,
     on_kill_job}, // R12
    {st::wait_fault_flush_finished, ev::flush_finished, st::notify_global_fault,
     on_global_fault}, // R13
    {st::notify_global_fault, ev::resource_released, st::notify_global_fault,
     on_resource_released}, // R13 (wait)
    {st::notify_global_fault, ev::notify_success, st::wait_recover_strategy,
     on_wait_report}, // R14
    {st::notify_global_fault, ev::notify_fail, st::notify_kill_job,
     on_kill_job}, // R15
    {st::notify_global_fault, ev::in_place_checked, st::notify_global_fault,
     on_in_place_checked}, // §5.4 step 3
    {st::notify_global_fault, ev::result_fault_check, st::notify_global_fault,
     on_result_fault_check}, // §7 round
    {st::notify_global_fault, ev::confirm_fault_timeout, st::fault_retry,
     on_fault_retry}, // R16
    {st::wait_recover_strategy, ev::receive_report, st::notify_decided_strategy,
     on_decide}, // R17
    {st::wait_recover_strategy, ev::receive_timeout, st::fault_clear,
     on_fault_clear}, // R18
    {st::notify_decided_strategy, ev::hccl_converged,
     st::notify_decided_strategy, on_hccl_converged}, // R17 (wait)
    {st::notify_decided_strategy, ev::notify_fail, st::fault_clear,
     on_fault_clear}, // R19
    {st::notify_decided_strategy, ev::notify_retry_strategy_success,
     st::wait_step_retry_status, on_wait_report}, // R21
    {st::notify_decided_strategy, ev::notify_recover_strategy_success,
     st::wait_process_recover_status, on_wait_recover}, // R22
    {st::notify_decided_strategy, ev::notify_dump_strategy_success,
     st::wait_dump_status, on_wait_report}, // R23
    {st::notify_decided_strategy, ev::notify_exit_strategy_success,
     st::check_recover_result, on_check_result}, // R24
    {st::wait_step_retry_status, ev::receive_report, st::check_recover_result,
     on_check_result}, // R26
    {st::wait_step_retry_status, ev::receive_timeout, st::fault_retry,
     on_fault_retry}, // R27
    {st::wait_process_recover_status, ev::receive_report,
     st::check_recover_result, on_check_result}, // R28
    {st::wait_process_recover_status, ev::reschedule_check,
     st::wait_process_recover_status, on_reschedule_check}, // R22 (watcher)
    {st::wait_process_recover_status, ev::schedule_timeout, st::fault_clear,
     on_fault_clear}, // R29
    {st::wait_process_recover_status, ev::receive_timeout, st::fault_clear,
     on_fault_clear}, // R29
    {st::wait_dump_status, ev::receive_report, st::check_recover_result,
     on_check_result}, // R32
    {st::wait_dump_status, ev::receive_timeout, st::fault_clear,
     on_fault_clear},                                                    // R33
    {st::check_recover_result, ev::recover_success, st::init, on_reset}, // R34
    {st::check_recover_result, ev::recover_fail, st::notify_decided_strategy,
     on_decide}, // R35
    {st::check_recover_result, ev::recoverable_retry_error,
     st::wait_fault_flush_finished, on_flush}, // R36
    {st::check_recover_result, ev::unrecoverable_retry_error,
     st::kill_pod_for_unrecoverable_retry, on_kill_pod_for_retry}, // R37
    {st::check_recover_result, ev::check_finish, st::listen_schedule_result,
     on_listen_schedule}, // R38
    {st::kill_pod_for_unrecoverable_retry, ev::finish_kill_pod,
     st::notify_decided_strategy, on_decide}, // R39
    {st::listen_schedule_result, ev::schedule_check, st::listen_schedule_result,
     on_schedule_check}, // R38 (poll)
    {st::listen_schedule_result, ev::schedule_success,
     st::notify_restart_all_process, on_restart_all}, // R40
    {st::listen_schedule_result, ev::schedule_timeout, st::fault_clear,
     on_fault_clear}, // R40
    {st::notify_restart_all_process, ev::notify_success,
     st::wait_restart_all_process, on_wait_restart_all}, // R40b
    {st::notify_restart_all_process, ev::notify_fail, st::fault_clear,
     on_fault_clear}, // R40b
    {st::wait_restart_all_process, ev::restart_finish, st::fault_clear,
     on_fault_clear}, // R40c
    {st::fault_clear, ev::clear_success, st::fault_retry,
     on_fault_retry},                                                    // R41
    {st::fault_clear, ev::clear_fail, st::notify_kill_job, on_kill_job}, // R41
    {st::fault_retry, ev::fallback_check, st::fault_retry,
     on_fallback_check},                               // R43 (poll)
    {st::fault_retry, ev::finish, st::init, on_reset}, // R44
    {st::fault_retry, ev::change_switch_pause_error, st::notify_kill_job,
     on_kill_job}, // R44
    {st::fault_retry, ev::change_switch_enable_error, st::notify_kill_job,
     on_kill_job}, // R44
    {st::fault_retry, ev::schedule_timeout, st::notify_kill_job,
     on_kill_job},                                         // R44
    {st::notify_kill_job, ev::finish, st::init, on_reset}, // R46
  };
  return table;
}

} // namespace recoverd::machines
