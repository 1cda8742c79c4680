#include "actors/model/snapshot_policy.hpp"

namespace recoverd {

bool snapshot_due(const snapshot_tail& tail, uint64_t every) {
  if (every == 0 || tail.events < every)
    return false;
  return tail.snapshot_bytes <= small_snapshot_bytes
         || tail.bytes * 2 >= tail.snapshot_bytes;
}

} // namespace recoverd
