// The engine: one input through the table of every machine. The rows live
// with their machines (recovery.cpp, dp_scale.cpp, operator_pause.cpp,
// switch_nic.cpp, stress_test.cpp); this file joins them into one lookup
// and handles the inputs that are not rows (a fault joining a flow, a pod
// or annotation change re-checking a polled wait, a pre-exit notice).

#include "actors/model/machines/machine.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <set>

#include "actors/model/recovery_delta.hpp"

namespace recoverd {

namespace machines {

namespace {

constexpr size_t n_states
  = static_cast<size_t>(st::wait_stress_test_finished) + 1;
constexpr size_t n_events = static_cast<size_t>(ev::pre_exit) + 1;

/// Every row of every machine, in order.
const std::vector<rule>& all_rules() {
  static const std::vector<rule> table = [] {
    std::vector<rule> xs;
    for (const auto* part :
         {&recovery_rules(), &dp_scale_rules(), &operator_pause_rules(),
          &switch_nic_rules(), &stress_test_rules()})
      xs.insert(xs.end(), part->begin(), part->end());
    return xs;
  }();
  return table;
}

/// (state, event) -> row, built once.
const rule* find_rule(flow_state state, flow_event event) {
  using index = std::array<std::array<const rule*, n_events>, n_states>;
  static const index table = [] {
    index result{};
    for (const auto& r : all_rules()) {
      auto& slot
        = result[static_cast<size_t>(r.from)][static_cast<size_t>(r.event)];
      if (slot == nullptr) // the first row wins, as in a linear scan
        slot = &r;
    }
    return result;
  }();
  return table[static_cast<size_t>(state)][static_cast<size_t>(event)];
}

// The polled wait a pod change re-checks now, or `none`.
flow_event job_change_event(const flow_part& flow) {
  switch (flow.state) {
    case st::wait_process_recover_status:
      // Once the pods are back (the reschedule wait is over, `wait_until_ms`
      // cleared) the state waits for the agent's report under its report
      // deadline; a later pod change must not re-run the reschedule check,
      // which would replace that deadline with none (found by tools/dst).
      return flow.wait_until_ms != 0 ? ev::reschedule_check : ev::none;
    case st::listen_schedule_result: return ev::schedule_check;
    case st::fault_retry: return ev::fallback_check;
    case st::scale_running: return ev::scale_check;
    default: return ev::none;
  }
}

// The pods a fault-center snapshot saw under another uid than they have
// now: a device entry's pod uid names the pod that held the device.
std::set<int32_t> replaced_pods(const job_spec& spec,
                                const std::vector<device_fault>* faults) {
  std::set<int32_t> result;
  if (faults == nullptr)
    return result;
  for (const auto& f : *faults) {
    if (f.pod_uid.empty() || f.device_id.empty())
      continue;
    for (const auto& p : spec.pods)
      if (p.node_name == f.node_name && p.uid != f.pod_uid)
        for (const auto& d : p.devices)
          if (d.device_id == f.device_id)
            result.insert(p.pod_rank);
  }
  return result;
}

// Fault-center path for jobs without step retry (reference §4.1 step 8):
// tell the agent, no flow starts. There is no flow to remember the fault
// pods' uids, so the snapshot's pod uids tell a replaced pod, which is not
// told to exit; when no pod is left, nothing is sent.
std::optional<process_signal>
pre_exit_signal(const job_spec& spec, const rank_index& ranks,
                const flow_input& in,
                const std::vector<device_fault>* device_faults) {
  process_signal sig;
  sig.uuid = in.fresh_uuid;
  sig.job_id = spec.job_id;
  sig.signal_type = "preExitProcess";
  sig.actions = {"pre exit process"};
  std::set<int32_t> pods;
  for (const auto& f : in.faults) {
    sig.fault_ranks.push_back({f.rank_id, "1"});
    if (const auto* place = ranks.find(f.rank_id))
      pods.insert(place->pod_rank);
  }
  auto replaced = replaced_pods(spec, device_faults);
  for (auto p : pods)
    if (replaced.count(p) == 0)
      sig.node_rank_ids.push_back(std::to_string(p));
  if (sig.node_rank_ids.empty() && !pods.empty())
    return std::nullopt;
  return sig;
}

// Software faults reported by the framework: their pods may restart in
// place (reference §3.7 step 4).
bool marks_in_place(const init_config& init, const flow_input& in) {
  return in.kind == report_kind::process
         && contains(init.strategies, "recover-in-place");
}

// A copy of `xs` with `more`, if that adds any; nothing otherwise.
std::optional<std::set<int32_t>> grown(const std::set<int32_t>& xs,
                                       const std::set<int32_t>& more) {
  // `more` holds the pods of one report, `xs` those of the whole flow: a
  // lookup each, not a walk over `xs`.
  if (std::all_of(more.begin(), more.end(),
                  [&](int32_t x) { return xs.count(x) != 0; }))
    return std::nullopt;
  auto result = xs;
  result.insert(more.begin(), more.end());
  return result;
}

} // namespace

} // namespace machines

using namespace machines;

recovery_delta absorb(const recovery& current, const job_spec& spec,
                      const init_config& init, const flow_input& in,
                      const rank_index& ranks) {
  using rf = recovery_field;
  const auto& flow = current.flow;
  auto plan = plan_merge(flow, ranks, in.faults);
  recovery_delta d;
  d.faults_set = std::move(plan.set);
  if (plan.unhealthy && flow.health != "UnHealthy") {
    d.replace(rf::health);
    d.values.flow.health = "UnHealthy";
  }
  if (marks_in_place(init, in))
    if (auto pods = grown(flow.in_place_pods, plan.pods)) {
      d.replace(rf::in_place_pods);
      d.values.flow.in_place_pods = std::move(*pods);
    }
  // New fault pods keep the uid they have now (ctx::add_fault_pod).
  if (auto pods = grown(flow.fault_pods, plan.pods)) {
    auto uids = flow.origin_uids;
    bool more = false;
    for (auto p : plan.pods)
      if (flow.fault_pods.count(p) == 0)
        if (const auto* q = ranks.find_pod(spec, p))
          more = uids.emplace(p, q->uid).second || more;
    d.replace(rf::fault_pods);
    d.values.flow.fault_pods = std::move(*pods);
    if (more) {
      d.replace(rf::origin_uids);
      d.values.flow.origin_uids = std::move(uids);
    }
  }
  return d;
}

const std::vector<transition>& transitions() {
  static const std::vector<transition> result = [] {
    std::vector<transition> xs;
    for (const auto& r : all_rules())
      xs.push_back({r.from, r.event, r.to});
    return xs;
  }();
  return result;
}

expected<flow_step> step(const recovery& current, const job_spec& spec,
                         const init_config& init, const flow_input& in,
                         const timeouts& waits,
                         const std::vector<device_fault>& device_faults,
                         const rank_index* ranks) {
  rank_index local;
  if (ranks == nullptr) {
    local = rank_index{spec};
    ranks = &local;
  }
  flow_step out;
  out.input = in;
  out.after = current;
  auto& rec = out.after;
  out.path.push_back(rec.flow.state);
  ctx c{rec, spec, *ranks, init, in, waits, out, &device_faults};
  auto event = in.name;
  // A delivery result is about the pending signal only: a late or duplicate
  // confirmation (of an earlier state's signal, or of an ended flow's) must
  // not move the machine as if the pending signal had gone out.
  if (in.delivered && !(rec.flow.outbox && *rec.flow.outbox == *in.delivered))
    return fail(errc::unexpected_report,
                "the delivered " + in.delivered->signal_type + " (uuid "
                  + in.delivered->uuid + ") is not the signal pending in state "
                  + to_string(rec.flow.state));
  // Inputs that are not rows of the table.
  if (marks_in_place(init, in))
    for (const auto& f : in.faults)
      if (const auto* place = ranks->find(f.rank_id))
        rec.flow.in_place_pods.insert(place->pod_rank);
  switch (event) {
    case ev::fault_absorbed:
      // A fault during a running flow joins it (reference §4.2).
      c.merge(in.faults);
      return out;
    case ev::node_health_cleared:
      // An operator cleared a node a stress test isolated.
      if (rec.job.unhealthy_nodes.erase(in.node) == 0)
        return fail(errc::invalid_argument,
                    "node " + in.node + " is not recorded unhealthy");
      return out;
    case ev::pre_exit:
      if (auto sig = pre_exit_signal(spec, *ranks, in, &device_faults))
        out.side_signals.push_back(std::move(*sig));
      return out;
    case ev::annotations_changed:
      // Platform annotations are what the platform-mode waits wait for.
      if (rec.flow.deadline_event == ev::plat_strategy_check)
        event = ev::plat_strategy_check;
      else if (rec.flow.state == st::notify_global_fault
               && rec.flow.platform_round)
        event = ev::result_fault_check;
      else
        return out;
      break;
    case ev::job_changed:
      // Pod changes matter only to the polled waits; re-check them now.
      event = job_change_event(rec.flow);
      if (event == ev::none)
        return out;
      break;
    case ev::fault_occur:
      if (rec.flow.state != st::init && rec.flow.state != st::scale_running)
        return fail(errc::unexpected_report,
                    std::string{"faultOccur is not accepted in state "}
                      + to_string(rec.flow.state));
      c.merge(in.faults);
      if (rec.flow.state == st::init)
        rec.flow.started_ms = in.now_ms;
      break;
    case ev::receive_report: {
      auto translated = report_event(rec, in);
      if (!translated)
        return translated.error();
      event = *translated;
      if (in.kind == report_kind::status && rec.action.kind == om_kind::none)
        rec.flow.results.push_back(in.report);
      break;
    }
    default: break;
  }
  for (int hops = 0; event != ev::none; ++hops) {
    const auto* r = find_rule(rec.flow.state, event);
    if (r == nullptr) {
      if (hops == 0)
        return fail(errc::unexpected_report,
                    std::string{to_string(event)} + " is not accepted in state "
                      + to_string(rec.flow.state));
      // An entry action produced an event its state has no rule for: a bug
      // in the table. Stay, and fail loudly in debug builds' tests.
      return fail(errc::invalid_argument,
                  std::string{"no rule for "} + to_string(event) + " in state "
                    + to_string(rec.flow.state));
    }
    if (hops > 64)
      return fail(errc::invalid_argument, "recovery machine loops");
    bool self_loop = r->from == r->to;
    rec.flow.state = r->to;
    if (!self_loop || r->entry != nullptr) {
      rec.flow.outbox.reset();
      rec.flow.deadline_ms = 0;
      rec.flow.deadline_event = ev::none;
    }
    if (!self_loop) {
      // A new state waits for something else (a self-loop, e.g. a 406
      // during a stress test, still waits for the same answer).
      rec.flow.awaited.reset();
      out.path.push_back(rec.flow.state);
    }
    event = r->entry ? r->entry(c) : no_action(c);
  }
  // A delivery that leads into a report wait: that wait answers the signal,
  // so a stream that opens during it (the agent lost the signal, or lost
  // its report while recoverd was down) must get the signal again.
  if (in.delivered && !rec.flow.outbox && rec.flow.state != st::init
      && expected_report(rec.flow.state) != report_kind::none)
    rec.flow.awaited = *in.delivered;
  return out;
}

flow_event send_result_event(const process_signal& sig) {
  const auto& t = sig.signal_type;
  if (t == "keep-alive" || t == "pauseStartAgent" || t == "continueStartAgent"
      || t == "preExitProcess")
    return ev::none;
  if (t == "killMaster")
    return ev::finish;
  if (sig.extra_params == "dump_exit")
    return ev::none;
  if (t == "faultNodesExit")
    return ev::notify_fault_nodes_exit_success;
  if (t != "changeStrategy")
    return ev::notify_success;
  static const std::map<std::string, flow_event> by_strategy = {
    {"retry", ev::notify_retry_strategy_success},
    {"recover", ev::notify_recover_strategy_success},
    {"dump", ev::notify_dump_strategy_success},
    {"exit", ev::notify_exit_strategy_success},
    {"continue", ev::notify_continue_success},
    {"downgrade", ev::notify_scale_in_success},
    {"upgrade", ev::notify_scale_out_success},
    {"migration", ev::notify_success},
  };
  auto i = by_strategy.find(sig.change_strategy);
  return i == by_strategy.end() ? ev::none : i->second;
}

} // namespace recoverd
