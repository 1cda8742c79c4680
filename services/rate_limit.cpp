#include "services/rate_limit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "actors/error.hpp"

namespace recoverd {

namespace {

constexpr const char* class_names[rpc_class_count]
  = {"report", "agent", "read", "write", "om", "health"};

double refilled(double tokens, const bucket_rate& r,
                rate_limiter::clock::duration elapsed) {
  auto secs = std::chrono::duration<double>(elapsed).count();
  return std::min(r.burst, tokens + std::max(0.0, secs) * r.per_second);
}

int64_t wait_ms(double tokens, const bucket_rate& r) {
  auto ms = std::ceil((1.0 - tokens) / r.per_second * 1000.0);
  return std::max<int64_t>(1, static_cast<int64_t>(ms));
}

} // namespace

const char* to_string(rpc_class x) {
  return class_names[static_cast<size_t>(x)];
}

bool parse_rpc_class(std::string_view name, rpc_class& out) {
  for (size_t i = 0; i < rpc_class_count; ++i)
    if (name == class_names[i]) {
      out = static_cast<rpc_class>(i);
      return true;
    }
  return false;
}

rate_limits rate_limits::defaults() {
  rate_limits x;
  auto set = [&x](rpc_class c, double rate, double burst) {
    x.per_client[static_cast<size_t>(c)] = {rate, burst};
  };
  // Per client. An agent pod sends a handful of reports per recovery; a
  // platform controller a few writes per job change; these leave room
  // for bursts (a 1,000-job re-list) and still stop a flood.
  set(rpc_class::report, 20000, 40000);
  set(rpc_class::agent, 5000, 10000);
  set(rpc_class::read, 5000, 10000);
  set(rpc_class::write, 5000, 10000);
  set(rpc_class::om, 100, 200);
  set(rpc_class::health, 1000, 2000);
  // Per job: one job's agents cannot crowd out the journal.
  x.per_job_reports = {1000, 2000};
  return x;
}

caf::error parse_rate_limit(std::string_view text, rate_limits& limits) {
  auto fail = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "--rate-limit '" + std::string{text} + "': " + why);
  };
  auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return fail("expected CLASS=RATE[/BURST] or job=RATE[/BURST]");
  auto name = text.substr(0, eq);
  auto value = std::string{text.substr(eq + 1)};
  double rate = 0;
  double burst = 0;
  try {
    size_t used = 0;
    rate = std::stod(value, &used);
    if (used < value.size()) {
      if (value[used] != '/')
        return fail("RATE must be a number of calls per second");
      auto rest = value.substr(used + 1);
      size_t used2 = 0;
      burst = std::stod(rest, &used2);
      if (used2 != rest.size())
        return fail("BURST must be a number");
    }
  } catch (const std::exception&) {
    return fail("RATE must be a number of calls per second");
  }
  if (!(rate >= 0) || !(burst >= 0) || std::isinf(rate) || std::isinf(burst))
    return fail("RATE and BURST must be finite and not negative");
  if (burst == 0)
    burst = std::max(1.0, rate);
  bucket_rate r{rate, std::max(1.0, burst)};
  if (name == "job") {
    limits.per_job_reports = r;
    return {};
  }
  rpc_class c;
  if (!parse_rpc_class(name, c))
    return fail("unknown class '" + std::string{name}
                + "'; known: report, agent, read, write, om, health, job");
  limits.per_client[static_cast<size_t>(c)] = r;
  return {};
}

rate_limiter::rate_limiter(rate_limits limits) : limits_(limits) {
  for (auto& x : refused_client_)
    x = 0;
}

rate_limiter::shard& rate_limiter::shard_of(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % shard_count];
}

size_t rate_limiter::buckets() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> guard{s.mtx};
    n += s.buckets.size();
  }
  return n;
}

std::optional<rate_refusal> rate_limiter::acquire(rpc_class c,
                                                  std::string_view client,
                                                  std::string_view job,
                                                  clock::time_point now) {
  // Takes a token from the bucket `key` with rate `r`, or tells how long
  // to wait; `give_back` returns a token taken before.
  auto take = [&](const std::string& key, const bucket_rate& r,
                  bool give_back) -> std::optional<int64_t> {
    auto& s = shard_of(key);
    std::lock_guard<std::mutex> guard{s.mtx};
    auto i = s.buckets.find(key);
    if (i == s.buckets.end()) {
      if (give_back)
        return std::nullopt;
      if (s.buckets.size() >= max_per_shard) {
        // Idle clients' buckets are full again: forgetting them changes
        // nothing. If that is not enough, a quarter goes at once (so the
        // sweep is rare), which at worst forgives those clients a burst.
        for (auto j = s.buckets.begin(); j != s.buckets.end();)
          if (refilled(j->second.tokens, *j->second.rate, now - j->second.at)
              >= j->second.rate->burst)
            j = s.buckets.erase(j);
          else
            ++j;
        if (s.buckets.size() >= max_per_shard)
          while (s.buckets.size() > max_per_shard * 3 / 4)
            s.buckets.erase(s.buckets.begin());
      }
      i = s.buckets.emplace(key, bucket{r.burst, now, &r}).first;
    }
    auto& b = i->second;
    b.tokens = refilled(b.tokens, r, now - b.at);
    b.at = std::max(b.at, now);
    if (give_back) {
      b.tokens = std::min(r.burst, b.tokens + 1);
      return std::nullopt;
    }
    if (b.tokens < 1)
      return wait_ms(b.tokens, r);
    b.tokens -= 1;
    return std::nullopt;
  };
  const auto& per_client = limits_.per_client[static_cast<size_t>(c)];
  std::string client_key;
  if (per_client.limited()) {
    client_key.reserve(client.size() + 2);
    client_key += 'c';
    client_key += static_cast<char>('0' + static_cast<int>(c));
    client_key += client;
    if (auto wait = take(client_key, per_client, false)) {
      ++refused_client_[static_cast<size_t>(c)];
      return rate_refusal{*wait, "client"};
    }
  }
  if (c == rpc_class::report && !job.empty()
      && limits_.per_job_reports.limited()) {
    std::string job_key;
    job_key.reserve(job.size() + 1);
    job_key += 'j';
    job_key += job;
    if (auto wait = take(job_key, limits_.per_job_reports, false)) {
      if (per_client.limited())
        take(client_key, per_client, true);
      ++refused_job_;
      return rate_refusal{*wait, "job"};
    }
  }
  return std::nullopt;
}

std::string peer_host(std::string_view peer) {
  auto colon = peer.find(':');
  if (colon == std::string_view::npos)
    return std::string{peer};
  auto scheme = peer.substr(0, colon);
  auto rest = peer.substr(colon + 1);
  if (scheme == "ipv4") {
    auto port = rest.rfind(':');
    return std::string{rest.substr(0, port)};
  }
  if (scheme == "ipv6" && !rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close != std::string_view::npos)
      return std::string{rest.substr(1, close - 1)};
  }
  return std::string{peer};
}

} // namespace recoverd
