// Link failover / switchback (reference §8): the request's validator, the
// rows between the pause and the continue, and how a failed switch turns
// into a recovery.

#include "actors/model/machines/machine.hpp"

#include <set>
#include <utility>

#include "actors/model/text.hpp"

namespace recoverd {

namespace machines {

namespace {

flow_event on_start_switch(ctx& c) {
  c.rec.action.switch_ranks = c.in.switch_ranks;
  c.rec.action.switch_ops = c.in.switch_ops;
  return begin_om(c, om_kind::switch_nic, 0);
}

flow_event on_notify_switch_nic(ctx& c) {
  return notify_worker(c, "SwitchRankList");
}

flow_event on_switch_failed(ctx& c) {
  std::string why = c.in.kind == report_kind::switch_nic ? "switch nic failed"
    : c.in.kind == report_kind::status ? "report error when switching nic"
                                       : "report switch nic timeout";
  om_say(c, "switch nic failed, " + why, true);
  om_clear(c);
  return on_notify_stop_train(c);
}

} // namespace

const std::vector<rule>& switch_nic_rules() {
  static const std::vector<rule> table = {
    {st::init, ev::start_switch_nic, st::notify_pause_train, on_start_switch},
    {st::wait_pause_complete, ev::switch_nic_recv_pause, st::notify_switch_nic,
     on_notify_switch_nic},
    // SwitchRankList delivered to a worker: wait for its result.
    {st::notify_switch_nic, ev::notify_success, st::wait_switch_nic_finished,
     on_wait_report},
    {st::notify_switch_nic, ev::notify_fail, st::notify_kill_job, on_om_kill},
    {st::wait_switch_nic_finished, ev::receive_report,
     st::notify_continue_train, on_notify_continue},
    // A failed switch, a fault reported during it, or no result in time:
    // training stays stopped and a recovery follows.
    {st::wait_switch_nic_finished, ev::switch_nic_fail, st::notify_stop_train,
     on_switch_failed},
    {st::wait_switch_nic_finished, ev::switch_nic_recv_fault,
     st::notify_stop_train, on_switch_failed},
    {st::wait_switch_nic_finished, ev::receive_timeout, st::notify_stop_train,
     on_switch_failed},
  };
  return table;
}

} // namespace machines

using namespace machines;

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
  std::set<std::pair<std::string, std::string>> seen;
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
      return {413, "node:" + excerpt(op.node) + " not exist in job:" + id};
    if (op.device.empty())
      return {413, "dev or op is empty"};
    if (dev == nullptr)
      return {413, "device:" + excerpt(op.device) + " not exist in node:"
                     + excerpt(op.node)};
    if (host->super_pod_id < 0)
      return {413, "node:" + excerpt(op.node) + " should operate in superPodID"};
    // One device, two operations: which one wins would be up to the worker.
    if (!seen.emplace(op.node, op.device).second)
      return {413, "device:" + excerpt(op.device) + " of node:"
                     + excerpt(op.node) + " is listed twice"};
    ranks.push_back(dev->rank_id);
    to_backup.push_back(op.to_backup);
  }
  if (current.flow.state != st::init)
    return {411, "jobId=" + id + " nic is swtiching, or job recovering"};
  return {0, "switching operation was successfully distributed"};
}

} // namespace recoverd
