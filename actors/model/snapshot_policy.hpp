#pragma once

/// When a stream of events (a job's, the fleet's node registry's) gets its
/// next snapshot. Pure.

#include <cstdint>

namespace recoverd {

/// What a stream wrote after its latest snapshot, and that snapshot's size:
/// what decides when the next one is due.
struct snapshot_tail {
  uint64_t events = 0; ///< Events after the latest snapshot.
  uint64_t bytes = 0;  ///< Their encoded size.
  /// The latest snapshot's encoded size; 0 when there is none (or it is not
  /// known).
  uint64_t snapshot_bytes = 0;
};

/// Snapshots up to this size follow the event count alone.
constexpr uint64_t small_snapshot_bytes = 4096;

/// Whether a snapshot is due after `tail`: once `every` events were written
/// since the last one (never when `every` is 0), and, for a snapshot over
/// `small_snapshot_bytes`, once those events weigh at least half of it.
/// A snapshot grows with what it holds (a job's ranks: ~290 KB at 16,384
/// ranks; the fleet's nodes: 73 B to ~1 KB each), the events do not
/// (~100 B): every 20 events, such a job snapshot would cost each event
/// ~15 KB and ~80 us. So snapshots add at most twice the events' own
/// bytes, and a start-up replays at most half a snapshot's bytes of events
/// after one.
bool snapshot_due(const snapshot_tail& tail, uint64_t every);

} // namespace recoverd
