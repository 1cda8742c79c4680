// End-to-end: the real recoverd binary against what breaks a daemon in
// production rather than in a protocol test: a full disk and a flood of idle
// connections. Neither may abort it or stop its log for good, and nothing it
// acknowledged may be lost.

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;
using namespace std::chrono_literals;

namespace {

const std::string daemon_bin = RECOVERD_BIN;
const std::string ctl_bin = RECOVERCTL_BIN;

// A job whose spec is about `pods` x 120 bytes: big puts fill a disk fast.
std::string job_json(const std::string& id, int pods) {
  std::ostringstream out;
  out << R"({"jobId": ")" << id
      << R"(", "name": "fill", "namespace": "ml", "framework": "pytorch",)"
      << R"( "recoverStrategies": ["retry"], "pods": [)";
  for (int p = 0; p < pods; ++p) {
    out << (p ? "," : "") << R"({"podRank": )" << p << R"(, "uid": "uid-)"
        << id << "-" << p << R"(", "nodeName": "node-)" << p
        << R"(", "running": true, "devices": [{"deviceId": "0", "rankId": ")"
        << p << R"("}]})";
  }
  out << "]}";
  return out.str();
}

// Puts `id` with recoverctl; returns its exit code and output.
std::pair<int, std::string> put(const temp_dir& dir, const std::string& server,
                                const std::string& id, int pods) {
  auto file = dir / (id + ".json");
  {
    std::ofstream f{file};
    f << job_json(id, pods);
  }
  return run_command(ctl_bin + " --server " + server + " --timeout 10 job put "
                     + file);
}

// Starts the daemon; returns its gRPC address ("" when it did not start).
std::string start(std::unique_ptr<child_process>& proc, const temp_dir& dir,
                  const std::string& data, const std::string& listen,
                  std::vector<std::string> prefix = {},
                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--listen", listen, "--data-dir", data};
  if (std::find(extra.begin(), extra.end(), "--http-listen") == extra.end()) {
    args.emplace_back("--http-listen");
    args.emplace_back("off");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto bin = daemon_bin;
  if (!prefix.empty()) {
    bin = prefix.front();
    std::vector<std::string> full{prefix.begin() + 1, prefix.end()};
    full.push_back(daemon_bin);
    full.insert(full.end(), args.begin(), args.end());
    args = std::move(full);
  }
  proc = std::make_unique<child_process>(bin, args, dir / "daemon.log");
  return proc->read_line_after("recoverd: listening on ");
}

// The HTTP status of GET `path` on `http` ("host:port"); -1 without answer.
int http_status(const std::string& http, const std::string& path) {
  auto colon = http.rfind(':');
  httplib::Client c{http.substr(0, colon), std::stoi(http.substr(colon + 1))};
  c.set_read_timeout(5);
  auto res = c.Get(path.c_str());
  return res ? res->status : -1;
}

// The daemon's grpc.health.v1 status for the whole server ("SERVING",
// "NOT_SERVING", or the failed call's message), through a generic call: the
// response is one enum field, so its bytes are read directly.
std::string grpc_health(const std::string& address) {
  auto channel = grpc::CreateChannel(address,
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub{channel};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::ByteBuffer request; // an empty HealthCheckRequest: service ""
  grpc::Slice empty{std::string{}};
  request = grpc::ByteBuffer{&empty, 1};
  grpc::ByteBuffer response;
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions{},
                 &request, &response, [&](grpc::Status st) {
                   std::lock_guard<std::mutex> guard{mtx};
                   status = std::move(st);
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> guard{mtx};
  cv.wait(guard, [&] { return done; });
  if (!status.ok())
    return status.error_message();
  std::vector<grpc::Slice> slices;
  (void) response.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // Field 1, varint: 0x08 then 1 (SERVING) or 2 (NOT_SERVING).
  if (bytes.size() == 2 && bytes[0] == 0x08)
    return bytes[1] == 1 ? "SERVING" : bytes[1] == 2 ? "NOT_SERVING"
                                                       : "UNKNOWN";
  return "unparsed response";
}

// A small tmpfs mounted for the life of the test (needs CAP_SYS_ADMIN).
struct small_disk {
  std::string path;
  bool mounted = false;

  small_disk(const std::string& at, const std::string& size) : path(at) {
    ::mkdir(at.c_str(), 0755);
    mounted = ::mount("tmpfs", at.c_str(), "tmpfs", 0,
                      ("size=" + size).c_str())
              == 0;
  }

  ~small_disk() {
    if (mounted)
      ::umount2(path.c_str(), MNT_DETACH);
  }
};

// Fills the file system at `dir` with one file until it is full.
void fill(const std::string& file) {
  std::ofstream f{file, std::ios::binary};
  std::string chunk(64 * 1024, 'x');
  while (f.write(chunk.data(), static_cast<std::streamsize>(chunk.size())))
    f.flush();
}

std::string read_file(const std::string& path) {
  std::ifstream f{path};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("e2e: a full disk makes changes UNAVAILABLE with the reason, "
          "never aborts the daemon, and writing resumes once space is back; "
          "nothing acknowledged is lost") {
  temp_dir dir;
  small_disk disk{dir / "disk", "24m"};
  if (!disk.mounted) {
    // Mounting needs CAP_SYS_ADMIN, which CI (root, it installs packages)
    // has. Say so loudly instead of passing silently.
    FAIL_CHECK("cannot mount a tmpfs here (not root?): the full-disk test "
               "did not run");
    return;
  }
  auto data = disk.path + "/data";
  // A 24 MB disk: RocksDB preallocates ~18 MB for its WAL, so the daemon's
  // reserve must be small here.
  const std::vector<std::string> reserve{"--min-free-space", "2m"};
  std::unique_ptr<child_process> proc;
  auto with_http = reserve;
  with_http.insert(with_http.end(), {"--http-listen", "127.0.0.1:0"});
  auto address = start(proc, dir, data, "127.0.0.1:0", {}, with_http);
  REQUIRE_FALSE(address.empty());
  auto http = proc->read_line_after("recoverd: http on ");
  REQUIRE_FALSE(http.empty());
  CHECK(http_status(http, "/readyz") == 200);
  CHECK(grpc_health(address) == "SERVING");
  std::vector<std::string> acknowledged;
  auto put_ok = [&](const std::string& id) {
    auto [rc, out] = put(dir, address, id, 50);
    REQUIRE_MESSAGE(rc == 0, out);
    acknowledged.push_back(id);
  };
  for (int i = 0; i < 3; ++i)
    put_ok("ok-" + std::to_string(i));
  MESSAGE("fill the disk: changes are refused with the reason");
  fill(disk.path + "/filler");
  auto [rc, refused] = put(dir, address, "while-full", 400);
  CHECK(rc == 1);
  CHECK_MESSAGE(refused.find("No space left") != std::string::npos, refused);
  CHECK(put(dir, address, "while-full-2", 10).first == 1);
  REQUIRE_MESSAGE(proc->running(), read_file(dir / "daemon.log"));
  MESSAGE("reads still answer");
  CHECK(run_command(ctl_bin + " --server " + address + " job get ok-0").first
        == 0);
  CHECK(run_command(ctl_bin + " --server " + address + " job get while-full")
          .first
        != 0);
  auto [src, status] = run_command(ctl_bin + " --server " + address
                                   + " status");
  CHECK(src == 1); // unhealthy: the journal refuses appends
  CHECK_MESSAGE(status.find("No space left") != std::string::npos, status);
  MESSAGE("not ready while the log cannot be written; alive all the same");
  CHECK(http_status(http, "/readyz") == 503);
  CHECK(http_status(http, "/healthz") == 200);
  CHECK(grpc_health(address) == "NOT_SERVING");
  MESSAGE("free the disk: the daemon writes again without a restart");
  ::unlink((disk.path + "/filler").c_str());
  bool resumed = false;
  for (int i = 0; i < 50 && !resumed; ++i) {
    resumed = put(dir, address, "after", 10).first == 0;
    if (!resumed)
      std::this_thread::sleep_for(200ms);
  }
  REQUIRE_MESSAGE(resumed, read_file(dir / "daemon.log"));
  acknowledged.push_back("after");
  CHECK(http_status(http, "/readyz") == 200);
  CHECK(grpc_health(address) == "SERVING");
  put_ok("after-2");
  MESSAGE("full again, then a restart while full: a clear refusal, no abort");
  fill(disk.path + "/filler");
  CHECK(put(dir, address, "while-full-3", 10).first == 1);
  proc->kill(SIGTERM);
  CHECK(proc->wait() == 0);
  {
    child_process full{daemon_bin,
                       {"--listen", "127.0.0.1:0", "--data-dir", data,
                        "--http-listen", "off", "--min-free-space", "2m"},
                       dir / "full.log"};
    CHECK(full.wait() == 1);
    auto why = read_file(dir / "full.log");
    CHECK_MESSAGE(why.find("No space left") != std::string::npos, why);
  }
  ::unlink((disk.path + "/filler").c_str());
  MESSAGE("space back: every acknowledged job is there");
  address = start(proc, dir, data, address, {}, reserve);
  REQUIRE_FALSE(address.empty());
  for (const auto& id : acknowledged) {
    CAPTURE(id);
    CHECK(run_command(ctl_bin + " --server " + address + " job get " + id)
            .first
          == 0);
  }
  put_ok("after-restart");
  proc->kill(SIGTERM);
  CHECK(proc->wait() == 0);
}

TEST_CASE("e2e: started with a soft limit of 1024 open files, the daemon "
          "raises it and keeps serving and writing through 1,100 idle "
          "connections") {
  // This process needs the descriptors too.
  rlimit own{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &own) == 0);
  if (own.rlim_cur < 4096 && own.rlim_max >= 4096) {
    own.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &own) == 0);
  }
  REQUIRE_MESSAGE(own.rlim_cur >= 2048, "this test needs 2048 descriptors");
  temp_dir dir;
  std::unique_ptr<child_process> proc;
  auto address = start(proc, dir, dir / "data", "127.0.0.1:0",
                       {"/usr/bin/prlimit", "--nofile=1024:4096", "--"});
  REQUIRE_FALSE(address.empty());
  MESSAGE("the soft limit is now the hard one");
  // prlimit execs the daemon: same pid; its limits as the kernel has them.
  auto limits = read_file("/proc/" + std::to_string(proc->pid()) + "/limits");
  auto line = limits.substr(limits.find("Max open files"));
  line = line.substr(0, line.find('\n'));
  std::istringstream fields{line.substr(std::string{"Max open files"}.size())};
  std::string soft;
  std::string hard;
  fields >> soft >> hard;
  CHECK_MESSAGE(soft == "4096", line);
  CHECK_MESSAGE(hard == "4096", line);
  MESSAGE("1,100 silent TCP connections from 127.0.0.2: the daemon holds "
          "512 (its cap per peer) and closes the rest at once");
  auto port = static_cast<uint16_t>(
    std::stoi(address.substr(address.rfind(':') + 1)));
  std::vector<int> idle;
  for (int i = 0; i < 1100; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.2", &local.sin_addr);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local))
            == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
            == 0);
    idle.push_back(fd);
  }
  auto open_fds = [&] {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(proc->pid()) + "/fd"))
      ++n;
    return n;
  };
  std::this_thread::sleep_for(1s);
  // The daemon's own descriptors (log, pipes, epoll) are well under 300.
  auto held = open_fds();
  CHECK_MESSAGE(held >= 512, held);
  CHECK_MESSAGE(held < 512 + 300, held);
  std::this_thread::sleep_for(500ms);
  MESSAGE("new clients are still served and changes still written");
  for (int i = 0; i < 20; ++i) {
    auto [prc, out] = put(dir, address, "job-" + std::to_string(i), 200);
    CHECK_MESSAGE(prc == 0, out);
  }
  for (auto fd : idle)
    ::close(fd);
  CHECK(proc->running());
  proc->kill(SIGTERM);
  CHECK(proc->wait() == 0);
}
