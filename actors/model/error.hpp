#pragma once

/// The one error enum of recoverd and the pure model's way to refuse an
/// input. The model knows no actor framework: a refusal is a `failure`
/// (code + message), a value-or-refusal an `expected<T>`. `actors/error.hpp`
/// turns them into `caf::error`; `services/status_mapping.cpp` maps those to
/// gRPC status codes, in exactly one place.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace recoverd {

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
  /// A past point or event the retention removed.
  history_purged,
  /// The caller has no identity the access control knows (no verified
  /// client certificate, no known bearer token).
  unauthenticated,
  /// The caller's role may not call this RPC, for this job, or on this
  /// listener.
  permission_denied,
  /// The caller expected the job at another sequence number: someone else
  /// changed it since the caller read it.
  conflict,
  /// This replica is no longer the leader (its lease expired or another
  /// replica holds the leader key): it wrote nothing and must not serve
  /// writes.
  deposed,
};

/// Name of an error code, e.g. "invalid_argument".
const char* to_string(errc x);

/// A refusal: an error code and a message for people. A default-constructed
/// failure is "no failure" and tests false.
class failure {
public:
  failure() = default;

  /// A failure with `code` and `message`.
  failure(errc code, std::string message)
    : code_(code), message_(std::move(message)) {
    // nop
  }

  /// True when this holds a failure.
  explicit operator bool() const noexcept {
    return code_.has_value();
  }

  /// The code; only meaningful when `*this` is true.
  errc code() const noexcept {
    return code_.value_or(errc::invalid_argument);
  }

  /// The message for people.
  const std::string& message() const noexcept {
    return message_;
  }

private:
  std::optional<errc> code_;
  std::string message_;
};

/// Makes a failure (the model's counterpart of `make_error`).
inline failure fail(errc code, std::string message) {
  return failure{code, std::move(message)};
}

/// A `T` or the failure that prevented it.
template <class T>
class expected {
public:
  /// Holds a value.
  expected(T x) : x_(std::in_place_index<0>, std::move(x)) {
    // nop
  }

  /// Holds a failure; `err` must be one.
  expected(failure err) : x_(std::in_place_index<1>, std::move(err)) {
    // nop
  }

  /// True when this holds a value.
  explicit operator bool() const noexcept {
    return x_.index() == 0;
  }

  /// The value; `*this` must be true.
  T& operator*() & {
    return std::get<0>(x_);
  }

  /// The value; `*this` must be true.
  const T& operator*() const& {
    return std::get<0>(x_);
  }

  /// The value, moved out; `*this` must be true.
  T&& operator*() && {
    return std::move(std::get<0>(x_));
  }

  /// Member access of the value; `*this` must be true.
  T* operator->() {
    return &std::get<0>(x_);
  }

  /// Member access of the value; `*this` must be true.
  const T* operator->() const {
    return &std::get<0>(x_);
  }

  /// The failure; `*this` must be false.
  const failure& error() const {
    return std::get<1>(x_);
  }

private:
  std::variant<T, failure> x_;
};

} // namespace recoverd
