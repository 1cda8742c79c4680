#include "actors/job.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <random>

#include "actors/error.hpp"
#include "actors/job_inspect.hpp"
#include "actors/log.hpp"
#include "storage/event_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = job_actor::stateful_pointer<job_state>;

caf::error unknown(const job_model& m) {
  return make_error(errc::unknown_job,
                    "job " + m.spec.job_id + " is not known");
}

bool changes_annotations(const event_body& body) {
  return std::holds_alternative<annotations_changed>(body)
         || std::holds_alternative<job_registered>(body)
         || std::holds_alternative<job_put>(body);
}

void push_keepalive(self_ptr self) {
  auto& st = self->state;
  process_signal sig;
  sig.uuid = st.model.rec.flow.uuid;
  sig.job_id = st.model.spec.job_id;
  sig.signal_type = "keep-alive";
  st.subscriber->push(sig);
}

template <class OnDurable, class OnError>
void commit(self_ptr self, std::vector<event_body> bodies,
            OnDurable on_durable, OnError on_error);

// A flow uuid as the reference makes it: upper-case hex of the nanosecond
// clock, '-', 32 lower-case hex digits.
std::string new_uuid(self_ptr self) {
  static constexpr char hex[] = "0123456789abcdef";
  auto ns = static_cast<uint64_t>(self->state.cfg.clock()) * 1'000'000
            + static_cast<uint64_t>(
              std::chrono::steady_clock::now().time_since_epoch().count()
              % 1'000'000);
  char head[32];
  std::snprintf(head, sizeof(head), "%llX",
                static_cast<unsigned long long>(ns));
  std::string result = head;
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

// Runs one input through the recovery machine and commits the step.
template <class OnOk, class OnErr>
void feed(self_ptr self, flow_input in, OnOk on_ok, OnErr on_err) {
  auto& st = self->state;
  in.now_ms = std::max(in.now_ms, st.cfg.clock());
  in.fresh_uuid = new_uuid(self);
  auto d = decide(st.model, flow_cmd{std::move(in), st.cfg.waits});
  if (!d) {
    auto err = to_error(d.error());
    on_err(err);
    return;
  }
  commit(self, std::move(d->events), on_ok, on_err);
}

void feed_quietly(self_ptr self, flow_input in) {
  auto name = in.name;
  feed(
    self, std::move(in), [] {},
    [self, name](caf::error& err) {
      ES_WARN("job {} could not take {}: {}", self->state.model.spec.job_id,
              name, message_of(err));
    });
}

// Feeds the named input (with faults, if any), logging a refusal.
void feed_event(self_ptr self, flow_event name,
                std::vector<fault_rank> faults = {}) {
  flow_input in;
  in.name = name;
  in.faults = std::move(faults);
  feed_quietly(self, std::move(in));
}

void arm_flow_timer(self_ptr self) {
  const auto& rec = self->state.model.rec;
  if (rec.flow.deadline_ms <= 0)
    return;
  auto delay = std::max<int64_t>(0, rec.flow.deadline_ms - self->state.cfg.clock());
  self->delayed_send(self, std::chrono::milliseconds(delay),
                     flowtimer_atom::value, rec.flow.deadline_ms,
                     rec.flow.deadline_event);
}

// Pushes `payload` to the newest open worker stream of `ws`; false when
// there is none (the notify timeout then ends the wait).
template <class Sinks, class T>
bool push_to_worker(Sinks& ws, const T& payload) {
  ws.erase(std::remove_if(ws.begin(), ws.end(),
                          [](const auto& w) { return w->closed(); }),
           ws.end());
  while (!ws.empty() && !ws.back()->push(payload))
    ws.pop_back();
  return !ws.empty();
}

// Hands the pending signal to the agent stream (or, for the O&M lists, to
// the worker stream); its delivery is the next input of the machine.
void deliver_outbox(self_ptr self) {
  auto& st = self->state;
  if (!st.model.rec.flow.outbox)
    return;
  auto sig = *st.model.rec.flow.outbox;
  const auto& rec = st.model.rec;
  const auto& id = st.model.spec.job_id;
  bool to_worker = sig.signal_type == "SwitchRankList"
                   || sig.signal_type == "StressTestRankParams";
  if (to_worker) {
    bool sent
      = sig.signal_type == "SwitchRankList"
          ? push_to_worker(st.switch_workers,
                           switch_rank_list{rec.action.switch_ranks, rec.action.switch_ops, id})
          : push_to_worker(st.stress_workers,
                           stress_rank_params{rec.action.stress_params, id});
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

// Effects that follow from events just made durable and applied (their
// recovery state and spec already moved into the model).
void after_events(self_ptr self, const std::vector<event>& evs) {
  auto& st = self->state;
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
                        || !x->removed_annotations.empty()
                        || x->path.size() > 1;
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
                              || std::holds_alternative<annotations_changed>(
                                body);
  }
  for (const auto& ev : evs) {
    const auto& body = ev.body;
    if (std::holds_alternative<job_deleted>(body)) {
      if (st.subscriber)
        st.subscriber->finish(caf::none);
      st.subscriber = nullptr;
      st.live_generation = 0;
      for (auto& w : st.watchers)
        w->finish(caf::none);
      st.watchers.clear();
      for (auto& w : st.switch_workers)
        w->finish(caf::none);
      st.switch_workers.clear();
      for (auto& w : st.stress_workers)
        w->finish(caf::none);
      st.stress_workers.clear();
      for (auto& o : st.operators)
        o->finish(caf::none);
      st.operators.clear();
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

// Appends the events `bodies` through the journal; once durable, applies
// them and runs their effects, then `on_durable`. Other messages wait
// (`await`), so every decision sees the state its events will follow, and
// the model the events were decided on is still the current one when they
// are durable: they are applied to it in place then, moved, not copied.
template <class OnDurable, class OnError>
void commit(self_ptr self, std::vector<event_body> bodies,
            OnDurable on_durable, OnError on_error) {
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
    evs.push_back({++seq, now, std::move(body)});
    records.push_back(
      {st.model.spec.job_id, seq, storage::encode_event(evs.back())});
  }
  std::vector<snapshot_record> snapshots;
  auto since = st.events_since_snapshot + evs.size();
  if (st.cfg.snapshot_every > 0 && since >= st.cfg.snapshot_every) {
    // The one copy of the model, every `snapshot_every` events: the
    // snapshot goes into the same write as the events it follows.
    auto next = fold(st.model, evs);
    snapshots.push_back({records.front().job_id, next.seq,
                         storage::encode_snapshot(next)});
    since = 0;
  }
  auto count = evs.size();
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              std::move(records), std::move(snapshots))
    .await(
      [self, since, evs = std::move(evs), on_durable](uint64_t) mutable {
        auto& st = self->state;
        // `apply` takes the recovery state and the spec out of an event;
        // `after_events` reads only what is left.
        for (auto& ev : evs) {
          ES_DEBUG("job {} appended {} #{}", st.model.spec.job_id,
                   kind_name(ev.body), ev.seq);
          st.model = apply(std::move(st.model), std::move(ev));
        }
        st.events_since_snapshot = since;
        after_events(self, evs);
        on_durable();
      },
      [self, count, on_error](caf::error& err) mutable {
        ES_WARN("job {} could not persist {} events: {}",
                self->state.model.spec.job_id, count, message_of(err));
        on_error(err);
      });
}

// Answers a reply sink with a status or an error.
void answer(reply_sink<biz_status>& reply, const biz_status& x) {
  reply.deliver(x);
}

void answer(reply_sink<biz_status>& reply, const caf::error& err) {
  reply.fail(err);
}

// A Recover report (or ReportProcessFault): runs it through the machine and
// answers `respond` with the business status, or with an error, once.
template <class Respond>
void take_report(self_ptr self, flow_input in, Respond respond) {
  auto& st = self->state;
  const auto& id = st.model.spec.job_id;
  if (!st.model.exists || !st.model.registered) {
    respond(biz_status{400, "jobId=" + id + " not registed"});
    return;
  }
  auto kind = in.kind;
  if (kind == report_kind::process) {
    auto event = classify_process_fault(st.model.rec, st.model.spec,
                                        st.model.init, in.faults,
                                        st.model.ranks.get());
    if (!event) {
      respond(to_error(event.error()));
      return;
    }
    in.name = *event;
  } else {
    in.name = ev::receive_report;
  }
  if (kind == report_kind::stress)
    if (auto err = validate_stress_results(st.model.spec, in.stress_result,
                                           st.model.ranks.get())) {
      respond(to_error(err));
      return;
    }
  // The answer names the flow the report was for, even when it ends it. A
  // refused report changed nothing: the state it names is the current one.
  auto uuid = st.model.rec.flow.uuid;
  feed(
    self, std::move(in),
    [self, kind, uuid, respond]() mutable {
      if (kind == report_kind::process)
        respond(biz_status{0, "receive ReportProcessFault"});
      else if (kind == report_kind::switch_nic || kind == report_kind::stress)
        respond(biz_status{0, "reply success"});
      else
        respond(biz_status{0, "jobId=" + self->state.model.spec.job_id
                                + ", uuid=" + uuid + ", receive "
                                + rpc_name(kind)});
    },
    [self, kind, uuid, respond](caf::error& err) mutable {
      const auto& m = self->state.model;
      if (errc_of(err) == errc::unexpected_report)
        respond(biz_status{401, "jobId=" + m.spec.job_id + ", uuid=" + uuid
                                  + ", " + rpc_name(kind)
                                  + " is not expected in state "
                                  + to_string(m.rec.flow.state)});
      else
        respond(err);
    });
}

// Decides `cmd`, commits its events, then replies through `rp` with
// `reply()` evaluated after the events are applied, then runs `after()`.
template <class T, class Reply, class After>
caf::result<T> handle(self_ptr self, command cmd, Reply reply, After after) {
  auto d = decide(self->state.model, cmd);
  if (!d)
    return to_error(d.error());
  auto rp = self->make_response_promise<T>();
  auto status = d->status;
  commit(
    self, std::move(d->events),
    [=]() mutable {
      rp.deliver(reply(status));
      after();
    },
    [=](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

template <class T, class Reply>
caf::result<T> handle(self_ptr self, command cmd, Reply reply) {
  return handle<T>(self, std::move(cmd), std::move(reply), [] {});
}

// Starts an operator action: validation and start are one step of this
// actor, so no other request can slip in between (reference §15.7).
template <class Validate>
caf::result<biz_status> start_om(self_ptr self, flow_input in, Validate validate) {
  auto& st = self->state;
  if (!st.model.exists)
    return biz_status{413, "job:" + st.model.spec.job_id + " not exist"};
  auto verdict = validate(st, in);
  if (verdict.code != 0)
    return verdict;
  auto rp = self->make_response_promise<biz_status>();
  feed(
    self, std::move(in), [=]() mutable { rp.deliver(verdict); },
    [=](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

// A worker stream (SubscribeNotifySwitch / SubscribeNotifyExecStressTest)
// joins; a list waiting for one goes out at once.
template <class Sinks, class Sink>
caf::result<ok_atom> add_worker(self_ptr self, Sinks& sinks, Sink sink) {
  const auto& m = self->state.model;
  if (!m.exists || !m.registered)
    return make_error(errc::not_registered,
                      "jobId=" + m.spec.job_id
                        + " not registed, please wait agent register");
  sinks.push_back(std::move(sink));
  deliver_outbox(self);
  return ok_atom::value;
}

void arm_keepalive(self_ptr self) {
  self->delayed_send(self, self->state.cfg.waits.keepalive,
                     keepalive_atom::value, self->state.live_generation);
}

} // namespace

job_actor::behavior_type job(job_actor::stateful_pointer<job_state> self,
                             job_model initial, uint64_t since_snapshot,
                             job_config cfg,
                             journal_actor journal, caf::actor_addr parent) {
  if (auto err = validate(cfg)) {
    self->quit(err);
    return job_actor::behavior_type::make_empty_behavior();
  }
  self->state.model = std::move(initial);
  self->state.events_since_snapshot = since_snapshot;
  self->state.cfg = std::move(cfg);
  self->state.journal = std::move(journal);
  // A job does not outlive its registry: pending timers would otherwise
  // keep it alive at shutdown.
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  if (parent)
    self->monitor(parent);
  // Resume: re-arm the wait of a flow that was running (past deadlines fire
  // at once); a pending signal goes out when the agent subscribes.
  arm_flow_timer(self);
  return {
    [=](put_atom, job_spec& spec) -> caf::result<put_result> {
      bool created = !self->state.model.exists;
      return handle<put_result>(self, put_cmd{std::move(spec)},
                                [=](const biz_status&) {
                                  const auto& st = self->state;
                                  return put_result{
                                    created,
                                    to_status(st.model,
                                              st.subscriber != nullptr)};
                                });
    },
    [=](delete_atom) -> caf::result<uint64_t> {
      auto& st = self->state;
      if (!st.model.exists)
        return unknown(st.model);
      return handle<uint64_t>(self, delete_cmd{st.live_generation},
                              [=](const biz_status&) {
                                return self->state.model.seq;
                              });
    },
    [=](get_atom) -> caf::result<job_status> {
      const auto& st = self->state;
      if (!st.model.exists)
        return unknown(st.model);
      return to_status(st.model, st.subscriber != nullptr);
    },
    [=](get_atom, summary_atom) -> caf::result<job_summary> {
      const auto& st = self->state;
      if (!st.model.exists)
        return unknown(st.model);
      return to_summary(st.model, st.subscriber != nullptr);
    },
    [=](get_atom, inspect_atom) -> caf::result<job_inspection> {
      if (!self->state.model.exists)
        return unknown(self->state.model);
      return inspect_job(self->state);
    },
    [=](annotate_atom, string_map& set, std::vector<std::string>& remove,
        std::string& by) -> caf::result<annotations_view> {
      if (!self->state.model.exists)
        return unknown(self->state.model);
      return handle<annotations_view>(
        self, annotate_cmd{std::move(set), std::move(remove), std::move(by)},
        [=](const biz_status&) {
          return to_annotations_view(self->state.model);
        });
    },
    [=](get_atom, annots_atom) -> caf::result<annotations_view> {
      if (!self->state.model.exists)
        return unknown(self->state.model);
      return to_annotations_view(self->state.model);
    },
    [=](watch_atom, annotations_sink_ptr& sink) -> caf::result<ok_atom> {
      auto& st = self->state;
      if (!st.model.exists)
        return unknown(st.model);
      if (sink->push(to_annotations_view(st.model)))
        st.watchers.push_back(std::move(sink));
      return ok_atom::value;
    },
    [=](faults_atom, job_device_faults& faults) -> caf::result<ok_atom> {
      auto& st = self->state;
      if (!st.model.exists)
        return unknown(st.model);
      auto before = st.model.device_faults;
      return handle<ok_atom>(
        self, faults_cmd{std::move(faults)},
        [](const biz_status&) { return ok_atom::value; },
        [=] {
          const auto& m = self->state.model;
          if (!m.registered)
            return;
          // Reference §4.1: new faults start, join or pre-empt a flow.
          auto [name, fresh] = fault_center_input(m.rec, m.spec, m.init,
                                                  before, m.device_faults,
                                                  m.health_state);
          if (name != ev::none)
            feed_event(self, name, fresh);
        });
    },
    [=](init_atom, client_info& client) -> caf::result<biz_status> {
      if (!self->state.model.exists)
        return biz_status{502, "job(uid=" + client.job_id + ") is not known"};
      return handle<biz_status>(self, init_cmd{std::move(client)},
                                [](const biz_status& s) { return s; });
    },
    [=](register_atom, client_info& client,
        bool cap_reached) -> caf::result<biz_status> {
      if (!self->state.model.exists)
        return biz_status{402, "jobId=" + client.job_id
                                 + " not exist, reuse registry"};
      return handle<biz_status>(self,
                                register_cmd{std::move(client), cap_reached},
                                [](const biz_status& s) { return s; });
    },
    [=](subscribe_atom, client_info& client,
        signal_sink_ptr& sink) -> caf::result<ok_atom> {
      auto& st = self->state;
      if (!st.model.exists)
        return make_error(errc::not_registered,
                          "jobId=" + client.job_id + " not registed");
      auto d = decide(st.model, subscribe_cmd{client, st.live_generation});
      if (!d)
        return to_error(d.error());
      auto rp = self->make_response_promise<ok_atom>();
      commit(
        self, std::move(d->events),
        [=]() mutable {
          auto& st = self->state;
          // Design §4.1: the new stream takes over; the old one ends OK.
          if (st.subscriber)
            st.subscriber->finish(caf::none);
          st.subscriber = sink;
          st.live_generation = st.model.subscriber_generation;
          auto generation = st.live_generation;
          auto addr = self->address();
          sink->on_close([addr, generation] {
            if (auto hdl = caf::actor_cast<caf::actor>(addr))
              caf::anon_send(hdl, detach_atom::value, generation);
          });
          ES_INFO("job {} subscribed by {} at {} (generation {})",
                  st.model.spec.job_id, client.role, client.peer, generation);
          arm_keepalive(self);
          rp.deliver(ok_atom::value);
          // Design §4.1: a pending signal goes to the new subscriber with
          // its original uuid.
          deliver_outbox(self);
        },
        [=](caf::error& err) mutable {
          sink->finish(err);
          rp.deliver(err);
        });
      return rp;
    },
    [=](report_atom, flow_input& in) -> caf::result<biz_status> {
      auto rp = self->make_response_promise<biz_status>();
      take_report(self, std::move(in), [rp](auto&& x) mutable {
        rp.deliver(std::forward<decltype(x)>(x));
      });
      return rp;
    },
    [=](report_atom, flow_input& in, report_reply_ptr& reply) {
      take_report(self, std::move(in),
                  [reply](auto&& x) { answer(*reply, x); });
    },
    [=](switch_atom, std::vector<nic_op>& ops,
        std::string& who) -> caf::result<biz_status> {
      flow_input in;
      in.name = ev::start_switch_nic;
      in.who = who;
      return start_om(self, std::move(in), [&](const job_state& st, flow_input& x) {
        return validate_switch(st.model.rec, st.model.spec, st.model.registered,
                               st.subscriber != nullptr, ops, x.switch_ranks,
                               x.switch_ops);
      });
    },
    [=](stress_atom, stress_request& req,
        std::string& who) -> caf::result<biz_status> {
      flow_input in;
      in.name = ev::start_stress_test;
      in.who = who;
      return start_om(self, std::move(in), [&](const job_state& st, flow_input& x) {
        return validate_stress(st.model.rec, st.model.spec, st.model.registered,
                               st.subscriber != nullptr, req, x.stress_params);
      });
    },
    [=](worker_atom, switch_sink_ptr& sink) -> caf::result<ok_atom> {
      return add_worker(self, self->state.switch_workers, std::move(sink));
    },
    [=](worker_atom, stress_sink_ptr& sink) -> caf::result<ok_atom> {
      return add_worker(self, self->state.stress_workers, std::move(sink));
    },
    [=](om_atom, om_kind kind, om_sink_ptr& sink) -> caf::result<ok_atom> {
      auto& st = self->state;
      const auto& id = st.model.spec.job_id;
      if (!st.model.exists || !st.model.registered)
        return make_error(errc::not_registered, "jobId=" + id + " not registed");
      const auto& rec = st.model.rec;
      bool running = rec.action.kind == kind;
      bool last = rec.job.om_last_kind == kind && !rec.job.om_last_message.empty();
      if (!running && !last)
        return make_error(errc::not_registered,
                          kind == om_kind::stress ? "jobId=" + id + " is not stress test"
                                           : "jobId=" + id + " is not swtiching nic");
      // A late operator gets the outcome of the last action of this kind.
      if (last)
        sink->push({id, rec.job.om_last_message});
      if (!running || rec.job.om_done)
        sink->finish(caf::none);
      else
        st.operators.push_back(std::move(sink));
      return ok_atom::value;
    },
    [=](nodeclear_atom, std::string& node,
        std::string& who) -> caf::result<std::string> {
      auto& st = self->state;
      if (!st.model.exists || st.model.rec.job.unhealthy_nodes.count(node) == 0)
        return std::string{};
      flow_input in;
      in.name = ev::node_health_cleared;
      in.node = node;
      in.who = who;
      auto rp = self->make_response_promise<std::string>();
      feed(
        self, std::move(in),
        [=]() mutable { rp.deliver(self->state.model.spec.job_id); },
        [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](flowtimer_atom, int64_t deadline, flow_event event) {
      const auto& rec = self->state.model.rec;
      // A timer of a wait that is over is stale.
      if (rec.flow.deadline_ms != deadline || rec.flow.deadline_event != event)
        return;
      flow_input in;
      in.name = event;
      in.now_ms = deadline;
      feed_quietly(self, std::move(in));
    },
    [=](shutdown_atom) {
      auto& st = self->state;
      if (st.subscriber)
        st.subscriber->finish(
          make_error(errc::shutting_down, "recoverd is shutting down"));
      st.subscriber = nullptr;
      st.live_generation = 0;
      auto bye = make_error(errc::shutting_down, "recoverd is shutting down");
      for (auto& w : st.watchers)
        w->finish(bye);
      st.watchers.clear();
      for (auto& w : st.switch_workers)
        w->finish(bye);
      st.switch_workers.clear();
      for (auto& w : st.stress_workers)
        w->finish(bye);
      st.stress_workers.clear();
      for (auto& o : st.operators)
        o->finish(bye);
      st.operators.clear();
      return ok_atom::value;
    },
    [=](keepalive_atom, uint64_t generation) {
      auto& st = self->state;
      // A timer of an older subscription is stale.
      if (generation != st.live_generation || !st.subscriber)
        return;
      push_keepalive(self);
      arm_keepalive(self);
    },
    [=](detach_atom, uint64_t generation) {
      auto& st = self->state;
      if (generation == 0 || generation != st.live_generation)
        return;
      auto d = decide(st.model,
                      detach_cmd{generation, st.live_generation, "cancelled"});
      st.subscriber = nullptr;
      st.live_generation = 0;
      ES_INFO("job {} lost its agent stream (generation {})",
              st.model.spec.job_id, generation);
      if (d)
        commit(self, std::move(d->events), [] {}, [](caf::error&) {});
    },
  };
}

} // namespace recoverd
