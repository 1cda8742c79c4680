// The token buckets of per-client fairness, on a clock the test moves.

#include <doctest/doctest.h>

#include "actors/error.hpp"
#include "services/rate_limit.hpp"

using namespace recoverd;
using namespace std::chrono_literals;

namespace {

rate_limits limits_of(std::initializer_list<const char*> args) {
  auto x = rate_limits::unlimited();
  for (const auto* a : args) {
    auto err = parse_rate_limit(a, x);
    REQUIRE_MESSAGE(!err, message_of(err));
  }
  return x;
}

} // namespace

TEST_CASE("rate limit: a client's bucket empties, refills, and is its own") {
  rate_limiter lim{limits_of({"read=10/5"})};
  auto t0 = rate_limiter::clock::time_point{} + 1h;
  MESSAGE("a burst of 5 passes, the 6th is refused with a retry hint");
  for (int i = 0; i < 5; ++i)
    CHECK_FALSE(lim.acquire(rpc_class::read, "a", "", t0));
  auto refused = lim.acquire(rpc_class::read, "a", "", t0);
  REQUIRE(refused);
  CHECK(refused->retry_after_ms == 100); // one token at 10/s
  CHECK(std::string{refused->scope} == "client");
  CHECK(lim.refused_by_client(rpc_class::read) == 1);
  MESSAGE("another client and another class are not affected");
  CHECK_FALSE(lim.acquire(rpc_class::read, "b", "", t0));
  CHECK_FALSE(lim.acquire(rpc_class::write, "a", "", t0));
  MESSAGE("100 ms later one token is back, and only one");
  CHECK_FALSE(lim.acquire(rpc_class::read, "a", "", t0 + 100ms));
  CHECK(lim.acquire(rpc_class::read, "a", "", t0 + 100ms));
  MESSAGE("a long pause refills up to the burst, not beyond");
  auto later = t0 + 1h;
  for (int i = 0; i < 5; ++i)
    CHECK_FALSE(lim.acquire(rpc_class::read, "a", "", later));
  CHECK(lim.acquire(rpc_class::read, "a", "", later));
}

TEST_CASE("rate limit: a job's report bucket is shared by its clients") {
  rate_limiter lim{limits_of({"report=1000/1000", "job=2/2"})};
  auto t0 = rate_limiter::clock::time_point{} + 1h;
  CHECK_FALSE(lim.acquire(rpc_class::report, "a", "job-1", t0));
  CHECK_FALSE(lim.acquire(rpc_class::report, "b", "job-1", t0));
  auto refused = lim.acquire(rpc_class::report, "c", "job-1", t0);
  REQUIRE(refused);
  CHECK(std::string{refused->scope} == "job");
  CHECK(refused->retry_after_ms == 500);
  CHECK(lim.refused_by_job() == 1);
  CHECK_FALSE(lim.acquire(rpc_class::report, "c", "job-2", t0));
  MESSAGE("a refusal by the job's bucket gives the client's token back");
  rate_limiter tight{limits_of({"report=1/1", "job=1/1"})};
  CHECK_FALSE(tight.acquire(rpc_class::report, "a", "job-1", t0));
  CHECK(tight.acquire(rpc_class::report, "b", "job-1", t0)); // job empty
  CHECK_FALSE(tight.acquire(rpc_class::report, "b", "job-2", t0));
}

TEST_CASE("rate limit: unlimited classes take nothing and hold no bucket") {
  rate_limiter lim{rate_limits::unlimited()};
  auto t0 = rate_limiter::clock::time_point{} + 1h;
  for (int i = 0; i < 10000; ++i)
    CHECK_FALSE(lim.acquire(rpc_class::report, "a", "job", t0));
  CHECK(lim.buckets() == 0);
}

TEST_CASE("rate limit: memory stays bounded under many clients") {
  rate_limiter lim{limits_of({"read=1/1"})};
  auto t0 = rate_limiter::clock::time_point{} + 1h;
  // Each client uses its one token: none of the buckets is full again, so
  // the shards must drop some to stay bounded.
  for (int i = 0; i < 200'000; ++i)
    lim.acquire(rpc_class::read, "10.0.0." + std::to_string(i), "", t0);
  CHECK(lim.buckets() <= 16 * rate_limiter::max_per_shard);
}

TEST_CASE("rate limit: --rate-limit values") {
  auto x = rate_limits::unlimited();
  CHECK_FALSE(parse_rate_limit("om=5", x));
  CHECK(x.per_client[static_cast<size_t>(rpc_class::om)].per_second == 5);
  CHECK(x.per_client[static_cast<size_t>(rpc_class::om)].burst == 5);
  CHECK_FALSE(parse_rate_limit("job=100/300", x));
  CHECK(x.per_job_reports.per_second == 100);
  CHECK(x.per_job_reports.burst == 300);
  CHECK_FALSE(parse_rate_limit("read=0", x));
  CHECK_FALSE(x.per_client[static_cast<size_t>(rpc_class::read)].limited());
  for (const char* bad : {"read", "reads=5", "read=x", "read=5/x", "read=-1",
                          "read=5/", "read=inf", "read=nan"}) {
    auto err = parse_rate_limit(bad, x);
    CHECK_MESSAGE(err, bad);
    CHECK(message_of(err).find("--rate-limit") != std::string::npos);
  }
  auto d = rate_limits::defaults();
  for (auto r : d.per_client)
    CHECK(r.limited());
  CHECK(d.per_job_reports.limited());
}

TEST_CASE("rate limit: peer addresses") {
  CHECK(peer_host("ipv4:127.0.0.1:5000") == "127.0.0.1");
  CHECK(peer_host("ipv6:[::1]:5000") == "::1");
  CHECK(peer_host("unix:/tmp/x") == "unix:/tmp/x");
  CHECK(peer_host("127.0.0.1") == "127.0.0.1");
}
