#include "tools/dst/sim.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <set>
#include <utility>

#include "actors/error.hpp"
#include "actors/model/fault_center.hpp"
#include "actors/model/incidents.hpp"
#include "actors/model/recovery.hpp"
#include "storage/event_codec.hpp"
#include "storage/incident_codec.hpp"

namespace recoverd::dst {

namespace {

// -- randomness ---------------------------------------------------------------

// splitmix64: small, fast, and the same on every platform (std's
// distributions are not), so a seed means the same schedule everywhere.
struct rng {
  uint64_t state;

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  uint32_t below(uint32_t n) {
    return n == 0 ? 0 : static_cast<uint32_t>(next() % n);
  }

  bool one_in(uint32_t n) {
    return below(n) == 0;
  }

  template <class T, size_t N>
  const T& pick(const std::array<T, N>& xs) {
    return xs[below(static_cast<uint32_t>(N))];
  }
};

template <class T, size_t N>
const T& nth(const std::array<T, N>& xs, uint32_t i) {
  return xs[i % N];
}

} // namespace

// -- the job a seed configures ------------------------------------------------

job_setup make_setup(uint64_t seed) {
  rng r{seed ^ 0x5eed5eed5eed5eedull};
  job_setup result;
  auto& spec = result.spec;
  spec.job_id = "dst";
  spec.name = "train";
  spec.ns = "sim";
  spec.framework = r.one_in(3) ? "mindspore" : "pytorch";
  static const std::array<const char*, 6> strategies
    = {"retry", "recover-in-place", "recover", "elastic-training", "dump",
       "exit"};
  for (const auto* s : strategies)
    if (r.one_in(2))
      spec.recover_strategies.emplace_back(s);
  // Configured order is not priority order: shuffle a little.
  if (spec.recover_strategies.size() > 1 && r.one_in(2))
    std::swap(spec.recover_strategies.front(), spec.recover_strategies.back());
  spec.process_recover_enable = !r.one_in(16);
  spec.platform_mode = r.one_in(5);
  spec.pod_rescheduling = r.one_in(3);
  spec.fault_scheduling = r.pick(std::array<const char*, 4>{"", "", "grace",
                                                            "force"});
  spec.sub_healthy_strategy = r.pick(
    std::array<const char*, 4>{"", "", "graceExit", "ignore"});
  int pods = 2 + static_cast<int>(r.below(2));
  result.devices = 2 + static_cast<int>(r.below(3));
  int32_t super_pod = r.one_in(6) ? -1 : 0;
  for (int p = 0; p < pods; ++p) {
    pod x;
    x.pod_rank = p;
    x.uid = "pod-" + std::to_string(p) + "-a";
    x.node_name = "node-" + std::to_string(p);
    x.running = true;
    x.super_pod_id = super_pod;
    for (int d = 0; d < result.devices; ++d)
      x.devices.push_back(
        {std::to_string(d), std::to_string(p * result.devices + d)});
    spec.pods.push_back(std::move(x));
  }
  auto& w = result.waits;
  auto ms = [&r](std::initializer_list<int64_t> xs) {
    auto i = r.below(static_cast<uint32_t>(xs.size()));
    return millis{*(xs.begin() + i)};
  };
  w.report = ms({500, 2'000, 10'000});
  w.notify = ms({100, 1'000, 5'000});
  w.fault_flush = ms({0, 0, 20, 200});
  w.resource_release = ms({0, 0, 50});
  w.recover_in_place = ms({0, 30, 300});
  w.reschedule = ms({100, 500, 3'000});
  w.hccl_convergence = ms({0, 0, 30});
  w.exit_reschedule = ms({0, 100, 500});
  w.restart_all = ms({0, 0, 100});
  w.job_fallback = ms({0, 200, 1'000});
  w.platform = ms({0, 200, 2'000});
  // A zero poll with a platform wait makes a polled state re-check itself
  // without time passing; configurations use a positive poll.
  w.poll = ms({10, 50, 200});
  return result;
}

std::string describe_setup(const job_setup& s) {
  const auto& spec = s.spec;
  std::string out = "job: " + std::to_string(spec.pods.size()) + " pods x "
    + std::to_string(s.devices) + " devices, strategies [";
  for (size_t i = 0; i < spec.recover_strategies.size(); ++i)
    out += (i > 0 ? " " : "") + spec.recover_strategies[i];
  out += "], processRecoverEnable=" + std::to_string(spec.process_recover_enable)
    + " platformMode=" + std::to_string(spec.platform_mode)
    + " podRescheduling=" + std::to_string(spec.pod_rescheduling)
    + " faultScheduling=\"" + spec.fault_scheduling + "\" subHealthy=\""
    + spec.sub_healthy_strategy + "\" superPod="
    + std::to_string(spec.pods.front().super_pod_id) + "\n";
  const auto& w = s.waits;
  out += "waits (ms): report=" + std::to_string(w.report.count())
    + " notify=" + std::to_string(w.notify.count())
    + " fault_flush=" + std::to_string(w.fault_flush.count())
    + " resource_release=" + std::to_string(w.resource_release.count())
    + " recover_in_place=" + std::to_string(w.recover_in_place.count())
    + " reschedule=" + std::to_string(w.reschedule.count())
    + " hccl=" + std::to_string(w.hccl_convergence.count())
    + " exit_reschedule=" + std::to_string(w.exit_reschedule.count())
    + " restart_all=" + std::to_string(w.restart_all.count())
    + " job_fallback=" + std::to_string(w.job_fallback.count())
    + " platform=" + std::to_string(w.platform.count())
    + " poll=" + std::to_string(w.poll.count());
  return out;
}

namespace {

using setup = job_setup;

// -- model comparison ---------------------------------------------------------

bool same(const device& x, const device& y);
bool same(const pod& x, const pod& y);
bool same(const device_fault& x, const device_fault& y);

template <class T>
bool same_each(const std::vector<T>& xs, const std::vector<T>& ys) {
  if (xs.size() != ys.size())
    return false;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!same(xs[i], ys[i]))
      return false;
  return true;
}

bool same(const device& x, const device& y) {
  return x.device_id == y.device_id && x.rank_id == y.rank_id;
}

bool same(const pod& x, const pod& y) {
  return x.pod_rank == y.pod_rank && x.uid == y.uid
    && x.node_name == y.node_name && x.running == y.running
    && x.super_pod_id == y.super_pod_id && same_each(x.devices, y.devices);
}

bool same(const device_fault& x, const device_fault& y) {
  return x.node_name == y.node_name && x.device_id == y.device_id
    && x.fault_codes == y.fault_codes && x.fault_level == y.fault_level
    && x.pod_uid == y.pod_uid;
}

// Names the first differing field of two recovery states, for a message
// that says more than "rec".
std::string recovery_difference(const recovery& x, const recovery& y) {
  std::string out;
  auto cmp = [&out](const char* name, const auto& a, const auto& b) {
    if (out.empty() && !(a == b))
      out = name;
  };
  const auto& f = x.flow;
  const auto& g = y.flow;
  cmp("rec.flow.state", f.state, g.state);
  cmp("rec.flow.uuid", f.uuid, g.uuid);
  cmp("rec.flow.faults", f.faults, g.faults);
  cmp("rec.flow.fault_pods", f.fault_pods, g.fault_pods);
  cmp("rec.flow.agent_strategies", f.agent_strategies, g.agent_strategies);
  cmp("rec.flow.decided", f.decided, g.decided);
  cmp("rec.flow.results", f.results, g.results);
  cmp("rec.flow.outbox", f.outbox, g.outbox);
  cmp("rec.flow.deadline_ms", f.deadline_ms, g.deadline_ms);
  cmp("rec.flow.deadline_event", f.deadline_event, g.deadline_event);
  cmp("rec.flow.started_ms", f.started_ms, g.started_ms);
  cmp("rec.flow.health", f.health, g.health);
  cmp("rec.flow.origin_uids", f.origin_uids, g.origin_uids);
  cmp("rec.flow.wait_until_ms", f.wait_until_ms, g.wait_until_ms);
  cmp("rec.flow.pending_strategy", f.pending_strategy, g.pending_strategy);
  cmp("rec.flow.platform_round", f.platform_round, g.platform_round);
  cmp("rec.flow.in_place_pods", f.in_place_pods, g.in_place_pods);
  cmp("rec.flow.restart_in_place", f.restart_in_place, g.restart_in_place);
  cmp("rec.flow.in_place_checked", f.in_place_checked, g.in_place_checked);
  cmp("rec.flow.isolate_nodes", f.isolate_nodes, g.isolate_nodes);
  cmp("rec.action.kind", x.action.kind, y.action.kind);
  cmp("rec.action.who", x.action.who, y.action.who);
  cmp("rec.action.switch_ranks", x.action.switch_ranks, y.action.switch_ranks);
  cmp("rec.action.switch_ops", x.action.switch_ops, y.action.switch_ops);
  cmp("rec.action.stress_params", x.action.stress_params,
      y.action.stress_params);
  cmp("rec.action.stress_fault", x.action.stress_fault, y.action.stress_fault);
  cmp("rec.job.label", x.job.label, y.job.label);
  cmp("rec.job.retry_time", x.job.retry_time, y.job.retry_time);
  cmp("rec.job.reset_json", x.job.reset_json, y.job.reset_json);
  cmp("rec.job.reset_check", x.job.reset_check, y.job.reset_check);
  cmp("rec.job.flows", x.job.flows, y.job.flows);
  cmp("rec.job.last_outcome", x.job.last_outcome, y.job.last_outcome);
  cmp("rec.job.om_last_message", x.job.om_last_message, y.job.om_last_message);
  cmp("rec.job.om_done", x.job.om_done, y.job.om_done);
  cmp("rec.job.om_last_kind", x.job.om_last_kind, y.job.om_last_kind);
  cmp("rec.job.unhealthy_nodes", x.job.unhealthy_nodes, y.job.unhealthy_nodes);
  return out.empty() ? "rec" : out;
}

} // namespace

// -- the report oracle --------------------------------------------------------

// Which reports each waiting state waits for, written down here from the
// protocol (reference §5, §8, §9) rather than taken from the model's report
// table, so that the two can disagree.
bool report_waited(flow_state s, report_kind k, int32_t code) {
  using rk = report_kind;
  switch (s) {
    case st::wait_stop_complete:
    case st::wait_pause_complete: return k == rk::stop;
    case st::wait_switch_nic_finished:
      return k == rk::switch_nic || (k == rk::status && code == 406);
    case st::wait_stress_test_finished:
      return k == rk::stress || (k == rk::status && code == 406);
    case st::wait_recover_strategy: return k == rk::strategy;
    case st::wait_continue_train:
    case st::wait_step_retry_status:
    case st::wait_process_recover_status:
    case st::wait_dump_status:
    case st::wait_scale_in_isolate:
    case st::wait_scale_in_status:
    case st::wait_scale_out_status: return k == rk::status;
    default: return false;
  }
}

namespace {

constexpr std::array<report_kind, 5> report_kinds
  = {report_kind::stop, report_kind::strategy, report_kind::status,
     report_kind::switch_nic, report_kind::stress};

} // namespace

bool starts_round(const std::vector<flow_state>& path) {
  for (size_t i = 1; i < path.size(); ++i)
    switch (path[i]) {
      case st::notify_stop_train:
      case st::notify_pause_train:
      case st::wait_stress_test_finished:
      case st::notify_continue_train: return true;
      default: break;
    }
  return false;
}

namespace {

std::string hex(uint64_t x, int digits) {
  static constexpr char xs[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, x >>= 4)
    out[static_cast<size_t>(i)] = xs[x & 0xf];
  return out;
}

std::string describe_signal(const process_signal& sig) {
  std::string out = sig.signal_type;
  if (!sig.change_strategy.empty())
    out += "(" + sig.change_strategy + ")";
  return out + " uuid=" + (sig.uuid.empty() ? "\"\"" : sig.uuid);
}

// -- the world ----------------------------------------------------------------

// One job, the harness the job actor would be around it, and the checker.
class world {
public:
  world(uint64_t seed, const run_options& opts)
    : cfg_(make_setup(seed)), opts_(opts), seed_(seed) {
    client_ = {cfg_.spec.job_id, "taskd", "ipv4:10.0.0.1:40000"};
    note("prologue");
    commit(put_cmd{cfg_.spec});
    commit(init_cmd{client_});
    commit(register_cmd{client_, false});
    if (commit(subscribe_cmd{client_, 0}))
      live_generation_ = live_.subscriber_generation;
    flush_trace(0, 0, "prologue");
  }

  void run(size_t index, const step& s) {
    index_ = index;
    move_time(now_ + s.dt_ms);
    if (!failure_)
      act(s);
    // Each delivery may leave the next signal pending (a chain of notify
    // states); the bound only guards against a machine that loops.
    for (int i = 0; s.settle && !failure_ && i < 8 && deliverable(); ++i)
      deliver();
    if (!failure_)
      after_step();
    flush_trace(index, s.dt_ms, to_string(s.kind));
  }

  const std::optional<violation>& failure() const {
    return failure_;
  }

  outcome result(size_t steps) && {
    outcome out;
    out.steps = steps;
    out.failure = failure_;
    out.trace = std::move(trace_);
    out.events = log_.size();
    out.flows = flows_;
    return out;
  }

private:
  // -- bookkeeping ------------------------------------------------------------

  void fail(const char* invariant, std::string what) {
    if (!failure_)
      failure_ = violation{index_, invariant, std::move(what)};
  }

  void note(std::string x) {
    if (!opts_.trace)
      return;
    // Polls repeat: "deadline fallbackCheck; 1 events" x 200 reads as one
    // line with a count.
    auto n = notes_.size();
    if (n >= 2 && notes_[n - 2].first == x && x.rfind("deadline ", 0) == 0) {
      ++notes_[n - 2].second;
      return;
    }
    if (n >= 1 && notes_[n - 1].first == x) {
      ++notes_[n - 1].second;
      return;
    }
    notes_.emplace_back(std::move(x), 1);
  }

  std::string render_notes() const {
    std::string out;
    for (const auto& [text, count] : notes_) {
      if (!out.empty())
        out += "; ";
      out += text;
      if (count > 1)
        out += " (x" + std::to_string(count) + ")";
    }
    return out.empty() ? "-" : out;
  }

  void flush_trace(size_t index, uint32_t dt, const char* kind) {
    if (!opts_.trace)
      return;
    std::string line = "#" + std::to_string(index) + " +" + std::to_string(dt)
      + "ms " + kind + ": " + render_notes() + " => "
      + (live_.exists ? to_string(live_.rec.flow.state) : "(no job)")
      + " seq=" + std::to_string(live_.seq);
    const auto& flow = live_.rec.flow;
    if (live_.exists && flow.deadline_ms > 0)
      line += " deadline=" + std::string{to_string(flow.deadline_event)} + "@+"
        + std::to_string(flow.deadline_ms - now_) + "ms";
    if (live_.exists && flow.wait_until_ms > 0)
      line += " wait_until=+" + std::to_string(flow.wait_until_ms - now_) + "ms";
    if (failure_ && failure_->step == index)
      line += "  !! " + failure_->invariant + ": " + failure_->what;
    trace_.push_back(std::move(line));
    notes_.clear();
  }

  std::string fresh_uuid() {
    ++uuids_made_;
    rng r{seed_ ^ (uuids_made_ * 0x2545f4914f6cdd1dull)};
    return "D" + hex(seed_ & 0xffffffff, 8) + hex(uuids_made_, 8) + "-"
      + hex(r.next(), 16) + hex(r.next(), 16);
  }

  const job_spec& spec() const {
    return live_.exists ? live_.spec : cfg_.spec;
  }

  std::string rank(uint32_t i) const {
    const auto& p = spec().pods;
    size_t n = 0;
    for (const auto& x : p)
      n += x.devices.size();
    if (n == 0)
      return "0";
    size_t k = i % n;
    for (const auto& x : p) {
      if (k < x.devices.size())
        return x.devices[k].rank_id;
      k -= x.devices.size();
    }
    return "0";
  }

  std::string state_name() const {
    return to_string(live_.rec.flow.state);
  }

  // -- time -------------------------------------------------------------------

  void move_time(int64_t t) {
    // Deadlines that fall due on the way fire first, at their deadline, as
    // the job actor's timers do.
    int64_t last = -1;
    for (int same = 0; !failure_;) {
      auto d = live_.rec.flow.deadline_ms;
      if (!live_.exists || d <= 0 || d > t)
        break;
      same = d == last ? same + 1 : 0;
      last = d;
      if (same > 1'000) {
        fail("deadline", "the deadline of " + state_name()
                           + " fired 1000 times without time passing");
        return;
      }
      pass_time(d);
      fire();
    }
    pass_time(t);
  }

  void pass_time(int64_t t) {
    if (t <= now_ || failure_)
      return;
    // DP scale-in keeps training at reduced size until pods return: time
    // spent there is running, not waiting.
    if (in_flow_ && live_.exists && live_.rec.flow.state == st::scale_running)
      budget_ += t - now_;
    now_ = t;
    if (in_flow_ && now_ - flow_start_ > budget_)
      fail("deadline", "the flow started at t=" + std::to_string(flow_start_)
                         + " has run " + std::to_string(now_ - flow_start_)
                         + " ms, now in " + state_name()
                         + ", past the sum of its waits ("
                         + std::to_string(budget_) + " ms)");
  }

  void fire() {
    auto event = live_.rec.flow.deadline_event;
    auto state = live_.rec.flow.state;
    note(std::string{"deadline "} + to_string(event));
    flow_input in;
    in.name = event;
    if (!feed(std::move(in)))
      fail("deadline", std::string{"the deadline event "} + to_string(event)
                         + " that " + to_string(state)
                         + " armed was refused when it fell due");
  }

  // -- commands ---------------------------------------------------------------

  bool feed(flow_input in) {
    in.now_ms = now_;
    in.fresh_uuid = fresh_uuid();
    return commit(flow_cmd{std::move(in), cfg_.waits});
  }

  // Decides `cmd`, appends, encodes, decodes and applies its events, and
  // checks what they did. False when the model refused the input.
  bool commit(const command& cmd) {
    if (failure_)
      return false;
    try {
      return commit_unguarded(cmd);
    } catch (const std::exception& e) {
      fail("exception", std::string{"the model threw: "} + e.what());
    } catch (...) {
      fail("exception", "the model threw");
    }
    return false;
  }

  bool commit_unguarded(const command& cmd) {
    auto d = decide(live_, cmd);
    if (!d) {
      note("refused (" + d.error().message() + ")");
      return false;
    }
    if (const auto* f = std::get_if<flow_cmd>(&cmd))
      if (f->in.name == ev::receive_report
          && !report_waited(live_.rec.flow.state, f->in.kind,
                            f->in.report.code))
        fail("report", std::string{rpc_name(f->in.kind)} + " (code "
                         + std::to_string(f->in.report.code)
                         + ") was accepted in " + state_name()
                         + ", which does not wait for it");
    for (auto& body : d->events) {
      event ev{live_.seq + 1, now_, std::move(body)};
      auto bytes = storage::encode_event(ev);
      auto back = storage::decode_event(bytes);
      if (!back) {
        fail("codec", "event #" + std::to_string(ev.seq) + " ("
                        + kind_name(ev.body) + ") does not decode");
        return true;
      }
      log_.push_back(std::move(bytes));
      shadow_ = apply(std::move(shadow_), std::move(*back));
      auto before = live_.rec;
      live_ = apply(std::move(live_), ev);
      observe(before, ev);
    }
    if (!d->events.empty()) {
      // Folding the decoded log gives the live state (incrementally here; a
      // restart folds it all from empty).
      auto diff = first_difference(live_, shadow_);
      if (!diff.empty())
        fail("replay", "folding the decoded events differs from the live "
                       "state in "
                         + diff);
      check_history(*d);
    }
    note(std::to_string(d->events.size()) + " events");
    return true;
  }

  // The inspector's fold of the job's history, stored and taken up again
  // after every commit (as across a clean stop), then fed the commit's
  // events, is the fold that never stopped.
  void check_history(const decision& d) {
    auto first = live_.seq - d.events.size() + 1;
    auto stored
      = storage::decode_history(storage::encode_history(resumed_.state()));
    if (!stored) {
      fail("history",
           "the stored fold before event #" + std::to_string(first)
             + " does not decode: " + message_of(stored.error()));
      return;
    }
    resumed_ = job_history{std::move(*stored), history_keep};
    for (auto seq = first; seq <= live_.seq; ++seq) {
      auto ev = storage::decode_event(log_[seq - 1]);
      if (!ev)
        return; // the codec check above reported it
      history_.add(*ev);
      resumed_.add(*ev);
    }
    if (storage::encode_history(resumed_.state())
        != storage::encode_history(history_.state()))
      fail("history",
           "the fold taken up from its stored form before event #"
             + std::to_string(first)
             + " differs from the fold that never stopped");
  }

  // -- the flow checks --------------------------------------------------------

  void start_flow(int64_t t) {
    in_flow_ = true;
    flow_start_ = t;
    budget_ = 0;
    flow_uuids_.clear();
  }

  void end_flow(int64_t t) {
    if (!in_flow_)
      return;
    if (t - flow_start_ > budget_)
      fail("deadline", "a flow ended after " + std::to_string(t - flow_start_)
                         + " ms, past the sum of its waits ("
                         + std::to_string(budget_) + " ms)");
    ended_uuids_.insert(flow_uuids_.begin(), flow_uuids_.end());
    flow_uuids_.clear();
    in_flow_ = false;
    ++flows_;
  }

  void observe(const recovery& before, const event& ev) {
    const auto* x = std::get_if<flow_stepped>(&ev.body);
    if (!x) {
      // A job deleted or re-created starts afresh: its flow is over.
      if (in_flow_ && (!live_.exists || live_.rec.flow.state == st::init))
        end_flow(ev.time_ms);
      return;
    }
    const auto& after = live_.rec;
    const auto& old_uuid = before.flow.uuid;
    const auto& uuid = after.flow.uuid;
    // Flow signals: only of the running flow, never of one that ended
    // before this step.
    auto check_signal = [&](const process_signal& sig, const char* what) {
      if (sig.uuid.empty())
        return;
      if (ended_uuids_.count(sig.uuid) > 0)
        fail("late-signal", std::string{what} + " " + describe_signal(sig)
                              + " belongs to a flow that has ended");
      else if (sig.uuid != uuid && sig.uuid != old_uuid
               && sig.uuid != x->input.fresh_uuid)
        fail("uuid", std::string{what} + " " + describe_signal(sig)
                       + " does not carry its flow's uuid (" + uuid + ")");
    };
    for (const auto& sig : x->side_signals) {
      // The stress test's start-agent signals have uuids of their own (as
      // in the reference): fresh ones, which then belong to the flow.
      bool own = sig.signal_type == "pauseStartAgent"
        || sig.signal_type == "continueStartAgent";
      if (own && !sig.uuid.empty() && sig.uuid != uuid && sig.uuid != old_uuid
          && seen_uuids_.count(sig.uuid) == 0) {
        seen_uuids_.insert(sig.uuid);
        flow_uuids_.insert(sig.uuid);
        continue;
      }
      check_signal(sig, "side signal");
    }
    if (after.flow.outbox)
      check_signal(*after.flow.outbox, "pending signal");
    if (const auto& sig = x->input.delivered) {
      if (!sig->uuid.empty() && ended_uuids_.count(sig->uuid) > 0)
        fail("late-signal", "a delivery of " + describe_signal(*sig)
                              + ", of a flow that has ended, was accepted in "
                              + to_string(before.flow.state));
      else if (!before.flow.outbox || !(*before.flow.outbox == *sig))
        fail("delivery", "a delivery of " + describe_signal(*sig)
                           + " was accepted in "
                           + to_string(before.flow.state)
                           + ", whose pending signal is "
                           + (before.flow.outbox
                                ? describe_signal(*before.flow.outbox)
                                : std::string{"none"}));
    }
    bool restarted = false;
    for (size_t i = 1; i < x->path.size(); ++i) {
      if (x->path[i] == st::init) {
        end_flow(ev.time_ms);
      } else if (x->path[i - 1] == st::init) {
        // A path through INIT (an operator action that ends in a recovery)
        // ends one flow and starts the next.
        restarted = restarted || i > 1;
        start_flow(ev.time_ms);
      }
    }
    // uuids: one per flow (or per round of it), never one seen before.
    if (uuid != old_uuid) {
      if (!uuid.empty()) {
        if (seen_uuids_.count(uuid) > 0)
          fail("uuid", "the flow took uuid " + uuid
                         + ", which an earlier flow or round already had");
        else if (!old_uuid.empty() && !restarted && !starts_round(x->path))
          fail("uuid", "the flow changed its uuid from " + old_uuid + " to "
                         + uuid + " on " + to_string(x->input.name)
                         + " without starting a new round");
        seen_uuids_.insert(uuid);
        flow_uuids_.insert(uuid);
      } else if (in_flow_ && after.flow.state != st::init && !restarted) {
        fail("uuid", "the running flow lost its uuid " + old_uuid + " on "
                       + to_string(x->input.name));
      }
    }
    // The waits the step armed add to the flow's time budget.
    if (in_flow_ && after.flow.deadline_ms > 0
        && (after.flow.deadline_ms != before.flow.deadline_ms
            || after.flow.deadline_event != before.flow.deadline_event))
      budget_ += std::max<int64_t>(0, after.flow.deadline_ms - x->input.now_ms);
  }

  void after_step() {
    if (live_.exists && live_.rec.flow.state != st::init
        && live_.rec.flow.deadline_ms <= 0
        && live_.rec.flow.state != st::scale_running)
      fail("deadline", "the flow waits in " + state_name()
                         + " with no deadline");
    if (opts_.extra_check && !failure_) {
      auto msg = opts_.extra_check(live_);
      if (!msg.empty())
        fail("extra", msg);
    }
  }

  // -- the steps --------------------------------------------------------------

  bool registered() const {
    return live_.exists && live_.registered;
  }

  void act(const step& s) {
    switch (s.kind) {
      case step_kind::process_fault: return process_fault(s);
      case step_kind::device_faults: return device_faults(s);
      case step_kind::deliver: return deliver();
      case step_kind::stale_delivery: return stale_delivery(s);
      case step_kind::report: return report(s);
      case step_kind::fire_timer:
        if (live_.exists && live_.rec.flow.deadline_ms > 0)
          move_time(live_.rec.flow.deadline_ms);
        else
          note("no deadline");
        return;
      case step_kind::idle:
        move_time(now_ + (s.x % 8 == 0 ? 60'000 : 500 + s.x % 5'000));
        return;
      case step_kind::subscribe:
        if (!live_.exists)
          return note("no job");
        if (commit(subscribe_cmd{client_, live_generation_}))
          live_generation_ = live_.subscriber_generation;
        return;
      case step_kind::detach:
        if (live_generation_ == 0)
          return note("no stream");
        commit(detach_cmd{live_generation_, live_generation_, "cancelled"});
        live_generation_ = 0;
        return;
      case step_kind::init:
        if (live_.exists)
          commit(init_cmd{client_});
        return;
      case step_kind::enroll:
        if (live_.exists)
          commit(register_cmd{client_, false});
        return;
      case step_kind::put_change: return put_change(s);
      case step_kind::annotate: return annotate(s);
      case step_kind::switch_nic: return switch_nic(s);
      case step_kind::stress_test: return stress_test(s);
      case step_kind::clear_node: return clear_node(s);
      case step_kind::restart: return restart();
      case step_kind::delete_job:
        if (!live_.exists)
          return note("no job");
        commit(delete_cmd{live_generation_});
        live_generation_ = 0;
        return;
    }
  }

  void process_fault(const step& s) {
    if (!registered())
      return note("not registered");
    std::vector<fault_rank> faults;
    for (uint32_t i = 0, n = 1 + s.x % 3; i < n; ++i) {
      auto r = (s.y >> (i * 8)) & 0xff;
      auto t = (s.z >> (i * 8)) & 0xff;
      faults.push_back(
        {r % 64 == 63 ? "999" : rank(r),
         t % 32 == 31 ? "7"
                      : nth(std::array<const char*, 5>{"1", "1", "1", "0", "2"},
                            t)});
    }
    note("fault " + faults.front().rank_id + ":" + faults.front().fault_type
         + (faults.size() > 1 ? " +" + std::to_string(faults.size() - 1) : ""));
    auto kind = classify_process_fault(live_.rec, live_.spec, live_.init,
                                       faults, live_.ranks.get());
    if (!kind)
      return note("refused (" + kind.error().message() + ")");
    flow_input in;
    in.name = *kind;
    in.kind = report_kind::process;
    in.faults = std::move(faults);
    feed(std::move(in));
  }

  void device_faults(const step& s) {
    if (!live_.exists)
      return note("no job");
    job_device_faults snapshot;
    snapshot.job_id = live_.spec.job_id;
    snapshot.health_state = nth(
      std::array<const char*, 4>{"Healthy", "UnHealthy", "UnHealthy",
                                 "SubHealthy"},
      s.x);
    static const std::array<const char*, 5> codes
      = {"80E01801", "8C1F860B", "80818C05", "81078603", "80C98009"};
    // Mostly levels that are faults for recovery; the others are recorded
    // without a flow (NotHandleFault), gated by health (SubHealthFault) or
    // skipped (an unknown level).
    static const std::array<const char*, 8> levels
      = {"RestartBusiness", "RestartRequest", "SeparateNPU",    "",
         "RestartNPU",      "SubHealthFault", "NotHandleFault", "Bogus"};
    for (uint32_t i = 0, n = s.y % 3; i < n; ++i) {
      const auto& pods = live_.spec.pods;
      const auto& p = pods[((s.z >> (i * 8)) & 0xff) % pods.size()];
      if (p.devices.empty())
        continue;
      const auto& d = p.devices[((s.z >> (i * 8 + 4)) & 0xf) % p.devices.size()];
      snapshot.faults.push_back(
        {p.node_name, d.device_id, {nth(codes, s.y >> (4 + i * 4))},
         nth(levels, s.z >> (24 + i * 3))});
    }
    note(snapshot.health_state + " with "
         + std::to_string(snapshot.faults.size()) + " faults");
    auto before = live_.device_faults;
    auto before_health = live_.health_state;
    if (!commit(faults_cmd{snapshot}) || !registered())
      return;
    // Reference §4.1: new faults start, join or pre-empt a flow.
    auto [name, fresh]
      = fault_center_input(live_.rec, live_.spec, live_.init, before,
                           live_.device_faults, live_.health_state,
                           live_.ranks.get(), before_health);
    if (name == ev::none)
      return;
    note(std::string{"fault center: "} + to_string(name));
    flow_input in;
    in.name = name;
    in.faults = std::move(fresh);
    feed(std::move(in));
  }

  static bool to_worker(const process_signal& sig) {
    return sig.signal_type == "SwitchRankList"
      || sig.signal_type == "StressTestRankParams";
  }

  bool deliverable() const {
    if (!live_.exists || !live_.rec.flow.outbox)
      return false;
    const auto& sig = *live_.rec.flow.outbox;
    return (to_worker(sig) || live_generation_ != 0)
      && (to_worker(sig) || send_result_event(sig) != ev::none);
  }

  void deliver() {
    if (!live_.exists || !live_.rec.flow.outbox)
      return note("nothing pending");
    auto sig = *live_.rec.flow.outbox;
    bool worker = to_worker(sig);
    if (!worker && live_generation_ == 0)
      return note("no agent stream for " + describe_signal(sig));
    auto name = worker ? ev::notify_success : send_result_event(sig);
    note("deliver " + describe_signal(sig));
    if (name == ev::none)
      return;
    auto state = live_.rec.flow.state;
    flow_input in;
    in.name = name;
    in.delivered = sig;
    if (!feed(std::move(in))) {
      fail("delivery", "the pending signal " + describe_signal(sig)
                         + " was refused on delivery in "
                         + to_string(state));
      return;
    }
    delivered_.push_back(sig);
    if (delivered_.size() > 8)
      delivered_.erase(delivered_.begin());
  }

  void stale_delivery(const step& s) {
    if (!registered() || delivered_.empty())
      return note("nothing delivered yet");
    auto sig = delivered_[s.x % delivered_.size()];
    auto name = to_worker(sig) ? ev::notify_success : send_result_event(sig);
    note("late duplicate of " + describe_signal(sig));
    flow_input in;
    in.name = name;
    in.delivered = sig;
    feed(std::move(in));
  }

  void report(const step& s) {
    if (!registered())
      return note("not registered");
    const auto& rec = live_.rec;
    std::vector<report_kind> waited;
    for (auto k : report_kinds)
      if (report_waited(rec.flow.state, k, 0))
        waited.push_back(k);
    auto kind = !waited.empty() && s.x % 4 != 0
                  ? waited[(s.x >> 2) % waited.size()]
                  : nth(report_kinds, s.x >> 4);
    flow_input in;
    in.name = ev::receive_report;
    in.kind = kind;
    switch (kind) {
      case report_kind::stop:
        in.report.code
          = nth(std::array<int32_t, 7>{0, 0, 0, 0, 404, 499, 1}, s.y);
        break;
      case report_kind::strategy: {
        static const std::array<const char*, 6> names
          = {"retry", "recover", "dump", "exit", "downgrade",
             "recover-in-place"};
        for (size_t i = 0; i < names.size(); ++i)
          if ((s.z >> i) & 1u)
            in.strategies.emplace_back(names[i]);
        break;
      }
      case report_kind::status: {
        in.report.code = nth(
          std::array<int32_t, 10>{0, 0, 0, 0, 0, 405, 499, 406, 201, 1}, s.y);
        static const std::array<const char*, 7> names
          = {"retry", "recover", "dump", "exit", "downgrade", "upgrade", "bogus"};
        if (!rec.flow.decided.empty() && s.z % 3 != 0)
          in.report.strategy = rec.flow.decided.back();
        else
          in.report.strategy = nth(names, s.z >> 2);
        if (in.report.code == 201)
          in.report.isolate_ranks.push_back(rank(s.z >> 8));
        break;
      }
      case report_kind::switch_nic:
        in.report.code = nth(std::array<int32_t, 3>{0, 0, 1}, s.y);
        break;
      case report_kind::stress: {
        std::vector<std::string> ranks;
        for (const auto& [r, ops] : rec.action.stress_params)
          ranks.push_back(r);
        if (ranks.empty() || s.z % 8 == 0)
          ranks.push_back(s.z % 16 == 0 ? "999" : rank(s.z >> 4));
        static const std::array<const char*, 8> codes
          = {"0", "0", "0", "1", "2", "3", "4", "0"};
        for (size_t i = 0; i < ranks.size(); ++i) {
          uint32_t c = (s.y >> (i % 16 * 2)) & 0x3;
          auto code = s.y % 29 == 0 ? "7" : c == 0 ? codes[(s.y >> 8) % 8] : "0";
          in.stress_result[ranks[i]]["0"] = {code, "r"};
        }
        break;
      }
      default: break;
    }
    note(std::string{rpc_name(kind)} + " code "
         + std::to_string(in.report.code)
         + (in.report.strategy.empty() ? "" : " " + in.report.strategy));
    if (kind == report_kind::stress)
      if (auto err = validate_stress_results(live_.spec, in.stress_result,
                                             live_.ranks.get()))
        return note("refused (" + err.message() + ")");
    feed(std::move(in));
  }

  void put_change(const step& s) {
    if (!live_.exists) {
      note("re-create the job");
      commit(put_cmd{cfg_.spec});
      return;
    }
    auto spec = live_.spec;
    // The platform sends no annotations with a pod change (it sets them
    // with SetAnnotations); an empty map keeps the job's.
    spec.annotations.clear();
    auto& p = spec.pods[s.x % spec.pods.size()];
    ++puts_;
    auto fresh_uid = "pod-" + std::to_string(p.pod_rank) + "-r"
      + std::to_string(puts_);
    switch (s.y % 7) {
      case 0:
      case 1:
        p.uid = fresh_uid;
        p.running = true;
        note("pod " + std::to_string(p.pod_rank) + " rescheduled as " + p.uid);
        break;
      case 2:
        p.running = false;
        note("pod " + std::to_string(p.pod_rank) + " not running");
        break;
      case 3:
        p.running = true;
        note("pod " + std::to_string(p.pod_rank) + " running");
        break;
      case 4:
        p.uid = fresh_uid;
        p.running = false;
        note("pod " + std::to_string(p.pod_rank) + " pending as " + p.uid);
        break;
      case 5:
        p.node_name = "node-" + std::to_string(p.pod_rank) + "-m"
          + std::to_string(s.z % 3);
        note("pod " + std::to_string(p.pod_rank) + " moved to "
             + p.node_name);
        break;
      default:
        spec.pod_rescheduling = !spec.pod_rescheduling;
        note(std::string{"podRescheduling="}
             + (spec.pod_rescheduling ? "true" : "false"));
        break;
    }
    if (!commit(put_cmd{std::move(spec)}))
      return;
    if (registered() && live_.rec.flow.state != st::init) {
      note("job changed");
      flow_input in;
      in.name = ev::job_changed;
      feed(std::move(in));
    }
  }

  void annotate(const step& s) {
    if (!live_.exists)
      return note("no job");
    annotate_cmd cmd;
    switch (s.x % 6) {
      case 0:
        cmd.set["ProcessRecoverStrategy"] = nth(
          std::array<const char*, 6>{"retry", "recover", "dump", "exit",
                                     "bogus", ""},
          s.y);
        break;
      case 1: {
        std::string list;
        for (uint32_t i = 0, n = 1 + s.y % 2; i < n; ++i)
          list += (i > 0 ? "," : "") + rank(s.z >> (i * 8)) + ":"
            + nth(std::array<const char*, 3>{"1", "0", "2"}, s.z >> (i * 8 + 4));
        cmd.set["ProcessResultFault"] = list;
        break;
      }
      case 2:
        cmd.set["RankTableReady"] = s.y % 2 == 0 ? "true" : "false";
        break;
      case 3: cmd.remove.emplace_back("ProcessResultFault"); break;
      case 4: cmd.remove.emplace_back("ProcessConfirmFault"); break;
      default: cmd.remove.emplace_back("ProcessRecoverStrategy"); break;
    }
    for (const auto& [k, v] : cmd.set)
      note("set " + k + "=" + v);
    for (const auto& k : cmd.remove)
      note("remove " + k);
    auto seq = live_.seq;
    if (!commit(cmd) || live_.seq == seq)
      return;
    if (registered() && live_.rec.flow.state != st::init) {
      flow_input in;
      in.name = ev::annotations_changed;
      feed(std::move(in));
    }
  }

  void switch_nic(const step& s) {
    if (!live_.exists)
      return note("no job");
    std::vector<nic_op> ops;
    const auto& pods = live_.spec.pods;
    for (uint32_t i = 0, n = 1 + s.x % 2; i < n; ++i) {
      const auto& p = pods[((s.y >> (i * 4)) & 0xf) % pods.size()];
      std::string dev = p.devices.empty() || s.z % 10 == 9
        ? "x9"
        : p.devices[((s.z >> (i * 4)) & 0xf) % p.devices.size()].device_id;
      ops.push_back({p.node_name, dev, ((s.x >> (i + 1)) & 1u) == 1u});
    }
    flow_input in;
    in.name = ev::start_switch_nic;
    in.who = "operator";
    auto verdict
      = validate_switch(live_.rec, live_.spec, live_.registered,
                        live_generation_ != 0, ops, in.switch_ranks,
                        in.switch_ops);
    note("switch nic: " + std::to_string(verdict.code) + " " + verdict.info);
    if (verdict.code != 0)
      return;
    if (!feed(std::move(in)))
      fail("operator", "a switch the validator accepted was refused in "
                         + state_name());
  }

  void stress_test(const step& s) {
    if (!live_.exists)
      return note("no job");
    stress_request req;
    const auto& pods = live_.spec.pods;
    if (s.x % 3 == 0)
      req.all_nodes_ops = s.y % 2 == 0 ? std::vector<int64_t>{0}
                                       : std::vector<int64_t>{0, 1};
    else
      req.node_ops[pods[s.y % pods.size()].node_name]
        = s.z % 2 == 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{1};
    flow_input in;
    in.name = ev::start_stress_test;
    in.who = "operator";
    auto verdict = validate_stress(live_.rec, live_.spec, live_.registered,
                                   live_generation_ != 0, req,
                                   in.stress_params);
    note("stress test: " + std::to_string(verdict.code) + " " + verdict.info);
    if (verdict.code != 0)
      return;
    if (!feed(std::move(in)))
      fail("operator", "a stress test the validator accepted was refused in "
                         + state_name());
  }

  void clear_node(const step& s) {
    if (!registered() || live_.rec.job.unhealthy_nodes.empty())
      return note("no unhealthy node");
    const auto& nodes = live_.rec.job.unhealthy_nodes;
    auto i = nodes.begin();
    std::advance(i, s.x % nodes.size());
    flow_input in;
    in.name = ev::node_health_cleared;
    in.node = i->first;
    in.who = "operator";
    note("clear node " + in.node);
    feed(std::move(in));
  }

  // A crash: everything not in the log is gone; start-up folds the log
  // from an empty model and the job goes on from the result.
  void restart() {
    job_model replayed;
    uint64_t count = 0;
    for (const auto& bytes : log_) {
      auto ev = storage::decode_event(bytes);
      if (!ev) {
        fail("codec", "event " + std::to_string(count + 1)
                        + " of the log does not decode at restart");
        return;
      }
      ++count;
      if (opts_.tamper_replay && !opts_.tamper_replay(*ev))
        continue;
      replayed = apply(std::move(replayed), std::move(*ev));
    }
    note("restart: replayed " + std::to_string(count) + " events");
    // Nothing acknowledged is missing: every event decided before the crash
    // is in the replayed state.
    if (replayed.seq != live_.seq)
      return fail("durability",
                  "the replayed job ends at seq " + std::to_string(replayed.seq)
                    + ", but " + std::to_string(live_.seq)
                    + " events were acknowledged");
    if (replayed.rec.flow.state != live_.rec.flow.state)
      return fail("durability", std::string{"the replayed job is in "}
                                  + to_string(replayed.rec.flow.state)
                                  + ", the live one was in " + state_name());
    auto diff = first_difference(live_, replayed);
    if (!diff.empty())
      return fail("replay",
                  "the replayed job differs from the live one in " + diff);
    // A snapshot of the live state reads back as the same state.
    auto snap = storage::decode_snapshot(storage::encode_snapshot(live_));
    if (!snap)
      return fail("snapshot", "the snapshot of the live state does not decode");
    diff = first_difference(live_, *snap);
    if (!diff.empty())
      return fail("snapshot", "the snapshot of the live state reads back "
                              "different in "
                                + diff);
    // Start-up as recoverd does it: the snapshot taken at the previous
    // restart plus the events after it.
    if (!snapshot_.empty()) {
      auto from = storage::decode_snapshot(snapshot_);
      if (!from)
        return fail("snapshot", "the stored snapshot does not decode");
      auto state = std::move(*from);
      for (size_t i = snapshot_seq_; i < log_.size(); ++i) {
        auto ev = storage::decode_event(log_[i]);
        if (ev && (!opts_.tamper_replay || opts_.tamper_replay(*ev)))
          state = apply(std::move(state), std::move(*ev));
      }
      diff = first_difference(live_, state);
      if (!diff.empty())
        return fail("snapshot", "the snapshot of seq "
                                  + std::to_string(snapshot_seq_)
                                  + " plus the events after it differs from "
                                    "the live job in "
                                  + diff);
    }
    snapshot_ = storage::encode_snapshot(live_);
    snapshot_seq_ = live_.seq;
    live_ = replayed;
    shadow_ = std::move(replayed);
    // Streams do not survive a crash; the agent has to subscribe again.
    live_generation_ = 0;
  }

  setup cfg_;
  const run_options& opts_;
  uint64_t seed_;
  client_info client_;
  job_model live_;
  // The fold of the decoded log, kept step by step.
  job_model shadow_;
  // The inspector's fold of the log, and one stored and taken up at every
  // commit (as the inspector keeps one, a few incidents).
  static constexpr size_t history_keep = 2;
  job_history history_{history_keep};
  job_history resumed_{history_keep};
  std::vector<std::string> log_;
  // The snapshot of the last restart and the sequence number it holds.
  std::string snapshot_;
  uint64_t snapshot_seq_ = 0;
  int64_t now_ = 1'700'000'000'000;
  uint64_t live_generation_ = 0;
  uint64_t uuids_made_ = 0;
  uint64_t puts_ = 0;
  std::vector<process_signal> delivered_;
  // The running flow.
  bool in_flow_ = false;
  int64_t flow_start_ = 0;
  int64_t budget_ = 0;
  std::set<std::string> flow_uuids_;
  size_t flows_ = 0;
  std::set<std::string> seen_uuids_;
  std::set<std::string> ended_uuids_;
  std::optional<violation> failure_;
  size_t index_ = 0;
  std::vector<std::string> trace_;
  std::vector<std::pair<std::string, int>> notes_;
};

} // namespace

const char* to_string(step_kind x) {
  static constexpr std::array<const char*, step_kind_count> names
    = {"process_fault", "device_faults", "deliver",    "stale_delivery",
       "report",        "fire_timer",    "idle",       "subscribe",
       "detach",        "init",          "register",   "put_change",
       "annotate",      "switch_nic",    "stress_test", "clear_node",
       "restart",       "delete_job"};
  return names[static_cast<size_t>(x)];
}

schedule make_schedule(uint64_t seed, size_t steps) {
  // Weights per kind, in enum order: deliveries and reports dominate so
  // that flows get far; crashes and deletions are rare enough that they do.
  static constexpr std::array<uint32_t, step_kind_count> weights
    = {10, 5, 18, 2, 22, 8, 3, 4, 2, 1, 1, 6, 4, 3, 3, 1, 4, 1};
  uint32_t total = 0;
  for (auto w : weights)
    total += w;
  rng r{seed};
  schedule result;
  result.seed = seed;
  result.steps.reserve(steps);
  for (size_t i = 0; i < steps; ++i) {
    step s;
    auto pick = r.below(total);
    size_t k = 0;
    while (pick >= weights[k])
      pick -= weights[k++];
    s.kind = static_cast<step_kind>(k);
    auto band = r.below(20);
    s.dt_ms = band < 14 ? r.below(20) : band < 19 ? r.below(500) : r.below(5'000);
    s.x = static_cast<uint32_t>(r.next());
    s.y = static_cast<uint32_t>(r.next());
    s.z = static_cast<uint32_t>(r.next());
    s.settle = r.below(4) != 0;
    result.steps.push_back(s);
  }
  return result;
}

outcome run(const schedule& s, const run_options& opts) {
  world w{s.seed, opts};
  size_t i = 0;
  for (; i < s.steps.size() && !w.failure(); ++i)
    w.run(i, s.steps[i]);
  return std::move(w).result(i);
}

schedule shrink(const schedule& s, const run_options& opts) {
  return shrink(s, opts, [](const schedule& x, const run_options& o) {
    return run(x, o);
  });
}

schedule shrink(const schedule& s, const run_options& opts,
                const runner& run) {
  auto quiet = opts;
  quiet.trace = false;
  auto first = run(s, quiet);
  if (!first.failure)
    return s;
  auto invariant = first.failure->invariant;
  auto best = s;
  best.steps.resize(std::min(best.steps.size(), first.failure->step + 1));
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < best.steps.size();) {
      auto candidate = best;
      candidate.steps.erase(candidate.steps.begin()
                            + static_cast<std::ptrdiff_t>(i));
      auto o = run(candidate, quiet);
      if (o.failure && o.failure->invariant == invariant) {
        candidate.steps.resize(
          std::min(candidate.steps.size(), o.failure->step + 1));
        best = std::move(candidate);
        progress = true;
      } else {
        ++i;
      }
    }
  }
  return best;
}

std::string describe(const schedule& s) {
  std::string out = "seed " + std::to_string(s.seed) + ", "
    + std::to_string(s.steps.size()) + " steps\n"
    + describe_setup(make_setup(s.seed)) + "\n";
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const auto& x = s.steps[i];
    char line[160];
    std::snprintf(line, sizeof(line), "  %zu: %s dt=%u x=%u y=%u z=%u%s\n",
                  i, to_string(x.kind), x.dt_ms, x.x, x.y, x.z,
                  x.settle ? "" : " (no push)");
    out += line;
  }
  return out;
}

std::string first_difference(const job_model& x, const job_model& y) {
  std::string out;
  auto cmp = [&out](const std::string& name, bool equal) {
    if (out.empty() && !equal)
      out = name;
  };
  cmp("exists", x.exists == y.exists);
  const auto& a = x.spec;
  const auto& b = y.spec;
  cmp("spec.job_id", a.job_id == b.job_id);
  cmp("spec.name", a.name == b.name);
  cmp("spec.ns", a.ns == b.ns);
  cmp("spec.framework", a.framework == b.framework);
  cmp("spec.recover_strategies", a.recover_strategies == b.recover_strategies);
  cmp("spec.process_recover_enable",
      a.process_recover_enable == b.process_recover_enable);
  cmp("spec.graceful_fault_tolerance",
      a.graceful_fault_tolerance == b.graceful_fault_tolerance);
  cmp("spec.fault_scheduling", a.fault_scheduling == b.fault_scheduling);
  cmp("spec.pod_rescheduling", a.pod_rescheduling == b.pod_rescheduling);
  cmp("spec.sub_healthy_strategy",
      a.sub_healthy_strategy == b.sub_healthy_strategy);
  cmp("spec.platform_mode", a.platform_mode == b.platform_mode);
  cmp("spec.annotations", a.annotations == b.annotations);
  cmp("spec.pods (count)", a.pods.size() == b.pods.size());
  for (size_t i = 0; out.empty() && i < a.pods.size(); ++i)
    cmp("spec.pods[" + std::to_string(i) + "]", same(a.pods[i], b.pods[i]));
  cmp("inited", x.inited == y.inited);
  cmp("init.platform_mode", x.init.platform_mode == y.init.platform_mode);
  cmp("init.strategies", x.init.strategies == y.init.strategies);
  cmp("init.process_recover_enable",
      x.init.process_recover_enable == y.init.process_recover_enable);
  cmp("init.sub_healthy_strategy",
      x.init.sub_healthy_strategy == y.init.sub_healthy_strategy);
  cmp("init.framework", x.init.framework == y.init.framework);
  cmp("registered", x.registered == y.registered);
  if (out.empty() && !(x.rec == y.rec))
    out = recovery_difference(x.rec, y.rec);
  cmp("created_at_ms", x.created_at_ms == y.created_at_ms);
  cmp("updated_at_ms", x.updated_at_ms == y.updated_at_ms);
  cmp("health_state", x.health_state == y.health_state);
  cmp("device_faults", same_each(x.device_faults, y.device_faults));
  cmp("subscriber_generation",
      x.subscriber_generation == y.subscriber_generation);
  cmp("seq", x.seq == y.seq);
  // The rank index is derived: absent (a decoded snapshot leaves it to the
  // job actor) or indexing every device of the spec.
  auto indexes_spec = [](const job_model& m) {
    return !m.ranks
           || m.ranks->size() == static_cast<size_t>(ranks_of(m.spec));
  };
  cmp("ranks", indexes_spec(x) && indexes_spec(y));
  return out;
}

} // namespace recoverd::dst
