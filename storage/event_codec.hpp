#pragma once

/// The durable record format: domain events and job states to and from the
/// bytes of `protos/events.proto`. Actors encode in parallel; the journal
/// only moves bytes.

#include <string>
#include <string_view>

#include <caf/expected.hpp>

#include "actors/model/job_model.hpp"
#include "actors/model/types.hpp"

namespace recoverd::storage {

/// Record format version written by this code. Version 1 records are read
/// too: a flow step that held the whole state reads as a change replacing
/// every field.
constexpr uint32_t record_version = 2;

/// Encodes an event as an `Event` record.
std::string encode_event(const event& ev);

/// Decodes an `Event` record; fails on malformed bytes, an unknown kind or a
/// newer record version.
[[nodiscard]] caf::expected<event> decode_event(std::string_view bytes);

/// Encodes a job's state as a `Snapshot` record.
std::string encode_snapshot(const job_model& state);

/// Decodes a `Snapshot` record.
[[nodiscard]] caf::expected<job_model> decode_snapshot(std::string_view bytes);

} // namespace recoverd::storage
