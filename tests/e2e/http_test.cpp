// End-to-end: the real recoverd binary against hostile HTTP clients: bytes
// that are not UTF-8 (which used to abort it) and slow clients (which used
// to starve /metrics).

#include <doctest/doctest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;
using namespace std::chrono_literals;

TEST_CASE("e2e: invalid UTF-8 in a path or query is a 400 and slow clients "
          "do not starve /metrics; the daemon keeps running") {
  temp_dir dir;
  child_process proc{RECOVERD_BIN,
                     {"--listen", "127.0.0.1:0", "--http-listen",
                      "127.0.0.1:0", "--data-dir", dir / "data",
                      "--http-request-timeout", "1s"},
                     dir / "daemon.log"};
  REQUIRE_FALSE(proc.read_line_after("recoverd: listening on ").empty());
  auto address = proc.read_line_after("recoverd: http on ");
  REQUIRE_FALSE(address.empty());
  httplib::Client http{"http://" + address};
  http.set_read_timeout(5, 0);
  for (const char* target : {"/%ff", "/api/v1/jobs/%ff",
                             "/api/v1/jobs/x/events?from=%ff",
                             "/metrics?%c0%af=1"}) {
    CAPTURE(target);
    auto res = http.Get(target);
    REQUIRE(res);
    CHECK(res->status == 400);
    auto body = nlohmann::json::parse(res->body);
    CHECK(body["error"]["status"] == "INVALID_ARGUMENT");
    REQUIRE(proc.running());
  }
  MESSAGE("20 connections dribbling header bytes");
  auto port = static_cast<uint16_t>(
    std::stoi(address.substr(address.rfind(':') + 1)));
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
            == 0);
    slow.push_back(fd);
  }
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaa";
  for (size_t k = 0; k < head.size() / 2; ++k) {
    for (auto fd : slow)
      ::send(fd, &head[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    auto t = std::chrono::steady_clock::now();
    auto res = http.Get("/metrics");
    auto took = std::chrono::steady_clock::now() - t;
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(took < 1s);
    std::this_thread::sleep_for(100ms);
  }
  for (auto fd : slow)
    ::close(fd);
  CHECK(proc.running());
  proc.kill(SIGTERM);
  CHECK(proc.wait() == 0);
}
