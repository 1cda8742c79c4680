// Pause and continue around an operator action (reference §8.2 / §9.2): the
// rows a link switch and a stress test share, and how an operator action
// that cannot go on ends.

#include "actors/model/machines/machine.hpp"

namespace recoverd::machines {

namespace {

// The operator action ends without a further message (the streams close).
void om_end(ctx& c) {
  c.out.om_final = true;
  c.rec.job.om_done = true;
}

// The operator action ended and training goes on.
flow_event on_om_finished(ctx& c) {
  if (c.rec.action.kind == om_kind::switch_nic)
    om_say(c, "switch nic finish", true);
  else
    om_end(c); // the stress result was the operator's message
  // Faults that arrived during the action are handled right after it
  // (design §4.7): the flow continues as a recovery instead of ending.
  if (!c.rec.flow.faults.empty()) {
    om_clear(c);
    c.rec.flow.uuid.clear();
    return ev::fault_occur;
  }
  return on_reset(c);
}

} // namespace

flow_event on_om_kill(ctx& c) {
  const auto& path = c.out.path;
  auto from = path.size() >= 2 ? path[path.size() - 2] : st::init;
  bool failed = c.in.name == ev::receive_report && c.in.report.code == 499;
  std::string what = c.rec.action.kind == om_kind::stress ? "stress test failed"
                                                          : "switch nic failed";
  std::string msg = "om failed, send signal failed";
  if (from == st::wait_pause_complete)
    msg = failed ? "om failed, pause train failed" : "pause train timeout";
  else if (from == st::notify_switch_nic)
    msg = "send switch nic signal failed, please check manually";
  else if (from == st::notify_stress_test)
    msg = "send stress test signal failed, please check manually";
  else if (from == st::wait_continue_train)
    msg = what
      + (failed ? ", continue train failed" : ", continue train timeout");
  om_say(c, msg, true);
  return on_kill_job(c);
}

void om_say(ctx& c, const std::string& msg, bool final) {
  c.out.om_messages.push_back(msg);
  c.out.om_final = c.out.om_final || final;
  c.rec.job.om_last_message = msg;
  c.rec.job.om_last_kind = c.rec.action.kind;
  c.rec.job.om_done = final;
}

void om_clear(ctx& c) {
  c.rec.action = {};
}

flow_event begin_om(ctx& c, om_kind kind, int64_t pause_timeout) {
  c.rec.action.kind = kind;
  c.rec.action.who = c.in.who;
  c.rec.job.om_done = false;
  c.rec.job.om_last_message.clear();
  c.rec.job.om_last_kind = kind;
  c.rec.flow.started_ms = c.in.now_ms;
  c.rec.flow.uuid = c.in.fresh_uuid;
  auto sig = c.signal("stopTrain");
  sig.actions = {"pause_train"};
  sig.timeout = pause_timeout;
  return c.notify(std::move(sig));
}

flow_event notify_worker(ctx& c, const char* what) {
  process_signal marker;
  marker.uuid = c.rec.flow.uuid;
  marker.job_id = c.spec.job_id;
  marker.signal_type = what;
  return c.notify(std::move(marker));
}

flow_event on_notify_continue(ctx& c) {
  auto sig = c.signal("changeStrategy");
  sig.actions = {"change_strategy"};
  sig.change_strategy = "continue";
  sig.fault_ranks = c.fault_list(true);
  sig.node_rank_ids = c.pods_of(sig.fault_ranks);
  return c.notify(std::move(sig));
}

const std::vector<rule>& operator_pause_rules() {
  static const std::vector<rule> table = {
    // stopTrain(pause_train) delivered: wait for the pause report.
    {st::notify_pause_train, ev::notify_success, st::wait_pause_complete,
     on_wait_report},
    {st::notify_pause_train, ev::notify_fail, st::notify_kill_job, on_om_kill},
    {st::wait_pause_complete, ev::process_pause_fail, st::notify_kill_job,
     on_om_kill},
    {st::wait_pause_complete, ev::receive_timeout, st::notify_kill_job,
     on_om_kill},
    // changeStrategy(continue) delivered: wait for the continue report.
    {st::notify_continue_train, ev::notify_continue_success,
     st::wait_continue_train, on_wait_report},
    {st::notify_continue_train, ev::notify_fail, st::notify_kill_job,
     on_om_kill},
    {st::wait_continue_train, ev::switch_nic_recv_continue, st::init,
     on_om_finished},
    {st::wait_continue_train, ev::stress_test_recv_continue, st::init,
     on_om_finished},
    {st::wait_continue_train, ev::continue_train_fail, st::notify_kill_job,
     on_om_kill},
    {st::wait_continue_train, ev::receive_timeout, st::notify_kill_job,
     on_om_kill},
  };
  return table;
}

} // namespace recoverd::machines
