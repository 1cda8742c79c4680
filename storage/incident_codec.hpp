#pragma once

/// The record format of the incidents the retention keeps: `incident` to and
/// from the bytes of `protos/history.proto`.

#include <string>
#include <string_view>

#include <caf/expected.hpp>

#include "actors/model/incidents.hpp"

namespace recoverd::storage {

/// Record format version of incident records written by this code.
constexpr uint32_t incident_record_version = 1;

/// Encodes a finished incident as an `IncidentRecord`.
std::string encode_incident(const incident& x);

/// Decodes an `IncidentRecord`; fails on malformed bytes or a newer record
/// version.
[[nodiscard]] caf::expected<incident> decode_incident(std::string_view bytes);

} // namespace recoverd::storage
