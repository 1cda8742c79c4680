// DP scale-in and scale-out (reference §5.5 / §5.6, getDPScaleStrategyRules).

#include "actors/model/machines/machine.hpp"

#include <algorithm>
#include <set>

namespace recoverd::machines {

namespace {

// R31: the recover wait gave up on rescheduling; try DP scale-in.
flow_event on_notify_scale_in(ctx& c) {
  c.rec.flow.decided.push_back("downgrade");
  return send_strategy(c, "downgrade");
}

// The downgrade branch of the result check (reference §5.6).
flow_event on_check_scale_in_isolate(ctx& c) {
  if (c.rec.flow.results.empty())
    return ev::recover_fail;
  const auto& r = c.rec.flow.results.back();
  if (r.code == 0)
    return ev::scale_in_success; // the reference drops this and gets stuck
  if (r.code != 201)
    return ev::recover_fail;
  std::set<int32_t> pods;
  for (const auto& rank : r.isolate_ranks) {
    const auto* place = c.ranks.find(rank);
    if (place == nullptr)
      return ev::notify_fail;
    if (c.rec.flow.fault_pods.count(place->pod_rank) == 0)
      pods.insert(place->pod_rank);
  }
  auto sig = c.signal("faultNodesExit");
  sig.actions = {"fault_nodes_exit"};
  for (auto p : pods) {
    c.add_fault_pod(p);
    sig.node_rank_ids.push_back(std::to_string(p));
  }
  return c.notify(std::move(sig));
}

// DP scale-out: once a replacement pod runs, bring the job back to full
// size.
flow_event on_scale_running(ctx& c) {
  // A check while the upgrade signal still waits for the agent keeps it.
  if (!c.rec.flow.decided.empty() && c.rec.flow.decided.back() == "upgrade")
    return send_strategy(c, "upgrade");
  if (!job_running(c.spec) || !c.any_pod_rescheduled())
    return {};
  c.rec.flow.decided.push_back("upgrade");
  return send_strategy(c, "upgrade");
}

} // namespace

const std::vector<rule>& dp_scale_rules() {
  static const std::vector<rule> table = {
    {st::notify_decided_strategy, ev::notify_scale_in_success,
     st::wait_scale_in_isolate, on_wait_report}, // R25
    {st::wait_process_recover_status, ev::need_try_scale_in,
     st::notify_scale_in, on_notify_scale_in}, // R31
    {st::notify_scale_in, ev::notify_scale_in_success,
     st::wait_scale_in_isolate, on_wait_report},
    {st::notify_scale_in, ev::notify_fail, st::fault_clear, on_fault_clear},
    {st::wait_scale_in_isolate, ev::receive_report, st::check_scale_in_isolate,
     on_check_scale_in_isolate},
    {st::wait_scale_in_isolate, ev::receive_timeout,
     st::notify_decided_strategy, on_decide},
    {st::check_scale_in_isolate, ev::notify_fault_nodes_exit_success,
     st::wait_scale_in_status, on_wait_report},
    {st::check_scale_in_isolate, ev::notify_fail, st::notify_decided_strategy,
     on_decide},
    {st::check_scale_in_isolate, ev::recover_fail, st::notify_decided_strategy,
     on_decide},
    {st::check_scale_in_isolate, ev::scale_in_success, st::scale_running,
     on_scale_running}, // fix of §15.5
    {st::wait_scale_in_status, ev::receive_report, st::check_recover_result,
     on_check_result},
    {st::wait_scale_in_status, ev::receive_timeout, st::fault_clear,
     on_fault_clear},
    {st::check_recover_result, ev::scale_in_success, st::scale_running,
     on_scale_running},
    {st::check_recover_result, ev::scale_out_success, st::init, on_reset},
    {st::scale_running, ev::scale_check, st::scale_running, on_scale_running},
    {st::scale_running, ev::notify_scale_out_success, st::wait_scale_out_status,
     on_wait_report},
    {st::scale_running, ev::fault_occur, st::notify_stop_train,
     on_notify_stop_train},
    {st::scale_running, ev::finish, st::init, on_reset},
    {st::scale_running, ev::notify_fail, st::scale_running, on_scale_running},
    {st::wait_scale_out_status, ev::receive_report, st::check_recover_result,
     on_check_result},
    {st::wait_scale_out_status, ev::receive_timeout, st::fault_clear,
     on_fault_clear},
  };
  return table;
}

} // namespace recoverd::machines
