#include "tools/dst/actor_sim.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/error.hpp"
#include "actors/job_registry.hpp"
#include "actors/journal.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"

namespace recoverd::dst {

namespace {

template <class T, size_t N>
const T& nth(const std::array<T, N>& xs, uint32_t i) {
  return xs[i % N];
}

std::string describe_signal(const process_signal& sig) {
  std::string out = sig.signal_type;
  if (!sig.change_strategy.empty())
    out += "(" + sig.change_strategy + ")";
  return out + " uuid=" + (sig.uuid.empty() ? "\"\"" : sig.uuid);
}

bool is_worker_signal(const process_signal& sig) {
  return sig.signal_type == "SwitchRankList"
    || sig.signal_type == "StressTestRankParams";
}

class actor_world;

// A stream the simulator holds: records what the job pushes, with the
// global log position at that moment (the events the push follows), and
// whether the client lost it.
template <class T>
class sim_sink final : public stream_sink<T> {
public:
  struct item {
    T value;
    uint64_t position = 0;
    bool lost = false;
  };

  explicit sim_sink(actor_world* world) : world_(world) {
    // nop
  }

  bool push(const T& x) override;

  void finish(const caf::error&) override {
    if (finished)
      return;
    finished = true;
    auto hooks = std::move(hooks_);
    for (auto& f : hooks)
      f();
  }

  void on_close(std::function<void()> f) override {
    if (finished)
      f();
    else
      hooks_.push_back(std::move(f));
  }

  bool closed() const override {
    return finished;
  }

  std::vector<item> items;
  bool finished = false;

private:
  actor_world* world_;
  std::vector<std::function<void()>> hooks_;
};

using agent_sink = sim_sink<process_signal>;
using switch_sink = sim_sink<switch_rank_list>;
using stress_sink = sim_sink<stress_rank_params>;
using operator_sink = sim_sink<om_message>;

// A reply that arrived (value) or an error (value empty).
template <class T>
struct answer {
  std::optional<T> value;
  caf::error error;

  explicit operator bool() const {
    return value.has_value();
  }
};

caf::actor_system_config& init_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.add_error_category(errc_category, render_error);
  return cfg;
}

std::string fresh_dir() {
  static std::atomic<int> counter{0};
  auto path = std::filesystem::temp_directory_path()
              / ("recoverd-dst-" + std::to_string(::getpid()) + "-"
                 + std::to_string(counter++));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path.string();
}

constexpr std::array<report_kind, 5> report_kinds
  = {report_kind::stop, report_kind::strategy, report_kind::status,
     report_kind::switch_nic, report_kind::stress};

// -- the world ----------------------------------------------------------------

class actor_world {
public:
  actor_world(uint64_t seed, const run_options& opts,
              const actor_options& aopts)
    : setup_(make_setup(seed)),
      opts_(opts),
      aopts_(aopts),
      seed_(seed),
      sys_(init_config(sys_cfg_)),
      sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
      self_(sys_, true),
      dir_(fresh_dir()) {
    caf_base_ = sched_.clock().current_time;
    client_ = {setup_.spec.job_id, "taskd", "ipv4:10.0.0.1:40000"};
    note("prologue");
    if (!open_log())
      return;
    start({}, {});
    put(setup_.spec);
    ask<biz_status>(init_atom::value, client_);
    ask<biz_status>(register_atom::value, client_);
    subscribe();
    attach_workers();
    check_step();
    flush_trace(0, 0, "prologue");
  }

  ~actor_world() {
    stop();
    log_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  actor_world(const actor_world&) = delete;
  actor_world& operator=(const actor_world&) = delete;

  void run(size_t index, const step& s) {
    index_ = index;
    advance_to(now_ + s.dt_ms);
    // A step without `settle` loses what the job pushes to the agent during
    // it: recoverd counts it as delivered, the agent never saw it.
    deaf_ = !s.settle;
    if (!failure_)
      act(s);
    deaf_ = false;
    if (!failure_)
      check_step();
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
    out.events = shadow_.seq;
    out.flows = flows_;
    return out;
  }

  // The global log position now (a sink stamps what it receives with it).
  uint64_t position() const {
    return log_ ? log_->last_position() : 0;
  }

  bool deaf() const {
    return deaf_;
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
    if (!notes_.empty() && notes_.back().first == x) {
      ++notes_.back().second;
      return;
    }
    notes_.emplace_back(std::move(x), 1);
  }

  void flush_trace(size_t index, uint32_t dt, const char* kind) {
    if (!opts_.trace)
      return;
    std::string line = "#" + std::to_string(index) + " +" + std::to_string(dt)
      + "ms " + kind + ": ";
    bool first = true;
    for (const auto& [text, count] : notes_) {
      line += (first ? "" : "; ") + text;
      if (count > 1)
        line += " (x" + std::to_string(count) + ")";
      first = false;
    }
    line += std::string{" => "}
      + (shadow_.exists ? to_string(shadow_.rec.flow.state) : "(no job)")
      + " seq=" + std::to_string(shadow_.seq);
    if (failure_ && failure_->step == index)
      line += "  !! " + failure_->invariant + ": " + failure_->what;
    trace_.push_back(std::move(line));
    notes_.clear();
  }

  std::string fresh_uuid() {
    ++uuids_made_;
    char buf[40];
    std::snprintf(buf, sizeof(buf), "A%08llx-%08llx",
                  static_cast<unsigned long long>(seed_ & 0xffffffffu),
                  static_cast<unsigned long long>(uuids_made_));
    return buf;
  }

  const std::string& job_id() const {
    return setup_.spec.job_id;
  }

  std::string rank(uint32_t i) const {
    const auto& spec = shadow_.exists ? shadow_.spec : setup_.spec;
    size_t n = 0;
    for (const auto& p : spec.pods)
      n += p.devices.size();
    if (n == 0)
      return "0";
    size_t k = i % n;
    for (const auto& p : spec.pods) {
      if (k < p.devices.size())
        return p.devices[k].rank_id;
      k -= p.devices.size();
    }
    return "0";
  }

  // -- the actors -------------------------------------------------------------

  bool open_log() {
    storage::event_log_options o;
    o.path = dir_ + "/db";
    // A crash of the process, not of the machine: written is durable.
    o.sync = false;
    o.min_free_bytes = 0;
    o.write_buffer_size = 1 << 20;
    auto x = storage::event_log::open(o);
    if (!x) {
      fail("storage", "the event log does not open: " + message_of(x.error()));
      return false;
    }
    log_ = std::move(*x);
    return true;
  }

  registry_config config() {
    registry_config cfg;
    cfg.job.waits = setup_.waits;
    cfg.job.snapshot_every = 1 + seed_ % 9;
    cfg.job.clock = [this] { return now_; };
    cfg.job.uuid = [this] { return fresh_uuid(); };
    return cfg;
  }

  void start(std::vector<initial_job> initial,
             std::vector<deleted_job> deleted) {
    journal_config jc;
    jc.retry_interval = millis{0};
    journal_ = sys_.spawn(recoverd::journal, log_.get(), jc);
    registry_ = sys_.spawn(job_registry, config(), journal_,
                           std::move(initial), std::vector<job_digest>{},
                           std::move(deleted),
                           static_cast<const storage::event_log*>(log_.get()));
    sched_.run();
  }

  void stop() {
    if (registry_)
      self_->send_exit(registry_, caf::exit_reason::user_shutdown);
    if (journal_)
      self_->send_exit(journal_, caf::exit_reason::user_shutdown);
    registry_ = nullptr;
    journal_ = nullptr;
    sched_.run();
  }

  // Sends to the registry, runs every actor until nothing is left, and
  // takes the reply. A request left unanswered is a violation (a blocking
  // receive would hang the simulator instead).
  template <class T, class... Ts>
  answer<T> ask(Ts&&... xs) {
    answer<T> result;
    if (!registry_) {
      result.error = make_error(errc::unknown_job, "no registry");
      return result;
    }
    auto res = self_->request(registry_, caf::infinite,
                              std::forward<Ts>(xs)...);
    sched_.run();
    if (self_->mailbox().empty()) {
      fail("reply", "a request to the registry got no answer");
      result.error = make_error(errc::unknown_job, "no answer");
      return result;
    }
    res.receive([&](T& x) { result.value = std::move(x); },
                [&](caf::error& err) { result.error = std::move(err); });
    return result;
  }

  std::optional<job_inspection> inspect() {
    auto x = ask<job_inspection>(inspect_atom::value, job_id());
    if (!x) {
      if (failure_ && failure_->invariant == "reply")
        return std::nullopt;
      if (errc_of(x.error) != errc::unknown_job)
        fail("inspect", "Inspect failed: " + message_of(x.error));
      return std::nullopt;
    }
    return std::move(*x.value);
  }

  // -- time -------------------------------------------------------------------

  int64_t to_ms(caf::actor_clock::time_point tp) const {
    return ms_base_
      + std::chrono::duration_cast<std::chrono::milliseconds>(tp - caf_base_)
          .count();
  }

  // Moves the clock to `t`, firing on the way every delayed message the
  // coordinator holds (flow deadlines, keep-alives, journal syncs) at its
  // time, and checking after each.
  void advance_to(int64_t t) {
    auto& clk = sched_.clock();
    for (size_t fired = 0; !failure_; ++fired) {
      if (clk.schedule().empty())
        break;
      auto at = to_ms(clk.schedule().begin()->first);
      if (at > t)
        break;
      if (fired > 200'000) {
        fail("deadline", "200000 timers fired before t=+"
                           + std::to_string(t - ms_base_) + " ms");
        return;
      }
      pass_time(std::max(at, now_));
      clk.trigger_timeout();
      sched_.run();
      drain();
    }
    pass_time(t);
    clk.current_time
      = caf_base_ + std::chrono::milliseconds(std::max(t, now_) - ms_base_);
  }

  void pass_time(int64_t t) {
    if (t <= now_ || failure_)
      return;
    // DP scale-in keeps training at reduced size until pods return: time
    // spent there is running, not waiting.
    if (in_flow_ && shadow_.exists
        && shadow_.rec.flow.state == st::scale_running)
      budget_ += t - now_;
    now_ = t;
    if (in_flow_ && now_ - flow_start_ > budget_)
      fail("deadline", "the flow started at t=+"
                         + std::to_string(flow_start_ - ms_base_) + " has run "
                         + std::to_string(now_ - flow_start_) + " ms, now in "
                         + to_string(shadow_.rec.flow.state)
                         + ", past the sum of its waits ("
                         + std::to_string(budget_) + " ms)");
  }

  // -- the checker ------------------------------------------------------------

  // Folds the events the log got since the last look and checks each, then
  // the signals the streams received meanwhile.
  void drain() {
    if (!log_ || failure_)
      return;
    for (;;) {
      auto xs = log_->tail(position_ + 1, 256);
      if (!xs) {
        fail("storage", "reading the log failed: " + message_of(xs.error()));
        return;
      }
      if (xs->empty())
        break;
      for (auto& x : *xs) {
        position_ = x.position;
        if (x.job_id != job_id())
          continue;
        auto ev = storage::decode_event(x.bytes);
        if (!ev) {
          fail("codec", "event #" + std::to_string(x.seq)
                          + " of the log does not decode");
          return;
        }
        if (ev->seq != shadow_.seq + 1)
          fail("replay", "the log holds event #" + std::to_string(ev->seq)
                           + " after #" + std::to_string(shadow_.seq));
        if (opts_.tamper_replay && !opts_.tamper_replay(*ev)) {
          shadow_.seq = ev->seq;
          continue;
        }
        auto before = shadow_.rec;
        auto was = shadow_.exists;
        shadow_ = apply(std::move(shadow_), *ev);
        observe(before, was, *ev, x.position);
      }
    }
    check_signals();
  }

  void start_flow(int64_t t) {
    in_flow_ = true;
    flow_start_ = t;
    budget_ = 0;
    flow_uuids_.clear();
  }

  void end_flow(int64_t t, uint64_t pos) {
    if (!in_flow_)
      return;
    if (t - flow_start_ > budget_)
      fail("deadline", "a flow ended after " + std::to_string(t - flow_start_)
                         + " ms, past the sum of its waits ("
                         + std::to_string(budget_) + " ms)");
    for (const auto& u : flow_uuids_)
      ended_.emplace(u, pos);
    flow_uuids_.clear();
    in_flow_ = false;
    ++flows_;
  }

  void see_uuid(const std::string& u, uint64_t pos) {
    seen_.emplace(u, pos);
    flow_uuids_.insert(u);
  }

  void observe(const recovery& before, bool existed, const event& ev,
               uint64_t pos) {
    const auto* x = std::get_if<flow_stepped>(&ev.body);
    if (!x) {
      // A job deleted or re-created starts afresh: its flow is over.
      if (in_flow_ && (!shadow_.exists || !existed
                       || shadow_.rec.flow.state == st::init))
        end_flow(ev.time_ms, pos);
      return;
    }
    const auto& after = shadow_.rec;
    const auto& old_uuid = before.flow.uuid;
    const auto& uuid = after.flow.uuid;
    if (const auto& sig = x->input.delivered) {
      if (!sig->uuid.empty() && ended_.count(sig->uuid) > 0)
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
        end_flow(ev.time_ms, pos);
      } else if (x->path[i - 1] == st::init) {
        restarted = restarted || i > 1;
        start_flow(ev.time_ms);
      }
    }
    if (uuid != old_uuid) {
      if (!uuid.empty()) {
        if (seen_.count(uuid) > 0)
          fail("uuid", "the flow took uuid " + uuid
                         + ", which an earlier flow or round already had");
        else if (!old_uuid.empty() && !restarted && !starts_round(x->path))
          fail("uuid", "the flow changed its uuid from " + old_uuid + " to "
                         + uuid + " on " + to_string(x->input.name)
                         + " without starting a new round");
        see_uuid(uuid, pos);
      } else if (in_flow_ && after.flow.state != st::init && !restarted) {
        fail("uuid", "the running flow lost its uuid " + old_uuid + " on "
                       + to_string(x->input.name));
      }
    }
    // Side signals (sent once, not awaited) carry the flow's uuid or one
    // of their own, fresh (the stress test's start-agent signals, the
    // sub-health pre-exit outside a flow), never an ended flow's.
    for (const auto& sig : x->side_signals) {
      if (sig.uuid.empty() || sig.uuid == uuid || sig.uuid == old_uuid)
        continue;
      if (ended_.count(sig.uuid) > 0)
        fail("late-signal", "side signal " + describe_signal(sig)
                              + " belongs to a flow that has ended");
      else if (seen_.count(sig.uuid) > 0)
        continue;
      // The log does not keep the step's fresh uuid: one not seen before
      // is taken as fresh.
      else if (in_flow_)
        see_uuid(sig.uuid, pos);
      else
        seen_.emplace(sig.uuid, pos);
    }
    if (in_flow_ && after.flow.deadline_ms > 0
        && (after.flow.deadline_ms != before.flow.deadline_ms
            || after.flow.deadline_event != before.flow.deadline_event))
      budget_ += std::max<int64_t>(0, after.flow.deadline_ms - x->input.now_ms);
  }

  // Every flow signal an agent stream received carries the uuid of a flow
  // that had started by then and had not ended before.
  void check_signals() {
    for (; checked_ < received_.size() && !failure_; ++checked_) {
      const auto& [sig, pos] = received_[checked_];
      if (sig.signal_type == "keep-alive" || sig.uuid.empty())
        continue;
      auto s = seen_.find(sig.uuid);
      if (s == seen_.end() || s->second > pos) {
        fail("uuid", "the agent received " + describe_signal(sig)
                       + ", whose uuid no flow had");
        continue;
      }
      auto e = ended_.find(sig.uuid);
      if (e != ended_.end() && e->second < pos)
        fail("late-signal", "the agent received " + describe_signal(sig)
                              + " after its flow ended");
    }
  }

  // The checks of a step's end: the live job is the fold of its log, a
  // waiting flow has a deadline, an open agent stream has what it must.
  void check_step() {
    drain();
    if (failure_)
      return;
    auto live = inspect();
    if (failure_)
      return;
    if (!live) {
      if (shadow_.exists)
        fail("replay", "the log says the job exists, the registry does not "
                       "know it");
      return;
    }
    const auto& m = live->model;
    auto diff = first_difference(m, shadow_);
    if (!diff.empty())
      return fail("replay", "folding the log differs from the live job in "
                              + diff);
    acked_seq_ = std::max(acked_seq_, m.seq);
    const auto& flow = m.rec.flow;
    if (m.exists && flow.state != st::init && flow.deadline_ms <= 0
        && flow.state != st::scale_running)
      return fail("deadline", std::string{"the flow waits in "}
                                + to_string(flow.state) + " with no deadline");
    if (live->live.subscribed && agent_ && !agent_->finished) {
      // A signal pending while the agent stream is open was not pushed.
      if (flow.outbox && !is_worker_signal(*flow.outbox)
          && send_result_event(*flow.outbox) != ev::none)
        return fail("delivery", "the pending " + describe_signal(*flow.outbox)
                                  + " was not pushed to the open agent "
                                    "stream");
      // The signal the wait waits on reached the stream that is open now
      // (pushed to it, or again when it subscribed).
      if (flow.awaited && !flow.outbox && !is_worker_signal(*flow.awaited)) {
        bool held = false;
        for (const auto& it : agent_->items)
          held = held || it.value == *flow.awaited;
        if (!held)
          return fail("redeliver", "the open agent stream never got "
                                     + describe_signal(*flow.awaited)
                                     + ", which "
                                     + to_string(flow.state) + " waits on");
      }
    }
    // An operator stream ends with its action.
    if (m.rec.action.kind == om_kind::none)
      for (const auto& o : operators_)
        if (!o->finished)
          return fail("operator", "an operator stream is still open, with "
                                    + std::to_string(o->items.size())
                                    + " messages, after its action ended");
    if (opts_.extra_check) {
      auto msg = opts_.extra_check(m);
      if (!msg.empty())
        fail("extra", msg);
    }
  }

  // -- the agent --------------------------------------------------------------

  void subscribe() {
    auto sink = std::make_shared<agent_sink>(this);
    auto x = ask<ok_atom>(subscribe_atom::value, client_,
                          signal_sink_ptr{sink});
    if (!x) {
      note("subscribe refused (" + message_of(x.error) + ")");
      return;
    }
    if (agent_)
      retired_.push_back(agent_);
    agent_ = std::move(sink);
    note("subscribed, " + std::to_string(agent_->items.size()) + " at once");
  }

  void attach_workers() {
    auto sw = std::make_shared<switch_sink>(this);
    if (ask<ok_atom>(worker_atom::value, job_id(), switch_sink_ptr{sw}))
      switch_ = sw;
    auto ss = std::make_shared<stress_sink>(this);
    if (ask<ok_atom>(worker_atom::value, job_id(), stress_sink_ptr{ss}))
      stress_ = ss;
  }

  // The agent saw the signal (on any of its streams, not lost).
  bool saw(const process_signal& sig) const {
    auto in = [&sig](const std::shared_ptr<agent_sink>& s) {
      if (!s)
        return false;
      for (const auto& it : s->items)
        if (!it.lost && it.value == sig)
          return true;
      return false;
    };
    if (in(agent_))
      return true;
    return std::any_of(retired_.begin(), retired_.end(), in);
  }

  void report(flow_input in) {
    auto state = shadow_.rec.flow.state;
    auto kind = in.kind;
    auto code = in.report.code;
    note(std::string{rpc_name(kind)} + " code " + std::to_string(code)
         + (in.report.strategy.empty() ? "" : " " + in.report.strategy));
    sent_.push_back(in);
    if (sent_.size() > 8)
      sent_.erase(sent_.begin());
    auto x = ask<biz_status>(report_atom::value, client_, std::move(in));
    if (!x) {
      note("error (" + message_of(x.error) + ")");
      return;
    }
    note("-> " + std::to_string(x.value->code));
    if (x.value->code == 0 && kind != report_kind::process
        && !report_waited(state, kind, code))
      fail("report", std::string{rpc_name(kind)} + " (code "
                       + std::to_string(code) + ") was accepted in "
                       + to_string(state) + ", which does not wait for it");
  }

  // The report a correct agent sends for the current wait, once it has the
  // signal the wait waits on.
  void answer_signal(const step& s) {
    const auto& flow = shadow_.rec.flow;
    if (!shadow_.exists || !flow.awaited)
      return note("nothing awaited");
    const auto& sig = *flow.awaited;
    flow_input in;
    if (sig.signal_type == "SwitchRankList") {
      if (!switch_ || switch_->items.empty())
        return note("the worker has no SwitchRankList");
      in.kind = report_kind::switch_nic;
      in.report.code = s.y % 8 == 7 ? 1 : 0;
      return report(std::move(in));
    }
    if (sig.signal_type == "StressTestRankParams") {
      if (!stress_ || stress_->items.empty())
        return note("the worker has no StressTestRankParams");
      in.kind = report_kind::stress;
      for (const auto& [r, ops] : shadow_.rec.action.stress_params)
        for (auto op : ops)
          in.stress_result[r][std::to_string(op)]
            = {s.y % 8 == 7 ? "1" : "0", "r"};
      return report(std::move(in));
    }
    if (!saw(sig))
      return note("the agent never saw " + describe_signal(sig));
    note("answer " + describe_signal(sig));
    for (auto k : report_kinds)
      if (report_waited(flow.state, k, 0) && k != report_kind::switch_nic
          && k != report_kind::stress) {
        in.kind = k;
        break;
      }
    if (in.kind == report_kind::none)
      return note("no report answers " + std::string{to_string(flow.state)});
    if (in.kind == report_kind::strategy) {
      for (size_t i = 0; i < shadow_.spec.recover_strategies.size(); ++i)
        if ((s.z >> i) & 1u)
          in.strategies.push_back(shadow_.spec.recover_strategies[i]);
      if (in.strategies.empty())
        in.strategies = shadow_.spec.recover_strategies;
    } else if (in.kind == report_kind::status) {
      in.report.code
        = nth(std::array<int32_t, 8>{0, 0, 0, 0, 0, 0, 405, 499}, s.y);
      in.report.strategy = !sig.change_strategy.empty() ? sig.change_strategy
                           : !flow.decided.empty()      ? flow.decided.back()
                                                        : "recover";
    }
    report(std::move(in));
  }

  void random_report(const step& s) {
    const auto& rec = shadow_.rec;
    std::vector<report_kind> waited;
    for (auto k : report_kinds)
      if (report_waited(rec.flow.state, k, 0))
        waited.push_back(k);
    flow_input in;
    in.kind = !waited.empty() && s.x % 4 != 0
                ? waited[(s.x >> 2) % waited.size()]
                : nth(report_kinds, s.x >> 4);
    switch (in.kind) {
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
    report(std::move(in));
  }

  // -- the steps --------------------------------------------------------------

  void act(const step& s) {
    switch (s.kind) {
      case step_kind::process_fault: return process_fault(s);
      case step_kind::device_faults: return device_faults(s);
      case step_kind::deliver: return answer_signal(s);
      case step_kind::stale_delivery:
        if (sent_.empty())
          return note("nothing sent yet");
        note("again:");
        return report(sent_[s.x % sent_.size()]);
      case step_kind::report: return random_report(s);
      case step_kind::fire_timer: {
        auto d = shadow_.exists ? shadow_.rec.flow.deadline_ms : 0;
        if (d <= now_) {
          auto& sched = sched_.clock().schedule();
          if (sched.empty())
            return note("no timer");
          d = to_ms(sched.begin()->first);
        }
        note("to +" + std::to_string(d - now_) + " ms");
        return advance_to(d);
      }
      case step_kind::idle:
        return advance_to(now_ + (s.x % 8 == 0 ? 60'000 : 500 + s.x % 5'000));
      case step_kind::subscribe:
        subscribe();
        if (s.x % 4 == 0)
          attach_workers();
        return;
      case step_kind::detach:
        if (!agent_ || agent_->finished)
          return note("no stream");
        note("the agent stream drops");
        agent_->finish(caf::none);
        sched_.run();
        return;
      case step_kind::init: {
        auto x = ask<biz_status>(init_atom::value, client_);
        return note("init -> " + (x ? std::to_string(x.value->code)
                                    : message_of(x.error)));
      }
      case step_kind::enroll: {
        auto x = ask<biz_status>(register_atom::value, client_);
        return note("register -> " + (x ? std::to_string(x.value->code)
                                        : message_of(x.error)));
      }
      case step_kind::put_change: return put_change(s);
      case step_kind::annotate: return annotate(s);
      case step_kind::switch_nic: return switch_nic(s);
      case step_kind::stress_test: return stress_test(s);
      case step_kind::clear_node: return clear_node(s);
      case step_kind::restart: return restart(s);
      case step_kind::delete_job: {
        auto x = ask<uint64_t>(delete_atom::value, job_id());
        return note("delete -> " + (x ? "seq " + std::to_string(*x.value)
                                      : message_of(x.error)));
      }
    }
  }

  void put(job_spec spec) {
    auto x = ask<put_result>(put_atom::value, std::move(spec));
    note("put -> " + (x ? "seq " + std::to_string(x.value->job.last_seq)
                        : message_of(x.error)));
  }

  void process_fault(const step& s) {
    flow_input in;
    in.kind = report_kind::process;
    for (uint32_t i = 0, n = 1 + s.x % 3; i < n; ++i) {
      auto r = (s.y >> (i * 8)) & 0xff;
      auto t = (s.z >> (i * 8)) & 0xff;
      in.faults.push_back(
        {r % 64 == 63 ? "999" : rank(r),
         t % 32 == 31 ? "7"
                      : nth(std::array<const char*, 5>{"1", "1", "1", "0", "2"},
                            t)});
    }
    note("fault " + in.faults.front().rank_id + ":"
         + in.faults.front().fault_type);
    report(std::move(in));
  }

  void device_faults(const step& s) {
    job_device_faults snapshot;
    snapshot.job_id = job_id();
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
    const auto& pods = (shadow_.exists ? shadow_.spec : setup_.spec).pods;
    for (uint32_t i = 0, n = s.y % 3; i < n; ++i) {
      const auto& p = pods[((s.z >> (i * 8)) & 0xff) % pods.size()];
      if (p.devices.empty())
        continue;
      const auto& d = p.devices[((s.z >> (i * 8 + 4)) & 0xf) % p.devices.size()];
      snapshot.faults.push_back(
        {p.node_name, d.device_id, {nth(codes, s.y >> (4 + i * 4))},
         nth(levels, s.z >> (24 + i * 3))});
    }
    note(snapshot.health_state + " with "
         + std::to_string(snapshot.faults.size()) + " device faults");
    auto x = ask<device_faults_outcome>(faults_atom::value, std::move(snapshot));
    if (!x)
      note("refused (" + message_of(x.error) + ")");
  }

  void put_change(const step& s) {
    if (!shadow_.exists) {
      note("re-create the job");
      return put(setup_.spec);
    }
    auto spec = shadow_.spec;
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
        break;
      case 2: p.running = false; break;
      case 3: p.running = true; break;
      case 4:
        p.uid = fresh_uid;
        p.running = false;
        break;
      case 5:
        p.node_name = "node-" + std::to_string(p.pod_rank) + "-m"
          + std::to_string(s.z % 3);
        break;
      default: spec.pod_rescheduling = !spec.pod_rescheduling; break;
    }
    note("pod " + std::to_string(p.pod_rank) + " uid=" + p.uid + " running="
         + (p.running ? "1" : "0") + " node=" + p.node_name);
    put(std::move(spec));
  }

  void annotate(const step& s) {
    string_map set;
    std::vector<std::string> remove;
    switch (s.x % 6) {
      case 0:
        set["ProcessRecoverStrategy"] = nth(
          std::array<const char*, 6>{"retry", "recover", "dump", "exit",
                                     "bogus", ""},
          s.y);
        break;
      case 1: {
        std::string list;
        for (uint32_t i = 0, n = 1 + s.y % 2; i < n; ++i)
          list += (i > 0 ? "," : "") + rank(s.z >> (i * 8)) + ":"
            + nth(std::array<const char*, 3>{"1", "0", "2"}, s.z >> (i * 8 + 4));
        set["ProcessResultFault"] = list;
        break;
      }
      case 2: set["RankTableReady"] = s.y % 2 == 0 ? "true" : "false"; break;
      case 3: remove.emplace_back("ProcessResultFault"); break;
      case 4: remove.emplace_back("ProcessConfirmFault"); break;
      default: remove.emplace_back("ProcessRecoverStrategy"); break;
    }
    for (const auto& [k, v] : set)
      note("set " + k + "=" + v);
    for (const auto& k : remove)
      note("remove " + k);
    auto x = ask<annotations_view>(annotate_atom::value, job_id(),
                                   std::move(set), std::move(remove),
                                   std::string{"platform"});
    if (!x)
      note("refused (" + message_of(x.error) + ")");
  }

  void switch_nic(const step& s) {
    std::vector<nic_op> ops;
    const auto& pods = (shadow_.exists ? shadow_.spec : setup_.spec).pods;
    for (uint32_t i = 0, n = 1 + s.x % 2; i < n; ++i) {
      const auto& p = pods[((s.y >> (i * 4)) & 0xf) % pods.size()];
      std::string dev = p.devices.empty() || s.z % 10 == 9
        ? "x9"
        : p.devices[((s.z >> (i * 4)) & 0xf) % p.devices.size()].device_id;
      ops.push_back({p.node_name, dev, ((s.x >> (i + 1)) & 1u) == 1u});
    }
    auto x = ask<biz_status>(switch_atom::value, job_id(), std::move(ops),
                             std::string{"operator"});
    note("switch nic -> " + (x ? std::to_string(x.value->code) + " "
                                   + x.value->info
                               : message_of(x.error)));
    if (x && x.value->code == 0)
      follow(om_kind::switch_nic);
  }

  // The operator follows the action it started on an operator stream.
  void follow(om_kind kind) {
    auto sink = std::make_shared<operator_sink>(this);
    if (ask<ok_atom>(om_atom::value, job_id(), kind, om_sink_ptr{sink}))
      operators_.push_back(std::move(sink));
  }

  void stress_test(const step& s) {
    stress_request req;
    const auto& pods = (shadow_.exists ? shadow_.spec : setup_.spec).pods;
    if (s.x % 3 == 0)
      req.all_nodes_ops = s.y % 2 == 0 ? std::vector<int64_t>{0}
                                       : std::vector<int64_t>{0, 1};
    else
      req.node_ops[pods[s.y % pods.size()].node_name]
        = s.z % 2 == 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{1};
    auto x = ask<biz_status>(stress_atom::value, job_id(), std::move(req),
                             std::string{"operator"});
    note("stress test -> " + (x ? std::to_string(x.value->code) + " "
                                    + x.value->info
                                : message_of(x.error)));
    if (x && x.value->code == 0)
      follow(om_kind::stress);
  }

  void clear_node(const step& s) {
    const auto& nodes = shadow_.rec.job.unhealthy_nodes;
    std::string node;
    if (nodes.empty()) {
      node = "node-" + std::to_string(s.x % 3);
    } else {
      auto i = nodes.begin();
      std::advance(i, s.x % nodes.size());
      node = i->first;
    }
    auto x = ask<std::vector<std::string>>(nodeclear_atom::value, node,
                                           job_id(), std::string{"operator"});
    note("clear " + node + " -> "
         + (x ? std::to_string(x.value->size()) + " jobs"
              : message_of(x.error)));
  }

  // A crash: the actors stop, the log is closed and opened again, replayed,
  // and the actors start from the replay; streams are gone.
  void restart(const step& s) {
    drain();
    auto before = inspect();
    stop();
    log_.reset();
    if (!open_log())
      return;
    auto all = storage::replay_all(*log_, 1);
    if (!all)
      return fail("replay", "replay_all failed: " + message_of(all.error()));
    std::vector<initial_job> jobs;
    for (auto& j : all->live) {
      if (j.state.spec.job_id == job_id()) {
        // The replay from the latest snapshot is the fold of every event.
        auto diff = first_difference(j.state, shadow_);
        if (!diff.empty())
          fail("replay", "replay_all (from the snapshot of "
                           + std::string{j.from_snapshot ? "" : "no "}
                           + "snapshot) differs from the fold of the log in "
                           + diff);
      }
      if (aopts_.tamper_restart)
        aopts_.tamper_restart(j.state);
      jobs.push_back({std::move(j.state), j.tail});
    }
    note("restart: " + std::to_string(all->events_replayed) + " events");
    retired_.clear();
    operators_.clear();
    agent_ = nullptr;
    switch_ = nullptr;
    stress_ = nullptr;
    start(std::move(jobs), std::move(all->deleted));
    // Nothing acknowledged is missing: the restarted job is the one that
    // ran, up to the streams (timers of past deadlines fire only later).
    auto after = inspect();
    if (failure_)
      return;
    if (before && !after)
      return fail("durability", "the job is gone after the restart");
    if (before && after) {
      if (after->model.seq < acked_seq_)
        return fail("durability", "the restarted job ends at seq "
                                    + std::to_string(after->model.seq) + ", "
                                    + std::to_string(acked_seq_)
                                    + " events were acknowledged");
      auto diff = first_difference(before->model, after->model);
      if (!diff.empty())
        return fail("durability", "the restarted job differs from the one "
                                  "that ran in "
                                    + diff);
    }
    if (s.x % 3 != 0) {
      subscribe();
      attach_workers();
    }
  }

  job_setup setup_;
  const run_options& opts_;
  const actor_options& aopts_;
  uint64_t seed_;
  caf::actor_system_config sys_cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  caf::scoped_actor self_;
  std::string dir_;
  std::unique_ptr<storage::event_log> log_;
  journal_actor journal_;
  job_registry_actor registry_;
  client_info client_;
  caf::actor_clock::time_point caf_base_;
  int64_t ms_base_ = 1'700'000'000'000;
  int64_t now_ = ms_base_;
  uint64_t uuids_made_ = 0;
  uint64_t puts_ = 0;
  bool deaf_ = false;
  // The agent's open stream, its earlier ones (since the last restart), and
  // the worker streams.
  std::shared_ptr<agent_sink> agent_;
  std::vector<std::shared_ptr<agent_sink>> retired_;
  std::shared_ptr<switch_sink> switch_;
  std::shared_ptr<stress_sink> stress_;
  std::vector<flow_input> sent_;
  // Operator streams of the actions started since the last restart.
  std::vector<std::shared_ptr<operator_sink>> operators_;

public:
  // Every agent signal pushed, with the log position at the push.
  std::vector<std::pair<process_signal, uint64_t>> received_;

private:
  size_t checked_ = 0;
  // The fold of the log as the checker read it, and how far it read.
  job_model shadow_;
  uint64_t position_ = 0;
  uint64_t acked_seq_ = 0;
  // The running flow.
  bool in_flow_ = false;
  int64_t flow_start_ = 0;
  int64_t budget_ = 0;
  std::set<std::string> flow_uuids_;
  size_t flows_ = 0;
  // uuid -> position where it was first seen / where its flow ended.
  std::map<std::string, uint64_t> seen_;
  std::map<std::string, uint64_t> ended_;
  std::optional<violation> failure_;
  size_t index_ = 0;
  std::vector<std::string> trace_;
  std::vector<std::pair<std::string, int>> notes_;
};

template <class T>
bool sim_sink<T>::push(const T& x) {
  if (finished)
    return false;
  auto pos = world_->position();
  items.push_back({x, pos, world_->deaf()});
  if constexpr (std::is_same_v<T, process_signal>)
    world_->received_.emplace_back(x, pos);
  return true;
}

} // namespace

outcome run_actor(const schedule& s, const run_options& opts,
                  const actor_options& aopts) {
  actor_world w{s.seed, opts, aopts};
  size_t i = 0;
  for (; i < s.steps.size() && !w.failure(); ++i)
    w.run(i, s.steps[i]);
  return std::move(w).result(i);
}

} // namespace recoverd::dst
