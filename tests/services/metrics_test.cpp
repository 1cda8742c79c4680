// The gRPC call counters behind /metrics: what a call adds, from many
// threads at once, and how the page shows it.

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "services/metrics.hpp"

using namespace recoverd;

namespace {

bool has_line(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos;
}

} // namespace

TEST_CASE("request metrics: calls from many threads all count, by method, "
          "code and latency") {
  request_metrics metrics;
  CHECK(request_metrics::latency_bounds().size() + 1
        == request_metrics::latency_buckets);
  auto& report = metrics.counters("/Recover/ReportProcessFault");
  CHECK(&report == &metrics.counters("/Recover/ReportProcessFault"));
  constexpr int threads = 4;
  constexpr int each = 5000;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        report.started(false);
        report.finished(false,
                        i % 10 == 0 ? grpc::StatusCode::UNAVAILABLE
                                    : grpc::StatusCode::OK,
                        i % 2 == 0 ? 0.0002 : 3.0);
      }
    });
  for (auto& t : ts)
    t.join();
  metrics.counters("/Recover/Subscribe").started(true);
  metrics.counters("/Recover/Subscribe").started(true);
  metrics.counters("/Recover/Subscribe").finished(
    true, grpc::StatusCode::CANCELLED, 9.0);
  // A code gRPC does not define counts as UNKNOWN.
  metrics.counters("other").finished(false, static_cast<grpc::StatusCode>(99),
                                     0.1);
  std::string page;
  metrics.render(page);
  const std::string m = "method=\"/Recover/ReportProcessFault\"";
  const std::string calls = "recoverd_grpc_requests_total{";
  const std::string latency = "recoverd_grpc_request_duration_seconds_";
  for (const auto& line : std::vector<std::string>{
         calls + m + ",code=\"OK\"} 18000",
         calls + m + ",code=\"UNAVAILABLE\"} 2000",
         latency + "bucket{" + m + ",le=\"0.0005\"} 10000",
         latency + "bucket{" + m + ",le=\"2.5\"} 10000",
         latency + "bucket{" + m + ",le=\"5\"} 20000",
         latency + "count{" + m + "} 20000",
         latency + "sum{" + m + "} 30002",
         calls + "method=\"/Recover/Subscribe\",code=\"CANCELLED\"} 1",
         "recoverd_grpc_open_streams{method=\"/Recover/Subscribe\"} 1",
         calls + "method=\"other\",code=\"UNKNOWN\"} 1"})
    CHECK_MESSAGE(has_line(page, line), line);
  MESSAGE("a stream's latency is not a unary call's; a unary call opens no "
          "stream");
  CHECK(page.find("duration_seconds_count{method=\"/Recover/Subscribe\"")
        == std::string::npos);
  CHECK(page.find("open_streams{" + m) == std::string::npos);
}
