#include "actors/job.hpp"

#include "actors/job_effects.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <random>

#include "actors/error.hpp"
#include "actors/job_inspect.hpp"
#include "actors/log.hpp"
#include "actors/model/validate.hpp"
#include "storage/event_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = job_self;

caf::error unknown(const job_model& m) {
  return make_error(errc::unknown_job,
                    "job " + m.spec.job_id + " is not known");
}

// Answers a reply sink with a value or an error.
template <class T>
void answer(reply_sink<T>& reply, const T& x) {
  reply.deliver(x);
}

template <class T>
void answer(reply_sink<T>& reply, const caf::error& err) {
  reply.fail(err);
}

// A `respond` function that delivers through the response promise `rp`.
template <class T>
auto to_promise(caf::typed_response_promise<T> rp) {
  return [rp](auto&& x) mutable { rp.deliver(std::forward<decltype(x)>(x)); };
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
  if (auto err = validate_report(st.model.spec, in, st.model.ranks.get())) {
    respond(to_error(err));
    return;
  }
  // The reference ignores ReportStopComplete's faultRanks; checked, they
  // need not be recorded.
  if (kind == report_kind::stop)
    in.faults.clear();
  if (kind == report_kind::process) {
    auto event
      = classify_process_fault(st.model.rec, st.model.spec, st.model.init,
                               in.faults, st.model.ranks.get());
    if (!event) {
      respond(to_error(event.error()));
      return;
    }
    in.name = *event;
  } else {
    in.name = ev::receive_report;
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
        respond(biz_status{0,
                           "jobId=" + self->state.model.spec.job_id + ", uuid="
                             + uuid + ", receive " + rpc_name(kind)});
    },
    [self, kind, uuid, respond](caf::error& err) mutable {
      const auto& m = self->state.model;
      if (errc_of(err) == errc::unexpected_report)
        respond(biz_status{401,
                           "jobId=" + m.spec.job_id + ", uuid=" + uuid + ", "
                             + rpc_name(kind) + " is not expected in state "
                             + to_string(m.rec.flow.state)});
      else
        respond(err);
    });
}

// Decides `cmd`, commits its events, then answers `respond` once: with
// `reply(decision)` (its events moved out) evaluated after the events are
// applied, or with the error that refused or lost them.
template <class Reply, class Respond>
void handle_then(self_ptr self, command cmd, Reply reply, Respond respond) {
  auto d = decide(self->state.model, cmd);
  if (!d) {
    respond(to_error(d.error()));
    return;
  }
  auto events = std::move(d->events);
  d->events.clear();
  commit(
    self, std::move(events),
    [=, done = std::move(*d)]() mutable { respond(reply(done)); },
    [=](caf::error& err) mutable { respond(err); });
}

// `handle_then`, answered with a response message.
template <class T, class Reply>
caf::result<T> handle(self_ptr self, command cmd, Reply reply) {
  auto rp = self->make_response_promise<T>();
  handle_then(self, std::move(cmd), std::move(reply), to_promise(rp));
  return rp;
}

// ReportDeviceFaults for this job: answers `respond` with the entries it
// skipped once the snapshot (and the flow step it causes) is durable.
template <class Respond>
void take_faults(self_ptr self, job_device_faults faults, Respond respond) {
  auto& st = self->state;
  if (!st.model.exists) {
    respond(unknown(st.model));
    return;
  }
  st.caller = faults.by;
  // The snapshot and the flow step it causes are one append: a fault storm
  // costs each job one durable write before its stopTrain.
  faults_cmd cmd{std::move(faults), flow_input{}, st.cfg.waits};
  cmd.then->now_ms = st.cfg.clock();
  cmd.then->fresh_uuid = new_uuid(self);
  handle_then(
    self, std::move(cmd),
    [](const decision& d) { return device_faults_outcome{d.ignored}; },
    std::move(respond));
}

// PutJob by `by`.
caf::result<put_result> put_job(self_ptr self, job_spec spec, std::string by) {
  bool created = !self->state.model.exists;
  self->state.caller = std::move(by);
  return handle<put_result>(
    self, put_cmd{std::move(spec)}, [=](const decision&) {
      const auto& st = self->state;
      return put_result{created, to_status(st.model, st.subscriber != nullptr)};
    });
}

// SetAnnotations.
caf::result<annotations_view> annotate(self_ptr self, annotate_cmd cmd) {
  if (!self->state.model.exists)
    return unknown(self->state.model);
  self->state.caller = cmd.by;
  return handle<annotations_view>(self, std::move(cmd), [=](const decision&) {
    return to_annotations_view(self->state.model);
  });
}

// DeleteJob by `by`.
caf::result<uint64_t> remove_job(self_ptr self, std::string by) {
  auto& st = self->state;
  if (!st.model.exists)
    return unknown(st.model);
  st.caller = std::move(by);
  return handle<uint64_t>(
    self, delete_cmd{st.live_generation},
    [=](const decision&) { return self->state.model.seq; });
}

// Starts an operator action: validation and start are one step of this
// actor, so no other request can slip in between (reference §15.7).
template <class Validate>
caf::result<biz_status> start_om(self_ptr self, flow_input in,
                                 Validate validate) {
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
  sinks.push_back(sink);
  deliver_outbox(self);
  // A list delivered before (to a worker that may be gone) goes again.
  redeliver_awaited(self, sink);
  return ok_atom::value;
}

void arm_keepalive(self_ptr self) {
  self->delayed_send(self, self->state.cfg.waits.keepalive,
                     keepalive_atom::value, self->state.live_generation);
}

// An agent stream subscribes: recorded, it takes over from the previous
// one, and the pending signal goes to it.
caf::result<ok_atom> attach_subscriber(self_ptr self, client_info client,
                                       signal_sink_ptr sink) {
  auto& st = self->state;
  if (!st.model.exists)
    return make_error(errc::not_registered,
                      "jobId=" + client.job_id + " not registed");
  auto d = decide(st.model, subscribe_cmd{client, st.live_generation});
  if (!d)
    return to_error(d.error());
  st.caller = client.identity;
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
      // its original uuid, and so does one delivered before whose answer
      // the current wait still waits for.
      deliver_outbox(self);
      redeliver_awaited(self, sink);
    },
    [=](caf::error& err) mutable {
      sink->finish(err);
      rp.deliver(err);
    });
  return rp;
}

// An operator stream (the O&M RPCs) follows the running action of `kind`,
// or gets the outcome of the last one.
caf::result<ok_atom> attach_operator(self_ptr self, om_kind kind,
                                     om_sink_ptr sink) {
  auto& st = self->state;
  const auto& id = st.model.spec.job_id;
  if (!st.model.exists || !st.model.registered)
    return make_error(errc::not_registered, "jobId=" + id + " not registed");
  const auto& rec = st.model.rec;
  bool running = rec.action.kind == kind;
  bool last = rec.job.om_last_kind == kind && !rec.job.om_last_message.empty();
  if (!running && !last)
    return make_error(errc::not_registered,
                      kind == om_kind::stress
                        ? "jobId=" + id + " is not stress test"
                        : "jobId=" + id + " is not swtiching nic");
  // A late operator gets the outcome of the last action of this kind.
  if (last)
    sink->push({id, rec.job.om_last_message});
  if (!running || rec.job.om_done) {
    sink->finish(caf::none);
  } else {
    drop_closed(st.operators);
    st.operators.push_back(std::move(sink));
  }
  return ok_atom::value;
}

} // namespace

job_actor::behavior_type job(job_actor::stateful_pointer<job_state> self,
                             job_model initial, snapshot_tail tail,
                             job_config cfg, journal_actor journal,
                             caf::actor_addr parent) {
  if (auto err = validate(cfg)) {
    self->quit(err);
    return job_actor::behavior_type::make_empty_behavior();
  }
  self->state.model = std::move(initial);
  // A model decoded from a snapshot comes without its rank index.
  if (self->state.model.exists && !self->state.model.ranks)
    self->state.model.ranks = make_rank_index(self->state.model.spec);
  self->state.tail = tail;
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
      return put_job(self, std::move(spec), {});
    },
    [=](put_atom, job_spec& spec, std::string& by) -> caf::result<put_result> {
      return put_job(self, std::move(spec), std::move(by));
    },
    [=](delete_atom) -> caf::result<uint64_t> {
      return remove_job(self, {});
    },
    [=](delete_atom, std::string& by) -> caf::result<uint64_t> {
      return remove_job(self, std::move(by));
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
    [=](get_atom, digest_atom) -> digest_record {
      auto x = storage::digest_record_of(self->state.model);
      return x ? std::move(*x) : digest_record{};
    },
    [=](status_atom, status_verbosity v) {
      return job_status_of(self->state, v);
    },
    [=](get_atom, inspect_atom) -> caf::result<job_inspection> {
      if (!self->state.model.exists)
        return unknown(self->state.model);
      return inspect_job(self->state);
    },
    [=](annotate_atom, string_map& set, std::vector<std::string>& remove,
        std::string& by) -> caf::result<annotations_view> {
      return annotate(self, {std::move(set), std::move(remove), std::move(by)});
    },
    [=](annotate_atom, string_map& set, std::vector<std::string>& remove,
        std::string& by, uint64_t expected_seq) -> caf::result<annotations_view> {
      return annotate(self, {std::move(set), std::move(remove), std::move(by),
                             expected_seq});
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
      drop_closed(st.watchers);
      if (sink->push(to_annotations_view(st.model)))
        st.watchers.push_back(std::move(sink));
      return ok_atom::value;
    },
    [=](faults_atom,
        job_device_faults& faults) -> caf::result<device_faults_outcome> {
      auto rp = self->make_response_promise<device_faults_outcome>();
      take_faults(self, std::move(faults), to_promise(rp));
      return rp;
    },
    [=](faults_atom, job_device_faults& faults, faults_reply_ptr& reply) {
      take_faults(self, std::move(faults),
                  [reply](auto&& x) { answer(*reply, x); });
    },
    [=](init_atom, client_info& client) -> caf::result<biz_status> {
      if (!self->state.model.exists)
        return biz_status{502, "job(uid=" + client.job_id + ") is not known"};
      self->state.caller = client.identity;
      return handle<biz_status>(self, init_cmd{std::move(client)},
                                [](const decision& d) { return d.status; });
    },
    [=](register_atom, client_info& client,
        bool cap_reached) -> caf::result<biz_status> {
      if (!self->state.model.exists)
        return biz_status{
          402, "jobId=" + client.job_id + " not exist, reuse registry"};
      self->state.caller = client.identity;
      return handle<biz_status>(self,
                                register_cmd{std::move(client), cap_reached},
                                [](const decision& d) { return d.status; });
    },
    [=](subscribe_atom, client_info& client,
        signal_sink_ptr& sink) -> caf::result<ok_atom> {
      return attach_subscriber(self, std::move(client), std::move(sink));
    },
    [=](report_atom, flow_input& in) -> caf::result<biz_status> {
      self->state.caller = in.by;
      auto rp = self->make_response_promise<biz_status>();
      take_report(self, std::move(in), to_promise(rp));
      return rp;
    },
    [=](report_atom, flow_input& in, report_reply_ptr& reply) {
      self->state.caller = in.by;
      take_report(self, std::move(in),
                  [reply](auto&& x) { answer(*reply, x); });
    },
    [=](switch_atom, std::vector<nic_op>& ops,
        std::string& who) -> caf::result<biz_status> {
      flow_input in;
      in.name = ev::start_switch_nic;
      in.who = who;
      self->state.caller = who;
      return start_om(
        self, std::move(in), [&](const job_state& st, flow_input& x) {
          return validate_switch(st.model.rec, st.model.spec,
                                 st.model.registered, st.subscriber != nullptr,
                                 ops, x.switch_ranks, x.switch_ops);
        });
    },
    [=](stress_atom, stress_request& req,
        std::string& who) -> caf::result<biz_status> {
      flow_input in;
      in.name = ev::start_stress_test;
      in.who = who;
      self->state.caller = who;
      return start_om(
        self, std::move(in), [&](const job_state& st, flow_input& x) {
          return validate_stress(st.model.rec, st.model.spec,
                                 st.model.registered, st.subscriber != nullptr,
                                 req, x.stress_params);
        });
    },
    [=](worker_atom, switch_sink_ptr& sink) -> caf::result<ok_atom> {
      return add_worker(self, self->state.switch_workers, std::move(sink));
    },
    [=](worker_atom, stress_sink_ptr& sink) -> caf::result<ok_atom> {
      return add_worker(self, self->state.stress_workers, std::move(sink));
    },
    [=](om_atom, om_kind kind, om_sink_ptr& sink) -> caf::result<ok_atom> {
      return attach_operator(self, kind, std::move(sink));
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
      st.caller = who;
      auto rp = self->make_response_promise<std::string>();
      feed(
        self, std::move(in),
        [=]() mutable { rp.deliver(self->state.model.spec.job_id); },
        [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](flowtimer_atom, int64_t deadline, flow_event event) {
      auto& st = self->state;
      auto& due = st.timers_due;
      if (auto i = std::find(due.begin(), due.end(), deadline); i != due.end())
        due.erase(i);
      const auto& rec = st.model.rec;
      // A timer of a wait that is over arms the current wait's, which did
      // not arm one while this was on its way.
      if (rec.flow.deadline_ms != deadline
          || rec.flow.deadline_event != event) {
        arm_flow_timer(self);
        return;
      }
      flow_input in;
      in.name = event;
      in.now_ms = deadline;
      self->state.caller.clear();
      feed_quietly(self, std::move(in));
    },
    [=](shutdown_atom) {
      close_streams(
        self->state,
        make_error(errc::shutting_down, "recoverd is shutting down"));
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
      st.caller.clear();
      auto d = decide(st.model,
                      detach_cmd{generation, st.live_generation, "cancelled"});
      st.subscriber = nullptr;
      st.live_generation = 0;
      ES_INFO("job {} lost its agent stream (generation {})",
              st.model.spec.job_id, generation);
      if (d)
        commit(
          self, std::move(d->events), [] {}, [](caf::error&) {});
    },
  };
}

} // namespace recoverd
