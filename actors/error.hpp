#pragma once

/// The one error enum of recoverd and its helpers. Mapped to gRPC status
/// codes in exactly one place: `services/status_mapping.cpp`.

#include <cstdint>
#include <optional>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>

namespace recoverd {

/// Error category atom of every `errc` value.
constexpr caf::atom_value errc_category = caf::atom("recoverd");

/// What went wrong.
enum class errc : uint8_t {
  /// Input that is malformed or contradicts itself; nothing changed.
  invalid_argument = 1,
  /// The job is not known (never put, or deleted).
  unknown_job,
  /// The configured cap on jobs is reached.
  job_cap_reached,
  /// The event log could not be written or read; nothing changed.
  storage_failure,
  /// The job is not registered for recovery.
  not_registered,
  /// A report that the current state does not wait for.
  unexpected_report,
  /// Too much load: a queue or buffer is full.
  overloaded,
  /// A stored record could not be decoded.
  corrupt_record,
  /// The daemon is shutting down.
  shutting_down,
};

/// Name of an error code, e.g. "invalid_argument".
const char* to_string(errc x);

/// Makes an error of our category carrying a human-readable message.
caf::error make_error(errc code, std::string message);

/// The `errc` of an error of our category, or nothing.
std::optional<errc> errc_of(const caf::error& err);

/// The message carried by an error made with `make_error`, or a rendering
/// of a foreign error.
std::string message_of(const caf::error& err);

/// Renders an error of our category for `actor_system_config::add_error_category`.
std::string render_error(uint8_t code, caf::atom_value category,
                         const caf::message& context);

} // namespace recoverd
