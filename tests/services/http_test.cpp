// The HTTP gateway against hostile clients, over real loopback sockets:
// bytes that are not UTF-8 in the path and the query, labels that clients
// could multiply, and slow clients that hold connections open.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/error.hpp"
#include "actors/model/text.hpp"
#include "fixtures/flow_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "platform.grpc.pb.h"
#include "services/app.hpp"

using namespace recoverd;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

/// A daemon with an HTTP port.
struct http_fixture {
  test::temp_dir dir;
  std::unique_ptr<app> daemon;
  std::shared_ptr<grpc::Channel> channel;

  explicit http_fixture(std::chrono::milliseconds request_timeout = 5s) {
    app_options opts;
    opts.listen = "127.0.0.1:0";
    opts.http_listen = "127.0.0.1:0";
    opts.http_request_timeout = request_timeout;
    opts.data_dir = dir / "db";
    opts.worker_threads = 2;
    test::quick_waits(opts.registry.job.waits);
    auto x = app::start(opts);
    REQUIRE_MESSAGE(x, (x ? "" : message_of(x.error())));
    daemon = std::move(*x);
    REQUIRE(daemon->http_port() > 0);
    channel = grpc::CreateChannel(daemon->address(),
                                  grpc::InsecureChannelCredentials());
  }

  /// A connected loopback socket to the HTTP port, or -1.
  int connect_http() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(daemon->http_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
        != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  /// Sends `request` as is and reads the answer until the server closes.
  std::string raw(const std::string& request) const {
    int fd = connect_http();
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(request.size()));
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0)
        break;
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  /// GET `target` (sent byte for byte, with Connection: close).
  std::pair<int, std::string> get(const std::string& target) const {
    auto out = raw("GET " + target
                   + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    REQUIRE_MESSAGE(out.rfind("HTTP/1.1 ", 0) == 0,
                    "no HTTP answer for " << excerpt(target) << ": "
                                          << excerpt(out));
    auto status = std::stoi(out.substr(9, 3));
    auto body = out.find("\r\n\r\n");
    return {status, body == std::string::npos ? "" : out.substr(body + 4)};
  }

  std::string metrics() const {
    auto [status, body] = get("/metrics");
    REQUIRE(status == 200);
    return body;
  }

  /// Calls `method` with an empty message over a generic stub.
  grpc::Status call(const std::string& method) const {
    grpc::GenericStub stub{channel};
    grpc::Slice empty;
    grpc::ByteBuffer request{&empty, 1};
    grpc::ByteBuffer response;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 10s);
    std::promise<grpc::Status> done;
    stub.UnaryCall(&c, method, grpc::StubOptions{}, &request, &response,
                   [&](grpc::Status st) { done.set_value(std::move(st)); });
    return done.get_future().get();
  }
};

/// The JSON error of an answer; checks its shape and its code.
json error_of(int status, const std::string& body) {
  INFO("body: " << excerpt(body));
  auto x = json::parse(body); // throws (fails the test) on invalid JSON
  CHECK(x["error"]["code"].get<int>() == status);
  CHECK_FALSE(x["error"]["message"].get<std::string>().empty());
  return x["error"];
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto i = text.find(what); i != std::string::npos;
       i = text.find(what, i + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("text: UTF-8 checks and bounded excerpts") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("job-1 \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  CHECK_FALSE(is_utf8("\xFF"));
  CHECK_FALSE(is_utf8("\xC3"));             // cut short
  CHECK_FALSE(is_utf8("\xC0\xAF"));         // overlong '/'
  CHECK_FALSE(is_utf8("\xED\xA0\x80"));     // surrogate
  CHECK_FALSE(is_utf8("\xF4\x90\x80\x80")); // above U+10FFFF
  CHECK(excerpt("abc") == "abc");
  CHECK(excerpt("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(is_utf8(excerpt("\xC3(\xE2\x82")));
  auto long_text = std::string(1'000'000, 'x');
  auto cut = excerpt(long_text);
  CHECK(cut == std::string(256, 'x') + "\xE2\x80\xA6(1000000 bytes)");
  // A cut never splits a character.
  std::string euros;
  for (int i = 0; i < 100; ++i)
    euros += "\xE2\x82\xAC";
  cut = excerpt(euros);
  CHECK(is_utf8(cut));
  CHECK(cut.find("(300 bytes)") != std::string::npos);
  CHECK(cut.size() == 255 + std::string("\xE2\x80\xA6(300 bytes)").size());
}

TEST_CASE("http: invalid UTF-8 in a path or query is a 400 with a valid JSON "
          "error, and the daemon goes on serving") {
  http_fixture fx;
  struct bad {
    const char* target;
    const char* names; // part of the message
  };
  for (auto x : {bad{"/%ff", "request path"},
                 bad{"/%ff%fe/%c0%af", "request path"},
                 bad{"/api/v1/jobs/%ff", "request path"},
                 bad{"/api/v1/jobs/a%ed%a0%80b/events", "request path"},
                 bad{"/api/v1/jobs/job/events?from=%ff", "from"},
                 bad{"/api/v1/jobs/job/at?time=%e2%82", "time"},
                 bad{"/api/v1/jobs?namespace=%c3%28", "namespace"},
                 bad{"/api/v1/watch?job=%80", "job"},
                 bad{"/metrics?%ff=1", "parameter name"},
                 bad{"/nowhere?x=%fe", "x"}}) {
    CAPTURE(x.target);
    auto [status, body] = fx.get(x.target);
    CHECK(status == 400);
    auto err = error_of(status, body);
    CHECK(err["status"] == "INVALID_ARGUMENT");
    auto msg = err["message"].get<std::string>();
    CHECK(is_utf8(msg));
    CHECK_MESSAGE(msg.find(x.names) != std::string::npos, msg);
    CHECK(msg.find("UTF-8") != std::string::npos);
  }
  MESSAGE("valid UTF-8 that is no route is a 404 naming the path");
  auto [status, body] = fx.get("/caf%C3%A9");
  CHECK(status == 404);
  CHECK(error_of(status, body)["message"] == "no such resource: /caf\xC3\xA9");
  MESSAGE("a long value is echoed cut to 256 bytes with its size");
  std::tie(status, body) = fx.get("/api/v1/jobs/job/events?from="
                                  + std::string(5000, '7') + "x");
  CHECK(status == 400);
  auto msg = error_of(status, body)["message"].get<std::string>();
  CHECK(msg.find(std::string(256, '7') + "\xE2\x80\xA6(5001 bytes)")
        != std::string::npos);
  CHECK(msg.size() < 400);
  MESSAGE("still serving");
  auto text = fx.metrics();
  CHECK(text.find("recoverd_http_requests_total{route=\"other\",code=\"400\"}")
        != std::string::npos);
  std::tie(status, body) = fx.get("/api/v1/jobs");
  CHECK(status == 200);
  CHECK(json::parse(body).is_object());
}

TEST_CASE("metrics: unknown HTTP paths and gRPC methods are one label "
          "\"other\"; known routes are labelled by pattern") {
  http_fixture fx;
  // Warm up the series every page has, then measure.
  fx.get("/api/v1/jobs/a/events");
  fx.get("/nope");
  CHECK(fx.call("/x.Y/Z").error_code() == grpc::StatusCode::UNIMPLEMENTED);
  auto before = fx.metrics();
  MESSAGE("/metrics is " << before.size() << " bytes before");
  for (int i = 0; i < 500; ++i) {
    auto n = std::to_string(i);
    CHECK(fx.get("/nope/" + n).first == 404);
    CHECK(fx.get("/api/v1/jobs/a/b" + n).first == 404);
    CHECK(fx.get("/api/v1/jobs/id-" + n + "/events").first == 404);
    CHECK(fx.call("/x.Y/Z" + n).error_code()
          == grpc::StatusCode::UNIMPLEMENTED);
  }
  auto after = fx.metrics();
  MESSAGE("/metrics is " << after.size() << " bytes after");
  // Only the counts change (a few digits each).
  CHECK(after.size() < before.size() + 256);
  CHECK(after.find("Z499") == std::string::npos);
  CHECK(after.find("id-499") == std::string::npos);
  CHECK(after.find("/b499") == std::string::npos);
  CHECK(count_of(after, "route=\"other\"") == 1);
  CHECK(after.find("recoverd_http_requests_total{route=\"other\","
                   "code=\"404\"} 1001")
        != std::string::npos);
  CHECK(after.find("recoverd_http_requests_total{route=\"/api/v1/jobs/{id}/"
                   "events\",code=\"404\"} 501")
        != std::string::npos);
  CHECK(after.find("recoverd_grpc_requests_total{method=\"other\",code=\""
                   "UNIMPLEMENTED\"} 501")
        != std::string::npos);
  MESSAGE("known methods keep their name");
  CHECK(fx.call("/grpc.health.v1.Health/Check").ok());
  after = fx.metrics();
  CHECK(after.find("recoverd_grpc_requests_total{method=\"/grpc.health.v1."
                   "Health/Check\",code=\"OK\"} 1")
        != std::string::npos);
}

/// The value of the sample line that starts with `name` (labels included)
/// in a /metrics page; -1 if there is none.
double metric_value(const std::string& text, const std::string& name) {
  auto i = text.find("\n" + name);
  if (i == std::string::npos)
    return -1;
  auto space = text.find(' ', i + name.size());
  return std::stod(text.substr(space + 1, text.find('\n', space) - space));
}

TEST_CASE("metrics: build info and process series from /proc/self") {
  http_fixture fx;
  auto text = fx.metrics();
  for (const auto* type :
       {"# TYPE recoverd_build_info gauge",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_open_fds gauge", "# TYPE process_threads gauge",
        "# TYPE process_start_time_seconds gauge"})
    CHECK_MESSAGE(text.find(type) != std::string::npos, type);
  MESSAGE("build info names this version");
  CHECK(metric_value(text, std::string{"recoverd_build_info{version=\""}
                             + RECOVERD_VERSION + "\"}")
        == 1);
  MESSAGE("the process figures are plausible");
  CHECK(metric_value(text, "process_resident_memory_bytes ") > 1 << 20);
  CHECK(metric_value(text, "process_open_fds ") > 0);
  CHECK(metric_value(text, "process_threads ") >= 1);
  auto now = std::chrono::duration<double>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  auto start = metric_value(text, "process_start_time_seconds ");
  CHECK(start > now - 24 * 3600);
  CHECK(start <= now + 1);
}

TEST_CASE("http: slow clients (slowloris) and idle connections hold no "
          "request thread and are closed after the request timeout") {
  constexpr auto timeout = 1500ms;
  http_fixture fx{timeout};
  // More slow connections than the server has request threads (16).
  constexpr int slow_count = 24;
  constexpr int idle_count = 8;
  std::vector<int> slow;
  std::vector<int> idle;
  auto opened = std::chrono::steady_clock::now();
  for (int i = 0; i < slow_count; ++i) {
    slow.push_back(fx.connect_http());
    REQUIRE(slow.back() >= 0);
  }
  for (int i = 0; i < idle_count; ++i) {
    idle.push_back(fx.connect_http());
    REQUIRE(idle.back() >= 0);
  }
  // Each slow client sends one header byte every 100 ms, well within any
  // per-read timeout, and never ends its head.
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
                           + std::string(200, 'a');
  std::atomic<bool> done{false};
  std::thread dribbler{[&] {
    for (size_t k = 0; k < head.size() && !done; ++k) {
      for (auto fd : slow)
        ::send(fd, &head[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(100ms);
    }
  }};
  MESSAGE("while they dribble, /metrics and /api/v1 answer at once");
  std::this_thread::sleep_for(300ms);
  if (std::chrono::steady_clock::now() - opened < timeout - 200ms)
    for (auto fd : slow) {
      pollfd p{fd, POLLIN, 0};
      CHECK(::poll(&p, 1, 0) == 0); // not closed before the timeout
    }
  for (int i = 0; i < 5; ++i) {
    for (const char* target : {"/metrics", "/api/v1/jobs"}) {
      auto t = std::chrono::steady_clock::now();
      auto [status, body] = fx.get(target);
      auto took = std::chrono::steady_clock::now() - t;
      CHECK(status == 200);
      CHECK_MESSAGE(took < 1s, target << " took "
                                      << std::chrono::duration<double>(took)
                                           .count()
                                      << " s");
    }
  }
  MESSAGE("a keep-alive client makes several requests on one connection");
  {
    httplib::Client c{"127.0.0.1", fx.daemon->http_port()};
    c.set_keep_alive(true);
    c.set_read_timeout(5, 0);
    for (int i = 0; i < 3; ++i) {
      auto res = c.Get("/api/v1/jobs");
      REQUIRE(res);
      CHECK(res->status == 200);
    }
  }
  MESSAGE("the server closes every slow and idle connection after the "
          "timeout");
  // Closed by the timeout, with a little slack for a loaded machine.
  auto by = opened + timeout + 2s;
  auto closed_by_server = [&](int fd, std::string& got) {
    char buf[512];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    by - std::chrono::steady_clock::now())
                    .count();
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0)
        return false; // still open
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        return true;
      got.append(buf, static_cast<size_t>(n));
    }
  };
  // The 408 is best effort: bytes the client sends after the close make
  // the kernel reset the connection, which may discard the answer.
  size_t answered = 0;
  for (auto fd : slow) {
    std::string got;
    CHECK(closed_by_server(fd, got));
    CHECK_MESSAGE((got.empty() || got.rfind("HTTP/1.1 408 ", 0) == 0),
                  excerpt(got));
    answered += got.empty() ? 0 : 1;
  }
  MESSAGE(answered << " of " << slow_count << " slow clients read the 408");
  for (auto fd : idle) {
    std::string got;
    CHECK(closed_by_server(fd, got));
    CHECK(got.empty());
  }
  done = true;
  dribbler.join();
  for (auto fd : slow)
    ::close(fd);
  for (auto fd : idle)
    ::close(fd);
  MESSAGE("and it still serves, and counts what it closed");
  auto text = fx.metrics();
  CHECK(text.find("\nrecoverd_http_connections_closed_total{reason=\""
                  "timeout\"} "
                  + std::to_string(slow_count + idle_count) + "\n")
        != std::string::npos);
}

TEST_CASE("bad input: PutJob refuses a job id with '/', and error messages "
          "echo a huge input cut to 256 bytes with its size") {
  http_fixture fx;
  auto platform = recoverd::platform::v1::Platform::NewStub(fx.channel);
  auto put = [&](const recoverd::platform::v1::JobSpec& spec) {
    recoverd::platform::v1::PutJobRequest req;
    *req.mutable_spec() = spec;
    recoverd::platform::v1::PutJobResponse resp;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 10s);
    return platform->PutJob(&c, req, &resp);
  };
  auto st = put(test::two_pod_spec("team/job", {"recover", "dump"}));
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_MESSAGE(st.error_message().find("jobId: \"team/job\" contains '/'")
                  != std::string::npos,
                st.error_message());
  MESSAGE("nothing was created");
  auto [status, body] = fx.get("/api/v1/jobs");
  REQUIRE(status == 200);
  CHECK(json::parse(body).value("jobs", json::array()).empty());
  MESSAGE("a 1 MB strategy name comes back cut");
  auto spec = test::two_pod_spec("job", {"recover", "dump"});
  spec.add_recoverstrategies(std::string(1'000'000, 's'));
  st = put(spec);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().size() < 1024);
  CHECK_MESSAGE(st.error_message().find(std::string(256, 's')
                                        + "\xE2\x80\xA6(1000000 bytes)")
                  != std::string::npos,
                excerpt(st.error_message()));
  CHECK(put(test::two_pod_spec("job", {"recover", "dump"})).ok());
}
