#pragma once

/// The record format of the fleet's node stream: node registry events and
/// snapshots to and from the bytes of `protos/fleet.proto`.

#include <string>
#include <string_view>

#include <caf/expected.hpp>

#include "actors/model/node_registry.hpp"

namespace recoverd::storage {

/// Name of the node registry's stream in the fleet family of the log.
constexpr const char* node_stream = "nodes";

/// Record format version of node records written by this code.
constexpr uint32_t node_record_version = 1;

/// Encodes a node registry event as a `NodeEvent`.
std::string encode_node_event(const node_event& x);

/// Decodes a `NodeEvent`; fails on malformed bytes, a newer record version
/// or an unknown source.
[[nodiscard]] caf::expected<node_event> decode_node_event(std::string_view
                                                            bytes);

/// Encodes the registry's nodes as a `NodeRegistrySnapshot`.
std::string encode_node_snapshot(const node_table& x);

/// Decodes a `NodeRegistrySnapshot` into the nodes of `into` (its
/// configuration stays); fails on malformed bytes or a newer version.
[[nodiscard]] caf::error decode_node_snapshot(std::string_view bytes,
                                              node_table& into);

class event_log;

/// Rebuilds the node table from its stream in `log`: its snapshot, then
/// the events after it, scored with `cfg`. An undecodable record fails the
/// start-up with its seq named.
[[nodiscard]] caf::expected<initial_nodes>
replay_nodes(const event_log& log, const node_registry_config& cfg);

} // namespace recoverd::storage
