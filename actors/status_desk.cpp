#include "actors/status_desk.hpp"

#include <algorithm>
#include <memory>

#include "actors/error.hpp"
#include "actors/event_hub.hpp"
#include "actors/historian.hpp"
#include "actors/inspector.hpp"
#include "actors/job_registry.hpp"
#include "actors/journal.hpp"

namespace recoverd {

namespace {

using self_ptr = status_desk_actor::stateful_pointer<status_desk_state>;

// One status fan-out in progress: the answers so far, and how many are
// still awaited.
struct status_round {
  /// The daemon's components, in the order of `status_parts`.
  std::vector<component_status> parts;
  /// The jobs asked for.
  std::vector<component_status> jobs;
  size_t remaining = 0;
  bool over = false;
  caf::typed_response_promise<std::vector<component_status>> promise;
};

using status_round_ptr = std::shared_ptr<status_round>;

// Slots of `status_round::parts`.
enum status_part : size_t { registry_part, journal_part, hub_part,
                            inspector_part, historian_part, status_parts };

// Counts one answer in; the last one delivers every status.
void answered(const status_round_ptr& r) {
  if (r->over || --r->remaining > 0)
    return;
  r->over = true;
  std::sort(r->jobs.begin(), r->jobs.end(),
            [](const auto& x, const auto& y) { return x.name < y.name; });
  auto result = std::move(r->parts);
  for (auto& x : r->jobs)
    result.push_back(std::move(x));
  r->promise.deliver(std::move(result));
}

// Asks one of the daemon's components for its status into `slot`.
template <class Handle>
void ask_status(self_ptr self, const status_round_ptr& r, status_part slot,
                const Handle& hdl, const char* name, const status_query& q) {
  if (!hdl) {
    r->parts[slot] = unanswered(name, name, "is not running");
    return;
  }
  ++r->remaining;
  auto timeout = q.timeout;
  self->request(hdl, timeout, status_atom::value, q.verbosity)
    .then(
      [=](component_status& x) {
        r->parts[slot] = std::move(x);
        answered(r);
      },
      [=](caf::error& err) {
        r->parts[slot] = unanswered(name, name, err, timeout);
        answered(r);
      });
}

// Asks the registry for the jobs of `q` into `r->jobs`.
void ask_job_status(self_ptr self, const status_round_ptr& r,
                    const status_query& q) {
  auto timeout = q.timeout;
  auto id = q.job_id;
  const auto& registry = self->state.parts.registry;
  if (q.every_job) {
    ++r->remaining;
    self->request(registry, timeout, status_atom::value, q.verbosity,
                  list_atom::value)
      .then(
        [=](std::vector<component_status>& xs) {
          auto named = "job/" + id;
          if (!id.empty() && !r->over
              && std::none_of(xs.begin(), xs.end(), [&](const auto& x) {
                   return x.name == named;
                 })) {
            r->over = true;
            r->promise.deliver(make_error(errc::unknown_job,
                                          "job " + id + " is not known"));
            return;
          }
          r->jobs = std::move(xs);
          answered(r);
        },
        [=](caf::error& err) {
          r->jobs.push_back(unanswered("job/*", "job", err, timeout));
          answered(r);
        });
  } else if (!q.job_id.empty()) {
    ++r->remaining;
    self->request(registry, timeout, status_atom::value, q.verbosity, id)
      .then(
        [=](component_status& x) {
          r->jobs.push_back(std::move(x));
          answered(r);
        },
        [=](caf::error& err) {
          // A job that is not live is the caller's mistake, not a status.
          if (errc_of(err) == errc::unknown_job && !r->over) {
            r->over = true;
            r->promise.deliver(err);
            return;
          }
          r->jobs.push_back(unanswered("job/" + id, "job", err, timeout));
          answered(r);
        });
  }
}

} // namespace

status_desk_actor::behavior_type
status_desk(status_desk_actor::stateful_pointer<status_desk_state> self,
            status_components parts) {
  self->state.parts = std::move(parts);
  return {
    [=](status_atom,
        status_query& q) -> caf::result<std::vector<component_status>> {
      if (!q.job_id.empty())
        if (auto err = validate_job_id(q.job_id))
          return to_error(err);
      const auto& who = self->state.parts;
      ++self->state.rounds;
      auto r = std::make_shared<status_round>();
      r->parts.resize(status_parts);
      r->promise = self->make_response_promise<std::vector<component_status>>();
      // One for this handler: the round ends once it and every request
      // sent are counted in (at once when none could be sent).
      r->remaining = 1;
      ask_status(self, r, registry_part, who.registry,
                 job_registry_state::name, q);
      ask_status(self, r, journal_part, who.journal, journal_state::name, q);
      ask_status(self, r, hub_part, who.hub, event_hub_state::name, q);
      ask_status(self, r, inspector_part, who.inspector, inspector_state::name,
                 q);
      ask_status(self, r, historian_part, who.historian,
                 historian_state::name, q);
      ask_job_status(self, r, q);
      auto result = r->promise;
      answered(r);
      return result;
    },
    [=](status_atom, status_verbosity) -> component_status {
      component_status result;
      result.name = status_desk_state::name;
      result.kind = status_desk_state::name;
      result.counters["rounds"] = self->state.rounds;
      return result;
    },
  };
}

} // namespace recoverd
