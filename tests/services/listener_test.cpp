// Connection caps of the gRPC listener, over real sockets: a flood from one
// peer address is cut at its cap while other peers are served, and the total
// cap frees up as connections close.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "fixtures/eventually.hpp"
#include "fixtures/service_fixture.hpp"
#include "services/metrics.hpp"

namespace {

using namespace recoverd;
using recoverd::test::eventually;
using namespace std::chrono_literals;

// A TCP connection to 127.0.0.1:`port` from the loopback address `from`.
int connect_from(const char* from, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// True once the server closed `fd` (EOF or reset) within `within`.
bool closed_by_server(int fd, std::chrono::milliseconds within) {
  pollfd p{fd, POLLIN, 0};
  auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::poll(&p, 1, 50) > 0) {
      char buf[256];
      auto n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN))
        return true;
    }
  }
  return false;
}

// A GetJob from a fresh channel (so a fresh connection) from 127.0.0.1.
grpc::StatusCode probe(const std::string& address) {
  auto channel = grpc::CreateChannel(address,
                                     grpc::InsecureChannelCredentials());
  auto stub = recoverd::platform::v1::Platform::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 2s);
  recoverd::platform::v1::JobRef req;
  req.set_jobid("nobody");
  recoverd::platform::v1::JobStatus resp;
  return stub->GetJob(&ctx, req, &resp).error_code();
}

} // namespace

TEST_CASE("listener: connections over the per-peer cap are closed at once, "
          "other peers are served; the total cap frees as connections "
          "close") {
  test::temp_dir dir;
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir / "db";
  opts.worker_threads = 2;
  opts.connections.total = 6;
  opts.connections.per_peer = 3;
  auto started = app::start(opts);
  REQUIRE_MESSAGE(started, (started ? "" : message_of(started.error())));
  auto& daemon = **started;
  MESSAGE("5 connections from 127.0.0.2: 3 held, 2 closed by the server");
  std::vector<int> flood;
  for (int i = 0; i < 5; ++i)
    flood.push_back(connect_from("127.0.0.2", daemon.port()));
  REQUIRE(eventually([&] {
    auto f = daemon.connections();
    return f.accepted + f.refused_peer == 5;
  }));
  auto f = daemon.connections();
  CHECK(f.accepted == 3);
  CHECK(f.refused_peer == 2);
  CHECK(f.open == 3);
  CHECK(closed_by_server(flood[3], 2s));
  CHECK(closed_by_server(flood[4], 2s));
  CHECK_FALSE(closed_by_server(flood[0], 200ms));
  MESSAGE("another peer is still served");
  CHECK(probe(daemon.address()) == grpc::StatusCode::NOT_FOUND);
  REQUIRE(eventually([&] { return daemon.connections().open == 3; }));
  MESSAGE("3 more from 127.0.0.3 fill the total cap of 6: 127.0.0.1 is "
          "refused");
  std::vector<int> second;
  for (int i = 0; i < 3; ++i)
    second.push_back(connect_from("127.0.0.3", daemon.port()));
  REQUIRE(eventually([&] { return daemon.connections().open == 6; }));
  CHECK(probe(daemon.address()) == grpc::StatusCode::UNAVAILABLE);
  CHECK(daemon.connections().refused_total >= 1);
  MESSAGE("once those close, 127.0.0.1 is served again");
  for (auto fd : second)
    ::close(fd);
  REQUIRE(eventually([&] { return daemon.connections().open == 3; }));
  CHECK(probe(daemon.address()) == grpc::StatusCode::NOT_FOUND);
  MESSAGE("/metrics shows the counts");
  request_metrics metrics;
  metrics.set_connection_source([&] { return daemon.connections(); });
  std::string page;
  metrics.render(page);
  CHECK(page.find("recoverd_grpc_connections_refused_total{reason=\"peer\"} 2")
        != std::string::npos);
  CHECK(page.find("recoverd_grpc_connections_open ") != std::string::npos);
  for (auto fd : flood)
    ::close(fd);
}

TEST_CASE("listener: a bad or taken address is a clear error") {
  auto bad = grpc_listener::open("127.0.0.1:99999", {});
  REQUIRE_FALSE(bad);
  CHECK(message_of(bad.error()).find("port") != std::string::npos);
  auto none = grpc_listener::open("no-port", {});
  REQUIRE_FALSE(none);
  auto first = grpc_listener::open("127.0.0.1:0", {});
  REQUIRE(first);
  auto taken = grpc_listener::open(
    "127.0.0.1:" + std::to_string((*first)->port()), {});
  REQUIRE_FALSE(taken);
  CHECK(message_of(taken.error()).find("in use") != std::string::npos);
}
