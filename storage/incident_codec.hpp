#pragma once

/// The record formats of `protos/history.proto`: the incidents the retention
/// keeps (`incident`), and the inspector's fold of a job's history kept across
/// a clean stop (`job_history::fold_state`).

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

/// Record format version of stored histories written by this code.
constexpr uint32_t history_record_version = 1;

/// Encodes the fold of a job's history as a `JobHistoryRecord`.
std::string encode_history(const job_history::fold_state& x);

/// Decodes a `JobHistoryRecord`; fails on malformed bytes, a newer record
/// version or a value this code does not know.
[[nodiscard]] caf::expected<job_history::fold_state>
decode_history(std::string_view bytes);

} // namespace recoverd::storage
