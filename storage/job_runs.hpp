#pragma once

/// Work over every job of the log on several threads (replay, the first
/// history fold): jobs are independent, reads are thread-safe.

#include <cstddef>
#include <functional>

#include <caf/error.hpp>

#include "storage/event_log.hpp"

namespace recoverd::storage {

/// Calls `f(reader, i)` for every `i` in [0, n), on `threads` threads (the
/// caller's among them), in runs of `run` neighbouring indices (neighbouring
/// job ids share table blocks). Each thread has a reader of its own and
/// takes its runs in increasing order, so its iterators only move forward.
/// Once `f` fails, the threads stop at their next index; returns the error
/// of the lowest index that failed.
[[nodiscard]] caf::error
for_each_job(const event_log& log, size_t n, size_t threads, size_t run,
             const std::function<caf::error(event_log::reader&, size_t)>& f);

} // namespace recoverd::storage
