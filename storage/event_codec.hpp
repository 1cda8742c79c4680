#pragma once

/// The durable record format: domain events and job states to and from the
/// bytes of `protos/events.proto`. Actors encode in parallel; the journal
/// only moves bytes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "actors/model/job_model.hpp"
#include "actors/model/types.hpp"
#include "storage/records.hpp"

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

/// Decodes the stored event `seq` of job `job_id`; the error names both.
[[nodiscard]] caf::expected<event>
decode_stored_event(const std::string& job_id, uint64_t seq,
                    std::string_view bytes);

/// Encodes a job's state as a `Snapshot` record.
std::string encode_snapshot(const job_model& state);

/// Encodes `spec` as the spec of a `Snapshot` record.
std::string encode_spec(const job_spec& spec);

/// Encodes a job's state as a `Snapshot` record, with `spec_bytes` (from
/// `encode_spec`) for its spec: `state.spec` is not read.
std::string encode_snapshot(const job_model& state,
                            std::string_view spec_bytes);

/// The `Snapshot` record of `model` once `evs` (not yet applied to it) are:
/// the events are folded into a copy of the model. The spec is most of a
/// large job's model and flow steps leave it as it is: when no event
/// touches it, the copy is made with the spec set aside (it is back in
/// `model` on return) and the record takes the spec's bytes from
/// `spec_bytes`, encoded there first when empty. Whoever applies an event
/// that touches the spec to `model` resets `spec_bytes`.
std::string encode_snapshot_after(job_model& model,
                                  std::optional<std::string>& spec_bytes,
                                  const std::vector<event>& evs);

/// Decodes a `Snapshot` record.
[[nodiscard]] caf::expected<job_model> decode_snapshot(std::string_view bytes);

/// How many pods and ranks (devices) a job's spec has.
struct spec_size {
  int32_t pods = 0;
  int32_t ranks = 0;
};

/// The pods and ranks of `spec`.
spec_size size_of(const job_spec& spec);

/// Decodes a `Snapshot` record but for its spec's details: the spec holds
/// only the job's id, name and namespace, and `size` gets how many pods and
/// ranks it has. What a job's digest needs, without decoding every pod and
/// device of a large job (start-up after a crash). The spec's annotations
/// are left out too. A record whose spec comes in more than one piece
/// (which a parser merges) is decoded in full.
[[nodiscard]] caf::expected<job_model>
decode_snapshot_head(std::string_view bytes, spec_size& size);

/// Encodes a job's digest as a `JobDigest` record.
std::string encode_digest(const job_digest& x);

/// The record of `state`'s digest (see `to_digest`), none when the job may
/// not stay dormant.
std::optional<digest_record> digest_record_of(const job_model& state);

/// Decodes a `JobDigest` record.
[[nodiscard]] caf::expected<job_digest> decode_digest(std::string_view bytes);

} // namespace recoverd::storage
