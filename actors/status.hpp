#pragma once

/// The shared STATUS protocol (style §15, VAST's STATUS CLIENT): every
/// long-lived actor answers `status_atom` with a `component_status`, so one
/// request (Inspect.GetStatus, `GET /api/v1/status`, `recoverctl status`)
/// can fan out to all of them.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include "actors/atoms.hpp"

namespace recoverd {

/// How much a component says about itself.
enum class status_verbosity : uint8_t {
  /// The main figures only.
  info,
  /// Every figure it has.
  detailed,
};

/// What one component reports about itself: named counts and named texts,
/// ordered by name.
struct component_status {
  /// Which one: "journal", ..., or "job/<id>" for a job.
  std::string name;
  /// Its kind of actor (the state's `name`): "journal", "job", ...
  std::string kind;
  /// False when it did not answer in time or could not be asked; then
  /// `problem` says why.
  bool answered = true;
  /// What is wrong; empty when nothing is.
  std::string problem;
  /// Named counts and gauges.
  std::map<std::string, uint64_t> counters;
  /// Named texts.
  std::map<std::string, std::string> facts;

  /// Answered and reports no problem.
  bool healthy() const {
    return answered && problem.empty();
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, component_status& x) {
  return f(caf::meta::type_name("component_status"), x.name, x.kind,
           x.answered, x.problem, x.counters, x.facts);
}

/// The status listed in place of a component that did not answer: `why`
/// says what happened instead.
component_status unanswered(std::string name, std::string kind,
                            std::string why);

/// The status listed in place of a component whose request failed with
/// `err` after waiting up to `timeout`.
component_status unanswered(std::string name, std::string kind,
                            const caf::error& err, caf::timespan timeout);

/// What a status fan-out asks for (see the status desk).
struct status_query {
  /// Passed to every component.
  status_verbosity verbosity = status_verbosity::info;
  /// Also this live job's status; empty for none.
  std::string job_id;
  /// Also every live job's status.
  bool every_job = false;
  /// How long each component may take to answer.
  caf::timespan timeout = std::chrono::seconds(5);
};

/// The shared STATUS CLIENT protocol: every long-lived actor's interface
/// includes it (`::extend_with<status_client_actor>`).
using status_client_actor = caf::typed_actor<
  // Reports the actor's status.
  caf::replies_to<status_atom, status_verbosity>::with<component_status>>;

} // namespace recoverd

// Local messages only.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::status_verbosity)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::status_query)
