#pragma once

/// The bare gRPC baseline the benchmarks compare recoverd with: a trivial
/// `Recover` server whose HealthCheck answers at once, and load loops that
/// measure its round trips in the same run as recoverd's figures.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "recover.grpc.pb.h"

namespace recoverd::bench {

/// The trivial server of the baseline: HealthCheck and ReportProcessFault
/// answer at once (code 0), on the thread that read the call.
class echo_service final : public ::Recover::CallbackService {
  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* ctx,
                                        const ::ClientInfo*,
                                        ::Status* resp) override {
    return answer(ctx, resp);
  }

  grpc::ServerUnaryReactor*
  ReportProcessFault(grpc::CallbackServerContext* ctx,
                     const ::ProcessFaultRequest*, ::Status* resp) override {
    return answer(ctx, resp);
  }

  static grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* ctx,
                                          ::Status* resp) {
    resp->set_code(0);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

/// An `echo_service` listening on a free loopback port while it lives.
class echo_server {
public:
  echo_server() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }

  ~echo_server() {
    server_->Shutdown();
  }

  echo_server(const echo_server&) = delete;
  echo_server& operator=(const echo_server&) = delete;

  /// "host:port" to dial.
  std::string address() const {
    return "127.0.0.1:" + std::to_string(port_);
  }

private:
  echo_service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

/// The `p` quantile (0..1) of `xs`, 0 when empty.
inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1));
  return xs[i];
}

/// HealthCheck round trips per second against `address`: `trips` calls from
/// `concurrency` threads, one channel each.
inline double health_checks_per_second(const std::string& address,
                                       size_t trips, size_t concurrency) {
  using clock_type = std::chrono::steady_clock;
  std::atomic<size_t> left{trips};
  std::vector<std::unique_ptr<::Recover::Stub>> stubs;
  for (size_t t = 0; t < concurrency; ++t) {
    auto channel = grpc::CreateChannel(address,
                                       grpc::InsecureChannelCredentials());
    // Connected before the clock starts: the load measures calls, not
    // connection set-up.
    channel->WaitForConnected(std::chrono::system_clock::now()
                              + std::chrono::seconds(10));
    stubs.push_back(::Recover::NewStub(channel));
  }
  std::vector<std::thread> threads;
  auto b0 = clock_type::now();
  for (size_t t = 0; t < concurrency; ++t)
    threads.emplace_back([&, t] {
      ::ClientInfo who;
      who.set_jobid("x");
      for (;;) {
        auto n = left.fetch_sub(1);
        if (n == 0 || n > trips) {
          left = 0;
          return;
        }
        ::Status resp;
        grpc::ClientContext c;
        stubs[t]->HealthCheck(&c, who, &resp);
      }
    });
  for (auto& th : threads)
    th.join();
  return static_cast<double>(trips)
         / std::chrono::duration<double>(clock_type::now() - b0).count();
}

/// Unary round trips per second to a trivial gRPC server: `trips` calls from
/// `concurrency` threads, one channel each.
inline double echo_round_trips_per_second(size_t trips, size_t concurrency) {
  echo_server echo;
  return health_checks_per_second(echo.address(), trips, concurrency);
}

/// Latencies in ms of `samples` sequential round trips to a trivial gRPC
/// server: the least a call-then-signal path can cost on loopback.
inline std::vector<double> echo_latencies(size_t samples) {
  using clock_type = std::chrono::steady_clock;
  echo_server echo;
  auto stub = ::Recover::NewStub(
    grpc::CreateChannel(echo.address(), grpc::InsecureChannelCredentials()));
  ::ClientInfo who;
  who.set_jobid("x");
  std::vector<double> result;
  for (size_t n = 0; n < samples + 10; ++n) {
    ::Status resp;
    grpc::ClientContext c;
    auto t0 = clock_type::now();
    stub->HealthCheck(&c, who, &resp);
    std::chrono::duration<double, std::milli> ms = clock_type::now() - t0;
    if (n >= 10) // the first calls connect
      result.push_back(ms.count());
  }
  return result;
}

/// Seconds for `trips` round trips to a trivial gRPC server from
/// `concurrency` threads: the bare cost of that many unary calls.
inline double echo_seconds(size_t trips, size_t concurrency) {
  return static_cast<double>(trips)
         / echo_round_trips_per_second(trips, concurrency);
}

} // namespace recoverd::bench
