#include "actors/job_effects.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "storage/event_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = job_self;

bool changes_annotations(const event_body& body) {
  return std::holds_alternative<annotations_changed>(body)
    || std::holds_alternative<job_registered>(body)
    || std::holds_alternative<job_put>(body);
}

// What the log line of a flow's end says, taken from the model before the
// step that ends it is applied (the step resets the flow).
struct flow_end {
  std::string uuid;
  std::string strategy;
  size_t fault_ranks = 0;
  int64_t started_ms = 0;
};

// The flow `ev` ends, if it is a step that takes the machine back to idle.
std::optional<flow_end> ending_flow(const job_model& model, const event& ev) {
  const auto* x = std::get_if<flow_stepped>(&ev.body);
  if (x == nullptr)
    return std::nullopt;
  const auto& path = x->path;
  bool ends = false;
  for (size_t k = 1; k < path.size(); ++k)
    ends = ends || (path[k] == st::init && path[k - 1] != st::init);
  if (!ends)
    return std::nullopt;
  const auto& flow = model.rec.flow;
  const auto& d = x->change;
  flow_end result;
  result.uuid = flow.uuid;
  if (result.uuid.empty() && d.replaces(recovery_field::uuid))
    result.uuid = d.values.flow.uuid;
  if (!flow.decided.empty())
    result.strategy = flow.decided.back();
  if (d.replaces(recovery_field::decided) && !d.values.flow.decided.empty())
    result.strategy = d.values.flow.decided.back();
  // The ranks the flow knew plus those this step names.
  std::set<std::string> ranks;
  for (const auto& entry : flow.faults)
    ranks.insert(entry.first);
  for (const auto& f : x->input.faults)
    ranks.insert(f.rank_id);
  for (const auto& entry : d.faults_set)
    ranks.insert(entry.first);
  result.fault_ranks = ranks.size();
  result.started_ms = flow.started_ms > 0 ? flow.started_ms : ev.time_ms;
  return result;
}

// Logs the end of a flow: info, or warn when it failed or fell back.
// `outcome` is how the step left the job's last outcome.
void log_flow_end(const std::string& job_id, const flow_end& f,
                  const std::string& outcome, int64_t now_ms) {
  auto has = [&](const char* word) {
    return outcome.find(word) != std::string::npos;
  };
  bool bad = has("fail") || has("fallback") || has("killed") || has("exit");
  auto level = bad ? spdlog::level::warn : spdlog::level::info;
  auto strategy = f.strategy.empty() ? std::string{"none"} : f.strategy;
  log_fields fields{job_id, f.uuid, to_string(flow_state::init)};
  SPDLOG_LOGGER_CALL(&logger(), level,
                     "job {} flow {} ended: outcome {}, strategy {}, {} fault "
                     "ranks, {} ms",
                     job_id, f.uuid, outcome, strategy, f.fault_ranks,
                     now_ms - f.started_ms);
}

} // namespace

// A flow uuid as the reference makes it: upper-case hex of the nanosecond
// clock, '-', 32 lower-case hex digits.
std::string new_uuid(self_ptr self) {
  if (self->state.cfg.uuid)
    return self->state.cfg.uuid();
  static constexpr char hex[] = "0123456789abcdef";
  static constexpr char upper_hex[] = "0123456789ABCDEF";
  auto ns = static_cast<uint64_t>(self->state.cfg.clock()) * 1'000'000
    + static_cast<uint64_t>(
              std::chrono::steady_clock::now().time_since_epoch().count()
              % 1'000'000);
  // The time in upper-case hex without leading zeros, then '-' and 32
  // random lower-case hex digits (built by hand: snprintf was a visible
  // part of a report's CPU).
  std::string result;
  result.reserve(16 + 1 + 32);
  int shift = 60;
  while (shift > 0 && ((ns >> shift) & 0xf) == 0)
    shift -= 4;
  for (; shift >= 0; shift -= 4)
    result.push_back(upper_hex[(ns >> shift) & 0xf]);
  result += '-';
  // One generator per worker thread, not per job (it is 2.5 KB).
  thread_local std::mt19937_64 rng{std::random_device{}()};
  for (int i = 0; i < 2; ++i) {
    auto x = rng();
    for (int j = 0; j < 16; ++j)
      result.push_back(hex[(x >> (j * 4)) & 0xf]);
  }
  return result;
}

namespace {

void after_events(self_ptr self, const std::vector<event>& evs);

} // namespace

void feed(job_self self, flow_input in, on_durable_fn on_ok,
          on_error_fn on_err) {
  auto& st = self->state;
  in.now_ms = std::max(in.now_ms, st.cfg.clock());
  in.fresh_uuid = new_uuid(self);
  auto d = decide(st.model, flow_cmd{std::move(in), st.cfg.waits});
  if (!d) {
    auto err = to_error(d.error());
    on_err(err);
    return;
  }
  commit(self, std::move(d->events), std::move(on_ok), std::move(on_err));
}

void feed_quietly(job_self self, flow_input in) {
  auto name = in.name;
  feed(
    self, std::move(in), [] {},
    [self, name](caf::error& err) {
      ES_WARN("job {} could not take {}: {}", self->state.model.spec.job_id,
              name, message_of(err));
    });
}

void feed_event(job_self self, flow_event name,
                std::vector<fault_rank> faults) {
  flow_input in;
  in.name = name;
  in.faults = std::move(faults);
  feed_quietly(self, std::move(in));
}

void arm_flow_timer(job_self self) {
  auto& st = self->state;
  const auto& rec = st.model.rec;
  if (rec.flow.deadline_ms <= 0)
    return;
  // Each timer is a message through the clock thread and back, and stays in
  // memory until it is due, even when its wait ended long before (a wait
  // for a report lasts 15 minutes): one due no later than this deadline
  // arms this one when it fires. So a job has a timer or two on their way,
  // not one per wait it went through.
  auto& due = st.timers_due;
  if (!due.empty()
      && *std::min_element(due.begin(), due.end()) <= rec.flow.deadline_ms)
    return;
  due.push_back(rec.flow.deadline_ms);
  auto delay
    = std::max<int64_t>(0, rec.flow.deadline_ms - self->state.cfg.clock());
  self->delayed_send(self, std::chrono::milliseconds(delay),
                     flowtimer_atom::value, rec.flow.deadline_ms,
                     rec.flow.deadline_event);
}

namespace {

// Pushes `payload` to the newest open worker stream of `ws`; false when
// there is none (the notify timeout then ends the wait).
template <class Sinks, class T>
bool push_to_worker(Sinks& ws, const T& payload) {
  drop_closed(ws);
  while (!ws.empty() && !ws.back()->push(payload))
    ws.pop_back();
  return !ws.empty();
}

bool is_worker_signal(const process_signal& sig) {
  return sig.signal_type == "SwitchRankList"
    || sig.signal_type == "StressTestRankParams";
}

// The worker messages are built from the running action, not stored: the
// outbox (or the awaited signal) holds only their marker.
switch_rank_list switch_list_of(const job_model& m) {
  return {m.rec.action.switch_ranks, m.rec.action.switch_ops, m.spec.job_id};
}

stress_rank_params stress_params_of(const job_model& m) {
  return {m.rec.action.stress_params, m.spec.job_id};
}

// The awaited signal if it is `type` (for a worker stream) or an agent
// signal (type empty), else null.
const process_signal* awaited_for(const job_state& st, const char* type) {
  const auto& awaited = st.model.rec.flow.awaited;
  if (!awaited || st.model.rec.flow.outbox)
    return nullptr;
  if (type == nullptr ? is_worker_signal(*awaited)
                      : awaited->signal_type != type)
    return nullptr;
  return &*awaited;
}

// The JSON log fields of a job's lines: the job, its running flow and the
// machine's state.
log_fields fields_of(const job_state& st) {
  const auto& flow = st.model.rec.flow;
  return {st.model.spec.job_id, flow.uuid, to_string(flow.state)};
}

} // namespace

void redeliver_awaited(job_self self, const signal_sink_ptr& sink) {
  auto& st = self->state;
  const auto* sig = awaited_for(st, nullptr);
  if (sig == nullptr || !sink->push(*sig))
    return;
  auto fields = fields_of(st);
  ES_INFO("job {} sent {} {} again to a new agent stream (uuid {})",
          st.model.spec.job_id, sig->signal_type, sig->change_strategy,
          sig->uuid);
}

void redeliver_awaited(job_self self, const switch_sink_ptr& sink) {
  auto& st = self->state;
  if (awaited_for(st, "SwitchRankList") != nullptr
      && sink->push(switch_list_of(st.model)))
    ES_INFO("job {} sent SwitchRankList again to a new worker",
            st.model.spec.job_id);
}

void redeliver_awaited(job_self self, const stress_sink_ptr& sink) {
  auto& st = self->state;
  if (awaited_for(st, "StressTestRankParams") != nullptr
      && sink->push(stress_params_of(st.model)))
    ES_INFO("job {} sent StressTestRankParams again to a new worker",
            st.model.spec.job_id);
}

void deliver_outbox(job_self self) {
  auto& st = self->state;
  if (!st.model.rec.flow.outbox)
    return;
  auto fields = fields_of(st);
  auto sig = *st.model.rec.flow.outbox;
  const auto& id = st.model.spec.job_id;
  if (is_worker_signal(sig)) {
    bool sent = sig.signal_type == "SwitchRankList"
      ? push_to_worker(st.switch_workers, switch_list_of(st.model))
      : push_to_worker(st.stress_workers, stress_params_of(st.model));
    if (!sent)
      return;
    ES_INFO("job {} sent {} to a worker", id, sig.signal_type);
    flow_input in;
    in.name = ev::notify_success;
    in.delivered = sig;
    feed_quietly(self, std::move(in));
    return;
  }
  if (!st.subscriber)
    return;
  if (!st.subscriber->push(sig)) {
    // The stream is gone: wait for a new subscriber or the notify timeout.
    st.subscriber = nullptr;
    st.live_generation = 0;
    return;
  }
  ES_INFO("job {} sent {} {} (uuid {})", st.model.spec.job_id, sig.signal_type,
          sig.change_strategy, sig.uuid);
  auto event = send_result_event(sig);
  if (event == ev::none)
    return;
  flow_input in;
  in.name = event;
  in.delivered = sig;
  feed_quietly(self, std::move(in));
}

namespace {

// Effects that follow from events just made durable and applied (their
// recovery state and spec already moved into the model).
void after_events(self_ptr self, const std::vector<event>& evs) {
  auto& st = self->state;
  auto fields = fields_of(st);
  bool notify_watchers = false;
  bool flow = false;
  bool job_changed = false;
  bool annotations_changed_now = false;
  for (const auto& ev : evs) {
    const auto& body = ev.body;
    if (const auto* x = std::get_if<flow_stepped>(&body)) {
      flow = true;
      // Annotation writes and state changes (the label moves with them).
      notify_watchers = notify_watchers || !x->annotations.empty()
        || !x->removed_annotations.empty() || x->path.size() > 1;
      for (const auto& sig : x->side_signals) {
        if (st.subscriber && st.subscriber->push(sig))
          ES_INFO("job {} sent {} {}", st.model.spec.job_id, sig.signal_type,
                  sig.extra_params);
        else
          ES_WARN("job {} has no agent stream for {}; not sent",
                  st.model.spec.job_id, sig.signal_type);
      }
      if (x->path.size() > 1)
        ES_INFO("job {} recovery {} -> {} on {}", st.model.spec.job_id,
                x->path.front(), x->path.back(), x->input.name);
      for (const auto& msg : x->om_messages) {
        ES_INFO("job {} tells the operator: {}", st.model.spec.job_id, msg);
        auto& ops = st.operators;
        ops.erase(std::remove_if(ops.begin(), ops.end(),
                                 [&](auto& o) {
                                   return !o->push({st.model.spec.job_id, msg});
                                 }),
                  ops.end());
      }
      if (x->om_final) {
        for (auto& o : st.operators)
          o->finish(caf::none);
        st.operators.clear();
      }
    }
    if (const auto* x = std::get_if<job_put>(&body))
      job_changed = job_changed || !x->created;
    annotations_changed_now = annotations_changed_now
      || std::holds_alternative<annotations_changed>(body);
  }
  for (const auto& ev : evs) {
    const auto& body = ev.body;
    if (std::holds_alternative<job_deleted>(body)) {
      close_streams(st, caf::none);
      return;
    }
    notify_watchers = notify_watchers || changes_annotations(body);
  }
  if (notify_watchers && !st.watchers.empty()) {
    auto view = to_annotations_view(st.model);
    auto& ws = st.watchers;
    ws.erase(std::remove_if(ws.begin(), ws.end(),
                            [&](auto& w) { return !w->push(view); }),
             ws.end());
  }
  const auto& rec = st.model.rec;
  if (flow) {
    arm_flow_timer(self);
    deliver_outbox(self);
  }
  if (!st.model.registered || rec.flow.state == st::init)
    return;
  // Pod changes and platform annotations are what some waits wait for.
  if (job_changed)
    feed_event(self, ev::job_changed);
  else if (annotations_changed_now)
    feed_event(self, ev::annotations_changed);
}

} // namespace

// Other messages wait (`await`) while the events are written, so the model
// they were decided on is still the current one when they are durable: they
// are applied to it in place then, moved, not copied.
void commit(job_self self, std::vector<event_body> bodies,
            on_durable_fn on_durable, on_error_fn on_error) {
  auto& st = self->state;
  if (bodies.empty()) {
    on_durable();
    return;
  }
  auto now = st.cfg.clock();
  std::vector<event> evs;
  evs.reserve(bodies.size());
  std::vector<log_record> records;
  records.reserve(bodies.size());
  auto seq = st.model.seq;
  for (auto& body : bodies) {
    evs.push_back({++seq, now, std::move(body), st.caller});
    records.push_back(
      {st.model.spec.job_id, seq, storage::encode_event(evs.back())});
  }
  std::vector<snapshot_record> snapshots;
  auto tail = st.tail;
  tail.events += evs.size();
  for (const auto& r : records)
    tail.bytes += r.bytes.size();
  if (snapshot_due(tail, st.cfg.snapshot_every)) {
    // The one copy of the model (its spec left out when the events keep
    // it), every so many events: the snapshot goes into the same write as
    // the events it follows.
    snapshots.push_back(
      {records.front().job_id, seq,
       storage::encode_snapshot_after(st.model, st.spec_bytes, evs)});
    tail = {0, 0, snapshots.back().bytes.size()};
  }
  auto count = evs.size();
  // What the events say about the job's nodes, for the fleet's node
  // registry, each against the model it was decided on. The first one now:
  // the model is that one, and what the decision read (the flow's faults,
  // the rank index) is still in the cache; the others once the ones before
  // them are applied. Sent only once the events are durable.
  std::vector<node_observation> seen;
  if (st.cfg.observe_nodes)
    seen = observe(st.model, evs.front());
  self
    ->request(st.journal, caf::infinite, append_atom::value, std::move(records),
              std::move(snapshots))
    .await(
      [self, tail, evs = std::move(evs), seen = std::move(seen),
       on_durable](uint64_t) mutable {
        auto& st = self->state;
        // `apply_to` takes a step's change and a spec out of their event;
        // `after_events` reads only what is left.
        for (auto& ev : evs) {
          ES_DEBUG("job {} appended {} #{}", st.model.spec.job_id,
                   kind_name(ev.body), ev.seq);
          if (st.cfg.observe_nodes && &ev != &evs.front()) {
            auto xs = observe(st.model, ev);
            std::move(xs.begin(), xs.end(), std::back_inserter(seen));
          }
          auto ended = ending_flow(st.model, ev);
          auto outcomes = st.model.rec.job.flows;
          auto time_ms = ev.time_ms;
          if (touches_spec(ev.body))
            st.spec_bytes.reset();
          apply_to(st.model, std::move(ev));
          if (ended) {
            const auto& job = st.model.rec.job;
            // A step that counted no flow left no outcome of its own.
            log_flow_end(st.model.spec.job_id, *ended,
                         job.flows != outcomes && !job.last_outcome.empty()
                           ? job.last_outcome
                           : std::string{"ended"},
                         time_ms);
          }
        }
        st.tail = tail;
        if (!seen.empty())
          st.cfg.observe_nodes(std::move(seen));
        after_events(self, evs);
        on_durable();
      },
      [self, count, on_error](caf::error& err) mutable {
        ES_WARN("job {} could not persist {} events: {}",
                self->state.model.spec.job_id, count, message_of(err));
        on_error(err);
      });
}

void push_keepalive(job_self self) {
  auto& st = self->state;
  process_signal sig;
  sig.uuid = st.model.rec.flow.uuid;
  sig.job_id = st.model.spec.job_id;
  sig.signal_type = "keep-alive";
  st.subscriber->push(sig);
}

void close_streams(job_state& st, const caf::error& reason) {
  if (st.subscriber)
    st.subscriber->finish(reason);
  st.subscriber = nullptr;
  st.live_generation = 0;
  auto end_all = [&](auto& sinks) {
    for (auto& s : sinks)
      s->finish(reason);
    sinks.clear();
  };
  end_all(st.watchers);
  end_all(st.switch_workers);
  end_all(st.stress_workers);
  end_all(st.operators);
}

} // namespace recoverd
