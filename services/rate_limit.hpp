#pragma once

/// Per-client fairness (design §4.6, §8): token buckets per client and RPC
/// class, and one bucket per job for agent reports, so that one noisy
/// client is refused with RESOURCE_EXHAUSTED instead of slowing the others.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <caf/expected.hpp>

namespace recoverd {

/// Classes of RPC that share one bucket per client.
enum class rpc_class : uint8_t {
  /// Agent reports (Report*, Reply*): also limited per job.
  report,
  /// Other agent calls: Init, Register, the agent and worker streams.
  agent,
  /// Reads: Get*, List*, Watch*, Inspect, the HTTP port.
  read,
  /// Platform writes: PutJob, DeleteJob, SetAnnotations, device faults.
  write,
  /// Operator actions: switches, stress tests, node health.
  om,
  /// Health checks and reflection.
  health,
};

/// Number of `rpc_class` values.
constexpr size_t rpc_class_count = 6;

/// Name of a class as flags and metrics spell it ("report", ...).
const char* to_string(rpc_class x);

/// The class of a name; false when unknown.
bool parse_rpc_class(std::string_view name, rpc_class& out);

/// One bucket's refill rate and size; a rate of 0 means unlimited.
struct bucket_rate {
  /// Tokens added per second.
  double per_second = 0;
  /// Most tokens the bucket holds (the burst a quiet client may send).
  double burst = 0;

  /// Whether this bucket limits anything.
  bool limited() const {
    return per_second > 0;
  }
};

/// Every limit of the daemon.
struct rate_limits {
  /// Per client (identity, else IP address), per class.
  std::array<bucket_rate, rpc_class_count> per_client{};
  /// Per job, for agent reports of any client.
  bucket_rate per_job_reports;

  /// No limit at all (the library default; the daemon's flags set limits).
  static rate_limits unlimited() {
    return {};
  }

  /// The daemon's defaults: generous for one client, far below what one
  /// client could send in a flood.
  static rate_limits defaults();
};

/// Parses one `--rate-limit` value, "CLASS=RATE[/BURST]" or "job=RATE[/BURST]"
/// (RATE per second, 0 = unlimited; BURST defaults to RATE, at least 1),
/// into `limits`.
[[nodiscard]] caf::error parse_rate_limit(std::string_view text,
                                          rate_limits& limits);

/// The answer of `rate_limiter::acquire` when a bucket is empty.
struct rate_refusal {
  /// Milliseconds until a token is there again (the retry hint).
  int64_t retry_after_ms = 0;
  /// The bucket that refused: "client" or "job".
  const char* scope = "client";
};

/// Token buckets, keyed by client and by job; safe to call from any thread.
/// Memory stays bounded: buckets that are full again (idle clients) are
/// dropped when a shard holds too many.
class rate_limiter {
public:
  /// The clock buckets refill by.
  using clock = std::chrono::steady_clock;

  /// A limiter with `limits`.
  explicit rate_limiter(rate_limits limits);

  /// Takes one token of class `c` from `client`'s bucket (and, for reports
  /// with a non-empty `job`, from the job's). Returns nothing when admitted,
  /// else when to retry. Nothing is taken from any bucket when refused.
  std::optional<rate_refusal> acquire(rpc_class c, std::string_view client,
                                      std::string_view job,
                                      clock::time_point now = clock::now());

  /// Calls refused so far of class `c`, by per-client buckets.
  uint64_t refused_by_client(rpc_class c) const {
    return refused_client_[static_cast<size_t>(c)].load();
  }

  /// Reports refused so far by per-job buckets.
  uint64_t refused_by_job() const {
    return refused_job_.load();
  }

  /// The limits in force.
  const rate_limits& limits() const {
    return limits_;
  }

  /// Whether a call of class `c` (for a job, when `for_job`) can be refused
  /// at all; when not, `acquire` needs no client key.
  bool limits(rpc_class c, bool for_job) const {
    return limits_.per_client[static_cast<size_t>(c)].limited()
           || (for_job && c == rpc_class::report
               && limits_.per_job_reports.limited());
  }

  /// Buckets held now (for tests of the memory bound).
  size_t buckets() const;

  /// Most buckets one shard keeps before it drops full ones.
  static constexpr size_t max_per_shard = 4096;

private:
  struct bucket {
    double tokens = 0;
    clock::time_point at;
    const bucket_rate* rate = nullptr;
  };

  struct shard {
    mutable std::mutex mtx;
    std::unordered_map<std::string, bucket> buckets;
  };

  static constexpr size_t shard_count = 16;

  shard& shard_of(const std::string& key);

  rate_limits limits_;
  std::array<shard, shard_count> shards_;
  std::array<std::atomic<uint64_t>, rpc_class_count> refused_client_{};
  std::atomic<uint64_t> refused_job_{0};
};

/// The address part of a gRPC peer string ("ipv4:127.0.0.1:5000" ->
/// "127.0.0.1", "ipv6:[::1]:5000" -> "::1"); the whole string otherwise.
std::string peer_host(std::string_view peer);

} // namespace recoverd
