#pragma once

/// `caf::error` helpers for the one error enum (`actors/model/error.hpp`). Mapped to gRPC status
/// codes in exactly one place: `services/status_mapping.cpp`.

#include <cstdint>
#include <optional>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/model/error.hpp"

namespace recoverd {

/// Error category atom of every `errc` value.
constexpr caf::atom_value errc_category = caf::atom("recoverd");

/// Makes an error of our category carrying a human-readable message.
caf::error make_error(errc code, std::string message);

/// The `errc` of an error of our category, or nothing.
std::optional<errc> errc_of(const caf::error& err);

/// The message carried by an error made with `make_error`, or a rendering
/// of a foreign error.
std::string message_of(const caf::error& err);

/// The code of a model failure, or nothing when it holds none.
inline std::optional<errc> errc_of(const failure& x) {
  return x ? std::optional<errc>{x.code()} : std::nullopt;
}

/// The message of a model failure.
inline std::string message_of(const failure& x) {
  return x.message();
}

/// The `caf::error` of a model failure (none for no failure).
caf::error to_error(const failure& x);

/// A model result as a `caf::expected`.
template <class T>
caf::expected<T> to_expected(expected<T>&& x) {
  if (!x)
    return to_error(x.error());
  return std::move(*x);
}

/// Renders an error of our category for `actor_system_config::add_error_category`.
std::string render_error(uint8_t code, caf::atom_value category,
                         const caf::message& context);

} // namespace recoverd
