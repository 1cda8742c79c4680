#include "actors/config.hpp"

#include "actors/error.hpp"

namespace recoverd {

int64_t system_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

caf::error validate(const job_config& cfg) {
  if (cfg.waits.keepalive.count() <= 0)
    return make_error(errc::invalid_argument,
                      "keep-alive interval must be positive");
  if (cfg.stream_buffer == 0)
    return make_error(errc::invalid_argument,
                      "stream buffer must hold at least one message");
  if (!cfg.clock)
    return make_error(errc::invalid_argument, "job config has no clock");
  return caf::none;
}

caf::error validate(const registry_config& cfg) {
  if (cfg.max_jobs == 0)
    return make_error(errc::invalid_argument, "max jobs must be at least 1");
  if (cfg.retention.count() < 0)
    return make_error(errc::invalid_argument, "retention must not be negative");
  if (cfg.retention_sweep.count() <= 0)
    return make_error(errc::invalid_argument,
                      "retention sweep interval must be positive");
  return validate(cfg.job);
}

caf::error validate(const nodes_config& cfg) {
  if (auto err = to_error(validate(cfg.scoring)))
    return err;
  if (cfg.snapshot_every == 0)
    return make_error(errc::invalid_argument,
                      "node registry snapshots: every must be at least 1");
  if (!cfg.clock)
    return make_error(errc::invalid_argument, "node registry has no clock");
  return caf::none;
}

caf::error validate(const journal_config& cfg) {
  if (cfg.sync == sync_policy::batch && cfg.sync_interval.count() <= 0)
    return make_error(errc::invalid_argument,
                      "sync interval must be positive with sync=batch");
  if (cfg.retry_interval.count() < 0)
    return make_error(errc::invalid_argument,
                      "write retry interval must not be negative");
  return caf::none;
}

bool parse_sync_policy(const std::string& text, sync_policy& out) {
  if (text == "always")
    out = sync_policy::always;
  else if (text == "batch")
    out = sync_policy::batch;
  else
    return false;
  return true;
}

} // namespace recoverd
