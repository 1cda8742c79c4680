#pragma once

/// What a job actor does besides deciding: commit events (append through the
/// journal, then apply them in place), the effects of events made durable
/// (signals to the agent, operator messages, annotation watchers, timers),
/// delivery of the pending signal, and closing the job's streams. Internal
/// to the job actor (`actors/job.cpp`).

#include <algorithm>
#include <functional>
#include <vector>

#include <caf/error.hpp>

#include "actors/job.hpp"

namespace recoverd {

/// The job actor's self pointer.
using job_self = job_actor::stateful_pointer<job_state>;

/// Runs once the events are durable and applied.
using on_durable_fn = std::function<void()>;

/// Runs when the events could not be made durable (nothing changed).
using on_error_fn = std::function<void(caf::error&)>;

/// Appends `bodies` through the journal; once durable, applies them to the
/// model in place and runs their effects, then `on_durable`. Other messages
/// wait meanwhile, so every decision sees the state its events follow.
void commit(job_self self, std::vector<event_body> bodies,
            on_durable_fn on_durable, on_error_fn on_error);

/// A fresh flow uuid (the configured generator, else the reference's form).
std::string new_uuid(job_self self);

/// Runs one input of the recovery machine (stamped with the time and a
/// fresh uuid) and commits its step.
void feed(job_self self, flow_input in, on_durable_fn on_ok,
          on_error_fn on_err);

/// `feed`, logging a refusal.
void feed_quietly(job_self self, flow_input in);

/// Feeds the named input (with faults, if any), logging a refusal.
void feed_event(job_self self, flow_event name,
                std::vector<fault_rank> faults = {});

/// Arms the timer of the current wait, if any and not armed yet (past
/// deadlines fire at once).
void arm_flow_timer(job_self self);

/// Hands the pending signal to the agent stream (or, for the O&M lists, to
/// the newest worker stream); its delivery is the next input.
void deliver_outbox(job_self self);

/// Gives a new agent stream the signal the current wait waits on, with its
/// original uuid (design §4.1): it was delivered before, but the agent may
/// have lost it, or lost the report that answered it, while recoverd was
/// down. Not an input of the machine: the wait and its deadline go on.
void redeliver_awaited(job_self self, const signal_sink_ptr& sink);

/// Gives a new SubscribeNotifySwitch stream the SwitchRankList the current
/// wait waits on, rebuilt from the running action.
void redeliver_awaited(job_self self, const switch_sink_ptr& sink);

/// Gives a new SubscribeNotifyExecStressTest stream the
/// StressTestRankParams the current wait waits on, rebuilt from the running
/// action.
void redeliver_awaited(job_self self, const stress_sink_ptr& sink);

/// Sends a keep-alive to the agent stream.
void push_keepalive(job_self self);

/// Ends every stream of the job with `reason` (none: OK): the agent
/// stream, annotation watchers, worker and operator streams.
void close_streams(job_state& st, const caf::error& reason);

/// Forgets the sinks whose streams have ended, so that streams opened and
/// cancelled between two changes of the job do not pile up.
template <class Sinks>
void drop_closed(Sinks& sinks) {
  sinks.erase(std::remove_if(sinks.begin(), sinks.end(),
                             [](const auto& x) { return x->closed(); }),
              sinks.end());
}

} // namespace recoverd
