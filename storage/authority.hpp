#pragma once

/// What makes a group commit durable before the local log takes it.

#include <vector>

#include <caf/error.hpp>

#include "storage/records.hpp"

namespace recoverd::storage {

/// Where a group commit must be durable before the local log takes it.
/// Without one the local log is the authority (`--store rocksdb`).
class authority {
public:
  virtual ~authority() = default;

  /// Makes one group commit durable. Fails with `errc::deposed` when this
  /// replica may no longer write; then nothing of the batch was stored by
  /// it after its term ended.
  [[nodiscard]] virtual caf::error
  commit(const std::vector<log_record>& events,
         const std::vector<snapshot_record>& snapshots,
         const fleet_records& fleet)
    = 0;
};

} // namespace recoverd::storage
