#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "actors/actors.hpp"
#include "actors/config.hpp"
#include "actors/model/node_registry.hpp"

namespace recoverd {

/// An operator's clear waiting for the registry's next write.
struct pending_clear {
  std::string node;
  std::string by;
  caf::typed_response_promise<bool> reply;
};

/// What waits for the registry's next write: jobs' observations or a clear.
using pending_node_work
  = std::variant<std::vector<node_observation>, pending_clear>;

/// State of the NODE REGISTRY actor.
struct node_registry_state {
  nodes_config cfg;
  journal_actor journal;
  /// The fold of the stream.
  node_table table;
  /// Sequence number of the stream's last event.
  uint64_t seq = 0;
  /// What was written since the last snapshot (see `snapshot_due`).
  snapshot_tail tail;
  /// Events recorded since start, and observations lost to a failed write.
  uint64_t recorded = 0;
  uint64_t lost = 0;
  /// Work that arrived while a write was in flight; the next write takes
  /// all of it, so a burst of reports costs the fleet stream one append.
  std::vector<pending_node_work> queued;
  /// A write is in flight.
  bool writing = false;

  static inline const char* name = "node_registry";
};

/// The NODE REGISTRY behaviour.
/// @param initial The registry as replayed from the log.
node_registry_actor::behavior_type
node_registry(node_registry_actor::stateful_pointer<node_registry_state> self,
              initial_nodes initial, nodes_config cfg, journal_actor journal);

} // namespace recoverd
