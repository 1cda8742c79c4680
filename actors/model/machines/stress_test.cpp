// Online stress test (reference §9): the request's and the result's
// validators, the rows between the pause and the continue, and what each
// result code does (`verdict_of` in vocabulary.cpp says what a code means;
// `take_stress_result` below applies it: code 2 isolates the node, 3 and 4
// fault the rank, 0 and 1 pass).

#include "actors/model/machines/machine.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "actors/model/reset_document.hpp"
#include "actors/model/text.hpp"

namespace recoverd {

namespace machines {

namespace {

flow_event on_start_stress(ctx& c) {
  c.rec.action.stress_params = c.in.stress_params;
  return begin_om(c, om_kind::stress, 900);
}

flow_event on_notify_stress(ctx& c) {
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
flow_event on_stress_running(ctx& c) {
  c.rec.flow.uuid = c.in.fresh_uuid;
  auto sig = c.signal("pauseStartAgent");
  sig.actions = {"pause_start_agent"};
  c.out.side_signals.push_back(std::move(sig));
  c.write_reset("notifyFaultFlushing");
  return c.wait_report();
}

// ReportRecoverStatus(406) while the test runs: a fault; wait on for the
// result, then recover whatever it says.
flow_event on_stress_fault(ctx& c) {
  c.rec.action.stress_fault = true;
  om_say(c, "recv fault, when stressing test");
  return c.wait_report();
}

// Takes the stress result (reference §9.2 step 4): clears the reset
// document, lets the agent start again, classifies each (rank, op) code,
// and tells the operator. Fills `isolate_nodes` and the fault cache.
void take_stress_result(ctx& c) {
  c.write_reset("clear");
  c.rec.flow.uuid = derived_uuid(c.in.fresh_uuid);
  auto sig = c.signal("continueStartAgent");
  sig.actions = {"continue_start_agent"};
  c.out.side_signals.push_back(std::move(sig));
  std::set<std::string> isolate;
  std::vector<fault_rank> faulty;
  nlohmann::json detail = nlohmann::json::object();
  for (const auto& [rank, ops] : c.in.stress_result) {
    const auto* place = c.ranks.find(rank);
    if (place == nullptr || place->pod_index >= c.spec.pods.size())
      continue; // validated before; a spec change since is not fatal
    const auto& host = c.spec.pods[place->pod_index];
    const auto& device = host.devices[place->device_index].device_id;
    bool rank_fault = false;
    for (const auto& [op, r] : ops) {
      detail[host.node_name][device][op]
        = {{"code", r.code}, {"result", r.result}};
      switch (verdict_of(r.code)) {
        case stress_verdict::pass: break;
        case stress_verdict::isolate_node:
          isolate.insert(host.node_name);
          break;
        case stress_verdict::fault_rank: rank_fault = true; break;
      }
    }
    if (rank_fault)
      faulty.push_back({rank, "1"});
  }
  c.merge(faulty);
  c.rec.flow.isolate_nodes.assign(isolate.begin(), isolate.end());
  std::vector<std::string> ranks;
  for (const auto& f : faulty)
    ranks.push_back(f.rank_id);
  std::sort(ranks.begin(), ranks.end(), rank_less);
  auto json = detail.dump();
  bool failed
    = !isolate.empty() || !faulty.empty() || c.rec.action.stress_fault;
  if (!isolate.empty())
    om_say(c,
           "stress test find fault, isolate node:"
             + go_list(c.rec.flow.isolate_nodes) + ",result:" + json,
           failed);
  else if (!faulty.empty())
    om_say(c,
           "stress test timeout fault, faultRank:" + go_list(ranks)
             + ",result:" + json,
           failed);
  else
    om_say(c, "stress test finish, result:" + json, failed);
}

flow_event on_stress_passed(ctx& c) {
  take_stress_result(c);
  return on_notify_continue(c);
}

// stressTestFail (reference §9.2 step 5): every rank of an isolated node is
// a fault, the node is recorded unhealthy, and a recovery stops training.
flow_event on_stress_failed(ctx& c) {
  take_stress_result(c);
  std::vector<fault_rank> node_faults;
  for (const auto& node : c.rec.flow.isolate_nodes) {
    c.rec.job.unhealthy_nodes[node] = c.in.now_ms;
    for (auto i : c.ranks.pods_on(node))
      for (const auto& d : c.spec.pods[i].devices)
        node_faults.push_back({d.rank_id, "1"});
  }
  c.merge(node_faults);
  c.rec.flow.isolate_nodes.clear();
  om_clear(c);
  return on_notify_stop_train(c);
}

flow_event on_stress_timeout(ctx& c) {
  om_say(c, "stress test failed, report stress test timeout", true);
  om_clear(c);
  return on_notify_stop_train(c);
}

} // namespace

bool stress_fails(const recovery& rec, const stress_results& results) {
  if (rec.action.stress_fault)
    return true;
  for (const auto& [rank, ops] : results)
    for (const auto& [op, r] : ops)
      if (verdict_of(r.code) != stress_verdict::pass)
        return true;
  return false;
}

const std::vector<rule>& stress_test_rules() {
  static const std::vector<rule> table = {
    {st::init, ev::start_stress_test, st::notify_pause_train, on_start_stress},
    {st::wait_pause_complete, ev::stress_test_recv_pause,
     st::notify_stress_test, on_notify_stress},
    // StressTestRankParams delivered to a worker: the test runs.
    {st::notify_stress_test, ev::notify_success, st::wait_stress_test_finished,
     on_stress_running},
    {st::notify_stress_test, ev::notify_fail, st::notify_kill_job, on_om_kill},
    // Every code passed ("0", "1"): continue training.
    {st::wait_stress_test_finished, ev::receive_report,
     st::notify_continue_train, on_stress_passed},
    // ReportRecoverStatus(406) while the test runs: wait on for the result.
    {st::wait_stress_test_finished, ev::stress_test_recv_fault,
     st::wait_stress_test_finished, on_stress_fault},
    // A code "2" isolates its node, "3" / "4" fault the rank: recover.
    {st::wait_stress_test_finished, ev::stress_test_fail, st::notify_stop_train,
     on_stress_failed},
    {st::wait_stress_test_finished, ev::receive_timeout, st::notify_stop_train,
     on_stress_timeout},
  };
  return table;
}

} // namespace machines

using namespace machines;

biz_status validate_stress(const recovery& current, const job_spec& spec,
                           bool registered, bool subscribed,
                           const stress_request& req, stress_ops_map& params) {
  const auto& id = spec.job_id;
  if (!registered)
    return {413, "job:" + id + " is not registered"};
  if (!job_running(spec))
    return {413, "job:" + id + " is not running"};
  auto bad_ops
    = [](const std::string& node,
         const std::vector<int64_t>& ops) -> std::optional<biz_status> {
    std::set<int64_t> seen;
    for (auto op : ops) {
      if (op != 0 && op != 1)
        return biz_status{413,
                          "op:" + std::to_string(op)
                            + " not exist in support operation:[0 1]"};
      if (!seen.insert(op).second)
        return biz_status{
          413, "node:" + node + " stress test ops should not repeat"};
    }
    return std::nullopt;
  };
  auto add_node
    = [&](const std::string& node, const std::vector<int64_t>& ops) {
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
  if (current.flow.state != st::init)
    return {411, "jobId=" + id + " om is running, or job recovering"};
  return {0, "stress test operation was successfully distributed"};
}

failure validate_stress_results(const job_spec& spec,
                                const stress_results& results,
                                const rank_index* ranks) {
  if (results.empty())
    return fail(errc::invalid_argument, "stressResult is empty");
  rank_index local;
  if (ranks == nullptr) {
    local = rank_index{spec};
    ranks = &local;
  }
  for (const auto& [rank, ops] : results) {
    if (ranks->find(rank) == nullptr)
      return fail(errc::invalid_argument,
                  "stressResult: rank " + excerpt(rank) + " is not in job "
                    + spec.job_id);
    for (const auto& [op, r] : ops)
      if (!stress_code_from_string(r.code))
        return fail(errc::invalid_argument,
                    "stressResult: rank " + excerpt(rank) + " op "
                      + excerpt(op) + " has unknown code \"" + excerpt(r.code)
                      + "\" (allowed: 0..4)");
  }
  return {};
}

} // namespace recoverd
