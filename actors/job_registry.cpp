#include "actors/job_registry.hpp"

#include <algorithm>
#include <memory>

#include <caf/typed_event_based_actor.hpp>

#include "actors/error.hpp"
#include "actors/job.hpp"
#include "actors/job_directory.hpp"
#include "actors/log.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"

namespace recoverd {

namespace {

using self_ptr = job_registry_actor::stateful_pointer<job_registry_state>;

// How long the registry waits for a job during a fan-out.
constexpr auto fan_out_timeout = std::chrono::seconds(30);

// How long the registry waits for a job's status: shorter than the
// inspector's wait for the registry, so that a stuck job is reported as such
// instead of hiding the registry's answer.
constexpr auto job_status_timeout = std::chrono::seconds(2);

caf::error unknown_job(const std::string& id) {
  return make_error(errc::unknown_job, "job " + id + " is not known");
}

job_actor spawn_job(self_ptr self, job_model initial,
                    snapshot_tail tail = {}) {
  auto id = initial.spec.job_id;
  auto hdl = self->spawn(job, std::move(initial), tail,
                         self->state.cfg.job,
                         self->state.journal, self->address());
  if (self->state.directory)
    self->state.directory->put(id, hdl);
  self->state.jobs.emplace(std::move(id), hdl);
  return hdl;
}

// Gives the dormant job `id` its actor, replayed from the log; null when it
// is not dormant or cannot be replayed (then it stays dormant and says why
// in the log and the registry's status).
const job_actor* wake(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto d = st.dormant.find(id);
  if (d == st.dormant.end() || st.log == nullptr)
    return nullptr;
  auto replayed = storage::replay_job(*st.log, id);
  if (!replayed || !replayed->state.exists) {
    // Damage a start-up replaying the job would have refused to start on.
    auto why = replayed ? std::string{"its log ends deleted"}
                        : message_of(replayed.error());
    if (st.unreplayable.emplace(id, why).second)
      ES_ERROR("job_registry cannot replay the dormant job {}, its requests "
               "are refused until the log is repaired: {}",
               id, why);
    return nullptr;
  }
  st.dormant.erase(d);
  st.unreplayable.erase(id); // repaired meanwhile
  spawn_job(self, std::move(replayed->state), replayed->tail);
  return &st.jobs.find(id)->second;
}

// The actor of the live job `id` (woken if dormant), or null.
const job_actor* find(self_ptr self, const std::string& id) {
  auto i = self->state.jobs.find(id);
  return i != self->state.jobs.end() ? &i->second : wake(self, id);
}

// Wakes every dormant job `pred` holds true of (by its digest).
template <class Pred>
void wake_all(self_ptr self, Pred pred) {
  std::vector<std::string> ids;
  for (const auto& [id, d] : self->state.dormant)
    if (pred(d))
      ids.push_back(id);
  for (const auto& id : ids)
    wake(self, id);
}

// Live jobs, dormant or not (counted against the cap).
size_t live_jobs(const job_registry_state& st) {
  return st.jobs.size() + st.dormant.size();
}

// Forgets the job `id` if `hdl` is still its actor.
void forget_job(self_ptr self, const std::string& id, const job_actor& hdl) {
  auto& st = self->state;
  auto i = st.jobs.find(id);
  if (i != st.jobs.end() && i->second == hdl)
    st.jobs.erase(i);
  if (st.directory)
    st.directory->erase(id, hdl);
}

// Sends `xs...` to every job and calls `each` with every reply, then `done`
// once all have answered (errors count as answered).
template <class Reply, class Each, class Done, class... Ts>
void fan_out(self_ptr self, Each each, Done done, Ts... xs) {
  auto remaining = std::make_shared<size_t>(self->state.jobs.size());
  if (*remaining == 0) {
    done();
    return;
  }
  for (const auto& [id, hdl] : self->state.jobs)
    self->request(hdl, fan_out_timeout, xs...)
      .then(
        [=](Reply& x) mutable {
          each(x);
          if (--*remaining == 0)
            done();
        },
        [=](caf::error&) mutable {
          if (--*remaining == 0)
            done();
        });
}

// Asks every job for its status (as `fan_out`, within `job_status_timeout`)
// and calls `done` with every answer and, for the jobs that did not answer,
// an unanswered status in its place.
template <class Done>
void job_statuses(self_ptr self, status_verbosity v, Done done) {
  auto acc = std::make_shared<std::vector<component_status>>();
  auto remaining = std::make_shared<size_t>(self->state.jobs.size());
  if (*remaining == 0) {
    done(*acc);
    return;
  }
  acc->reserve(*remaining);
  for (const auto& kv : self->state.jobs) {
    auto id = kv.first;
    self->request(kv.second, job_status_timeout, status_atom::value, v)
      .then(
        [=](component_status& x) mutable {
          acc->push_back(std::move(x));
          if (--*remaining == 0)
            done(*acc);
        },
        [=](caf::error& err) mutable {
          acc->push_back(unanswered("job/" + id, job_state::name, err,
                                    job_status_timeout));
          if (--*remaining == 0)
            done(*acc);
        });
  }
}

// The registry's own status, with the jobs counted by recovery state.
component_status registry_status(self_ptr self, status_verbosity v,
                                 const std::vector<component_status>& jobs) {
  const auto& st = self->state;
  component_status result;
  result.name = job_registry_state::name;
  result.kind = job_registry_state::name;
  result.counters["jobs"] = live_jobs(st);
  result.counters["dormant"] = st.dormant.size();
  result.counters["unreplayable"] = st.unreplayable.size();
  result.counters["registered"] = st.registered.size();
  result.counters["deleted"] = st.deleted.size();
  result.counters["maxJobs"] = st.cfg.max_jobs;
  uint64_t subscribed = 0;
  uint64_t silent = 0;
  for (const auto& x : jobs) {
    if (!x.answered) {
      ++silent;
      continue;
    }
    auto i = x.facts.find("recoveryState");
    if (i != x.facts.end())
      ++result.counters["state." + i->second];
    auto j = x.counters.find("subscribed");
    if (j != x.counters.end())
      subscribed += j->second;
  }
  // A dormant job answers from its digest: idle, never subscribed.
  for (const auto& [id, d] : st.dormant)
    ++result.counters["state." + d.summary.recovery_state];
  result.counters["subscribed"] = subscribed;
  result.counters["unanswered"] = silent;
  if (v == status_verbosity::detailed) {
    result.counters["pendingRegistrations"] = st.pending_registrations;
    result.counters["purging"] = st.purging.size();
    result.counters["sweeping"] = st.sweeping ? 1 : 0;
  }
  if (!st.unreplayable.empty())
    result.problem = std::to_string(st.unreplayable.size())
                     + " dormant jobs cannot be replayed from the log; job "
                     + st.unreplayable.begin()->first + ": "
                     + st.unreplayable.begin()->second;
  else if (silent > 0)
    result.problem = std::to_string(silent) + " of "
                     + std::to_string(jobs.size())
                     + " jobs did not answer in time";
  else if (live_jobs(st) >= st.cfg.max_jobs)
    result.problem = "job cap of " + std::to_string(st.cfg.max_jobs)
                     + " reached: new jobs are refused";
  return result;
}

// Removes the history of the jobs deleted longer ago than the retention,
// then forgets that they existed, and the events of live jobs older than the
// retention that their latest snapshot covers; calls `done` with what was
// removed or with the error.
template <class Done>
void sweep(self_ptr self, Done done) {
  auto& st = self->state;
  if (st.sweeping) {
    done(purge_stats{}); // the previous sweep is still running
    return;
  }
  auto now = st.cfg.job.clock();
  std::vector<purge_target> targets;
  for (const auto& [id, d] : st.deleted)
    if (now - d.deleted_at_ms > st.cfg.retention.count())
      targets.push_back({id, d.seq});
  // The journal reads each live job's snapshot and old events; jobs without
  // either cost it one lookup.
  std::vector<std::string> live;
  live.reserve(live_jobs(st));
  for (const auto& [id, hdl] : st.jobs)
    if (st.deleted.count(id) == 0)
      live.push_back(id);
  for (const auto& [id, d] : st.dormant)
    live.push_back(id);
  std::sort(live.begin(), live.end());
  if (targets.empty() && live.empty()) {
    done(purge_stats{});
    return;
  }
  st.sweeping = true;
  for (const auto& t : targets)
    st.purging.insert(t.job_id);
  auto older_than = now - st.cfg.retention.count();
  self
    ->request(st.journal, caf::infinite, purge_atom::value, targets,
              std::move(live), older_than)
    .then(
      [=](purge_stats& stats) mutable {
        auto& st = self->state;
        st.sweeping = false;
        if (stats.live_events > 0)
          ES_INFO("job_registry removed {} events older than {:.1f} h of {} "
                  "live jobs, keeping {} incidents",
                  stats.live_events,
                  std::chrono::duration<double, std::ratio<3600>>(
                    st.cfg.retention)
                    .count(),
                  stats.live_jobs, stats.incidents);
        if (targets.empty()) {
          done(stats);
          return;
        }
        for (const auto& t : targets) {
          st.purging.erase(t.job_id);
          auto i = st.deleted.find(t.job_id);
          // Unless re-created and deleted again meanwhile.
          if (i != st.deleted.end() && i->second.seq == t.up_to_seq)
            st.deleted.erase(i);
        }
        ES_INFO("job_registry removed the history of {} jobs deleted more "
                "than {:.1f} h ago: {} events, {} index entries, {} "
                "snapshots",
                targets.size(),
                std::chrono::duration<double, std::ratio<3600>>(
                  st.cfg.retention)
                  .count(),
                stats.events, stats.index_entries, stats.snapshots);
        done(stats);
      },
      [=](caf::error& err) mutable {
        // Still remembered as deleted; the next sweep tries again.
        self->state.sweeping = false;
        for (const auto& t : targets)
          self->state.purging.erase(t.job_id);
        ES_WARN("job_registry could not remove old history ({} deleted "
                "jobs): {}",
                targets.size(), message_of(err));
        done(err);
      });
}

// Counts `id` as owned by `owner` (nothing for an empty owner).
void add_owned(self_ptr self, const std::string& id, const std::string& owner) {
  if (owner.empty())
    return;
  auto& st = self->state;
  st.owner_of[id] = owner;
  ++st.owned[owner];
}

// Forgets who owns `id`.
void drop_owned(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.owner_of.find(id);
  if (i == st.owner_of.end())
    return;
  auto j = st.owned.find(i->second);
  if (j != st.owned.end() && --j->second == 0)
    st.owned.erase(j);
  st.owner_of.erase(i);
}

// PutJob: an update goes to the job; a new job is spawned within the caps
// (the registry's, and the job cap of the identity that puts it).
caf::result<put_result> put_job(self_ptr self, job_spec spec,
                                put_origin origin) {
  if (auto err = validate(spec))
    return to_error(err);
  if (auto* hdl = find(self, spec.job_id))
    return self->delegate(*hdl, put_atom::value, std::move(spec),
                          std::move(origin.by));
  auto& st = self->state;
  // A dormant job whose log does not replay is not created again over it.
  if (auto i = st.unreplayable.find(spec.job_id); i != st.unreplayable.end())
    return make_error(errc::corrupt_record,
                      "job " + spec.job_id
                        + " cannot be replayed from the log: " + i->second);
  if (st.purging.count(spec.job_id) > 0)
    return make_error(errc::overloaded,
                      "job " + spec.job_id
                        + " was deleted and its old history is being "
                          "removed right now; retry in a moment");
  if (live_jobs(st) >= st.cfg.max_jobs)
    return make_error(errc::job_cap_reached,
                      "job cap of " + std::to_string(st.cfg.max_jobs)
                        + " reached; delete jobs or raise --max-jobs");
  if (origin.max_jobs > 0 && !origin.by.empty()) {
    auto i = st.owned.find(origin.by);
    auto owned = i == st.owned.end() ? size_t{0} : i->second;
    if (owned >= origin.max_jobs)
      return make_error(errc::job_cap_reached,
                        "'" + origin.by + "' owns " + std::to_string(owned)
                          + " jobs, its cap of "
                          + std::to_string(origin.max_jobs)
                          + "; delete some of its jobs first");
  }
  // A re-created job continues its deleted history: the sequence and the
  // subscription counter, as a replay of its log would (found by tools/dst
  // --actor: the counter started again at 0, so generations repeated and
  // the live job differed from its replay).
  job_model fresh;
  fresh.spec.job_id = spec.job_id;
  if (st.log != nullptr) {
    auto old = storage::replay_job(*st.log, spec.job_id);
    if (!old)
      return old.error();
    fresh.seq = old->state.seq;
    fresh.subscriber_generation = old->state.subscriber_generation;
  }
  auto id = spec.job_id;
  auto hdl = spawn_job(self, std::move(fresh));
  // Counted now, so that puts on their way cannot pass the cap together.
  add_owned(self, id, origin.by);
  auto rp = self->make_response_promise<put_result>();
  self
    ->request(hdl, caf::infinite, put_atom::value, std::move(spec),
              std::move(origin.by))
    .then(
      [=](put_result& res) mutable {
        self->state.deleted.erase(id);
        ES_INFO("job {} created", id);
        rp.deliver(std::move(res));
      },
      [=](caf::error& err) mutable {
        // Nothing was stored: forget the job again.
        drop_owned(self, id);
        forget_job(self, id, hdl);
        self->send_exit(hdl, caf::exit_reason::user_shutdown);
        rp.deliver(err);
      });
  return rp;
}

// DeleteJob.
caf::result<uint64_t> delete_job(self_ptr self, const std::string& id,
                                 std::string by) {
  auto* hdl = find(self, id);
  if (hdl == nullptr)
    return unknown_job(id);
  auto target = *hdl;
  auto rp = self->make_response_promise<uint64_t>();
  self->request(target, caf::infinite, delete_atom::value, std::move(by))
    .then(
      [=](uint64_t seq) mutable {
        auto& st = self->state;
        forget_job(self, id, target);
        drop_owned(self, id);
        st.registered.erase(id);
        st.deleted[id] = deleted_job{id, seq, st.cfg.job.clock()};
        self->send_exit(target, caf::exit_reason::user_shutdown);
        ES_INFO("job {} deleted", id);
        rp.deliver(seq);
      },
      [=](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

} // namespace

job_registry_actor::behavior_type
job_registry(job_registry_actor::stateful_pointer<job_registry_state> self,
             registry_config cfg, journal_actor journal,
             std::vector<initial_job> initial, std::vector<job_digest> dormant,
             std::vector<deleted_job> deleted, const storage::event_log* log) {
  if (auto err = validate(cfg)) {
    self->quit(err);
    return job_registry_actor::behavior_type::make_empty_behavior();
  }
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.journal = std::move(journal);
  st.log = log;
  for (auto& d : deleted) {
    auto id = d.job_id;
    st.deleted.emplace(std::move(id), std::move(d));
  }
  if (log == nullptr)
    dormant.clear(); // nothing to wake them from (tests)
  if (initial.size() + dormant.size() > st.cfg.max_jobs)
    ES_WARN("job_registry holds {} jobs from the log, more than the cap of "
            "{}; new jobs are refused until some are deleted",
            initial.size() + dormant.size(), st.cfg.max_jobs);
  for (auto& d : dormant) {
    auto id = d.summary.job_id;
    if (d.summary.registered)
      st.registered.insert(id);
    add_owned(self, id, d.owner);
    st.dormant.emplace(std::move(id), std::move(d));
  }
  for (auto& x : initial) {
    if (x.state.registered)
      st.registered.insert(x.state.spec.job_id);
    add_owned(self, x.state.spec.job_id, x.state.owner);
    spawn_job(self, std::move(x.state), x.tail);
  }
  // Retention: once now, at start-up, then periodically.
  self->send(self, sweep_atom::value);
  return {
    [=](put_atom, job_spec& spec) -> caf::result<put_result> {
      return put_job(self, std::move(spec), put_origin{});
    },
    [=](put_atom, job_spec& spec,
        put_origin& origin) -> caf::result<put_result> {
      return put_job(self, std::move(spec), std::move(origin));
    },
    [=](delete_atom, std::string& id) -> caf::result<uint64_t> {
      return delete_job(self, id, {});
    },
    [=](delete_atom, std::string& id,
        std::string& by) -> caf::result<uint64_t> {
      return delete_job(self, id, std::move(by));
    },
    [=](get_atom, std::string& id) -> caf::result<job_status> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, get_atom::value);
      return unknown_job(id);
    },
    [=](list_atom, std::string& ns) -> caf::result<std::vector<job_summary>> {
      auto rp = self->make_response_promise<std::vector<job_summary>>();
      auto acc = std::make_shared<std::vector<job_summary>>();
      for (const auto& [id, d] : self->state.dormant)
        if (ns.empty() || d.summary.ns == ns)
          acc->push_back(d.summary);
      fan_out<job_summary>(
        self,
        [=](job_summary& x) {
          if (ns.empty() || x.ns == ns)
            acc->push_back(std::move(x));
        },
        [=]() mutable {
          std::sort(acc->begin(), acc->end(),
                    [](const auto& x, const auto& y) {
                      return x.job_id < y.job_id;
                    });
          rp.deliver(std::move(*acc));
        },
        get_atom::value, summary_atom::value);
      return rp;
    },
    [=](inspect_atom, std::string& id) -> caf::result<job_inspection> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, get_atom::value, inspect_atom::value);
      return unknown_job(id);
    },
    [=](inspect_atom, list_atom)
      -> caf::result<std::vector<job_inspection>> {
      // An inspection holds the whole folded state: every job is woken.
      wake_all(self, [](const job_digest&) { return true; });
      auto rp = self->make_response_promise<std::vector<job_inspection>>();
      auto acc = std::make_shared<std::vector<job_inspection>>();
      fan_out<job_inspection>(
        self, [=](job_inspection& x) { acc->push_back(std::move(x)); },
        [=]() mutable { rp.deliver(std::move(*acc)); }, get_atom::value,
        inspect_atom::value);
      return rp;
    },
    [=](annotate_atom, std::string& id, string_map& set,
        std::vector<std::string>& remove,
        std::string& by) -> caf::result<annotations_view> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, annotate_atom::value, std::move(set),
                              std::move(remove), std::move(by));
      return unknown_job(id);
    },
    [=](annotate_atom, std::string& id, string_map& set,
        std::vector<std::string>& remove, std::string& by,
        uint64_t expected_seq) -> caf::result<annotations_view> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, annotate_atom::value, std::move(set),
                              std::move(remove), std::move(by), expected_seq);
      return unknown_job(id);
    },
    [=](get_atom, annots_atom,
        std::string& id) -> caf::result<annotations_view> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, get_atom::value, annots_atom::value);
      return unknown_job(id);
    },
    [=](watch_atom, std::string& id,
        annotations_sink_ptr& sink) -> caf::result<ok_atom> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, watch_atom::value, std::move(sink));
      return unknown_job(id);
    },
    [=](faults_atom,
        job_device_faults& faults) -> caf::result<device_faults_outcome> {
      if (auto* hdl = find(self, faults.job_id))
        return self->delegate(*hdl, faults_atom::value, std::move(faults));
      return unknown_job(faults.job_id);
    },
    [=](faults_atom, job_device_faults& faults, faults_reply_ptr& reply) {
      if (auto* hdl = find(self, faults.job_id))
        self->send(*hdl, faults_atom::value, std::move(faults),
                   std::move(reply));
      else
        reply->fail(unknown_job(faults.job_id));
    },
    [=](init_atom, client_info& client) -> caf::result<biz_status> {
      if (auto* hdl = find(self, client.job_id))
        return self->delegate(*hdl, init_atom::value, std::move(client));
      return biz_status{502, "job(uid=" + client.job_id
                               + ") is not known: no PutJob for it"};
    },
    [=](register_atom, client_info& client) -> caf::result<biz_status> {
      auto& st = self->state;
      auto* hdl = find(self, client.job_id);
      if (hdl == nullptr) {
        if (st.deleted.count(client.job_id) > 0)
          return biz_status{402, "jobId=" + client.job_id
                                   + " not exist, reuse registry"};
        return biz_status{408, "jobId=" + client.job_id + " not inited"};
      }
      if (st.registered.count(client.job_id) > 0)
        return self->delegate(*hdl, register_atom::value, std::move(client),
                              false);
      // Reserve a slot so that concurrent registrations respect the cap.
      bool cap_reached = st.registered.size() + st.pending_registrations
                         >= st.cfg.max_jobs;
      if (!cap_reached)
        ++st.pending_registrations;
      auto id = client.job_id;
      auto rp = self->make_response_promise<biz_status>();
      self
        ->request(*hdl, caf::infinite, register_atom::value, std::move(client),
                  cap_reached)
        .then(
          [=](biz_status& status) mutable {
            auto& st = self->state;
            if (!cap_reached)
              --st.pending_registrations;
            if (status.code == 0 && st.jobs.count(id) > 0)
              st.registered.insert(id);
            rp.deliver(std::move(status));
          },
          [=](caf::error& err) mutable {
            if (!cap_reached)
              --self->state.pending_registrations;
            rp.deliver(err);
          });
      return rp;
    },
    [=](subscribe_atom, client_info& client,
        signal_sink_ptr& sink) -> caf::result<ok_atom> {
      if (auto* hdl = find(self, client.job_id))
        return self->delegate(*hdl, subscribe_atom::value, std::move(client),
                              std::move(sink));
      return make_error(errc::not_registered,
                        "jobId=" + client.job_id + " not registed");
    },
    [=](report_atom, client_info& client,
        flow_input& in) -> caf::result<biz_status> {
      if (auto* hdl = find(self, client.job_id))
        return self->delegate(*hdl, report_atom::value, std::move(in));
      return biz_status{400, "jobId=" + client.job_id + " not registed"};
    },
    [=](report_atom, client_info& client, flow_input& in,
        report_reply_ptr& reply) {
      if (auto* hdl = find(self, client.job_id))
        self->send(*hdl, report_atom::value, std::move(in), std::move(reply));
      else
        reply->deliver({400, "jobId=" + client.job_id + " not registed"});
    },
    [=](watch_atom, job_directory_ptr& directory) -> caf::result<ok_atom> {
      auto& st = self->state;
      if (st.directory)
        st.directory->clear();
      st.directory = std::move(directory);
      if (st.directory)
        for (const auto& [id, hdl] : st.jobs)
          st.directory->put(id, hdl);
      return ok_atom::value;
    },
    [=](switch_atom, std::string& id, std::vector<nic_op>& ops,
        std::string& who) -> caf::result<biz_status> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, switch_atom::value, std::move(ops),
                              std::move(who));
      return biz_status{413, "job:" + id + " not exist"};
    },
    [=](worker_atom, std::string& id,
        switch_sink_ptr& sink) -> caf::result<ok_atom> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, worker_atom::value, std::move(sink));
      return make_error(errc::not_registered,
                        "jobId=" + id
                          + " not registed, please wait agent register");
    },
    [=](worker_atom, std::string& id,
        stress_sink_ptr& sink) -> caf::result<ok_atom> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, worker_atom::value, std::move(sink));
      return make_error(errc::not_registered,
                        "jobId=" + id
                          + " not registed, please wait agent register");
    },
    [=](stress_atom, std::string& id, stress_request& req,
        std::string& who) -> caf::result<biz_status> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, stress_atom::value, std::move(req),
                              std::move(who));
      return biz_status{413, "job:" + id + " not exist"};
    },
    [=](om_atom, std::string& id, om_kind kind,
        om_sink_ptr& sink) -> caf::result<ok_atom> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, om_atom::value, kind,
                              std::move(sink));
      return make_error(errc::not_registered, "jobId=" + id + " not registed");
    },
    [=](nodeclear_atom, std::string& node, std::string& id,
        std::string& who) -> caf::result<std::vector<std::string>> {
      if (!id.empty()) {
        auto* hdl = find(self, id);
        if (hdl == nullptr)
          return unknown_job(id);
        auto rp = self->make_response_promise<std::vector<std::string>>();
        self->request(*hdl, fan_out_timeout, nodeclear_atom::value, node, who)
          .then(
            [=](std::string& cleared) mutable {
              rp.deliver(cleared.empty() ? std::vector<std::string>{}
                                         : std::vector<std::string>{cleared});
            },
            [=](caf::error& err) mutable { rp.deliver(err); });
        return rp;
      }
      // Only the dormant jobs that hold the node have anything to clear.
      wake_all(self, [&node](const job_digest& d) {
        const auto& xs = d.summary.unhealthy_nodes;
        return std::any_of(xs.begin(), xs.end(),
                           [&node](const auto& x) { return x.node == node; });
      });
      auto rp = self->make_response_promise<std::vector<std::string>>();
      auto acc = std::make_shared<std::vector<std::string>>();
      fan_out<std::string>(
        self,
        [=](std::string& cleared) {
          if (!cleared.empty())
            acc->push_back(cleared);
        },
        [=]() mutable {
          std::sort(acc->begin(), acc->end());
          rp.deliver(std::move(*acc));
        },
        nodeclear_atom::value, node, who);
      return rp;
    },
    [=](purge_atom) -> caf::result<purge_stats> {
      auto rp = self->make_response_promise<purge_stats>();
      sweep(self, [=](auto&& result) mutable {
        rp.deliver(std::forward<decltype(result)>(result));
      });
      return rp;
    },
    [=](sweep_atom) {
      sweep(self, [](auto&&) {});
      self->delayed_send(self, self->state.cfg.retention_sweep,
                         sweep_atom::value);
    },
    [=](status_atom, status_verbosity v) -> caf::result<component_status> {
      // Each job is asked for the least it has: only its state is counted.
      auto rp = self->make_response_promise<component_status>();
      job_statuses(self, status_verbosity::info,
                   [=](const std::vector<component_status>& jobs) mutable {
                     rp.deliver(registry_status(self, v, jobs));
                   });
      return rp;
    },
    [=](status_atom, status_verbosity v,
        std::string& id) -> caf::result<component_status> {
      if (auto* hdl = find(self, id))
        return self->delegate(*hdl, status_atom::value, v);
      return unknown_job(id);
    },
    [=](status_atom, status_verbosity v,
        list_atom) -> caf::result<std::vector<component_status>> {
      // Each job answers for itself: every job is woken.
      wake_all(self, [](const job_digest&) { return true; });
      auto rp = self->make_response_promise<std::vector<component_status>>();
      job_statuses(self, v, [=](std::vector<component_status>& xs) mutable {
        std::sort(xs.begin(), xs.end(), [](const auto& x, const auto& y) {
          return x.name < y.name;
        });
        rp.deliver(std::move(xs));
      });
      return rp;
    },
    [=](digest_atom) -> caf::result<uint64_t> {
      // The dormant jobs' digests are stored and still current.
      auto rp = self->make_response_promise<uint64_t>();
      auto acc = std::make_shared<std::vector<digest_record>>();
      fan_out<digest_record>(
        self,
        [=](digest_record& x) {
          if (!x.job_id.empty())
            acc->push_back(std::move(x));
        },
        [=]() mutable {
          rp.delegate(self->state.journal, digest_atom::value,
                      std::move(*acc));
        },
        get_atom::value, digest_atom::value);
      return rp;
    },
    [=](shutdown_atom) -> caf::result<ok_atom> {
      auto rp = self->make_response_promise<ok_atom>();
      fan_out<ok_atom>(
        self, [](ok_atom) {}, [=]() mutable { rp.deliver(ok_atom::value); },
        shutdown_atom::value);
      return rp;
    },
  };
}

} // namespace recoverd
