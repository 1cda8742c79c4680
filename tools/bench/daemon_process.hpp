#pragma once

/// The daemon in a child process of a benchmark, so that what it uses
/// (memory, CPU, page faults) is its own and not the clients'.

#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "services/app.hpp"
#include "tools/bench/process_stats.hpp"

namespace recoverd::bench {

/// The daemon (`app::start(opts)`) in a child process, driven over two
/// pipes: it writes its port, then answers every 'r' with its VmRSS (KiB),
/// every 'a' with its `allocated_bytes`, every 'u' with its `usage`, and
/// stops at 'q'. Construct it before the benchmark starts any thread: it
/// forks.
class daemon_process {
public:
  explicit daemon_process(const app_options& opts) {
    int up[2];
    int down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0)
      fail("pipe failed");
    std::fflush(stdout);
    pid_ = ::fork();
    if (pid_ < 0)
      fail("fork failed");
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      ::_exit(serve(opts, down[0], up[1]));
    }
    ::close(up[1]);
    ::close(down[0]);
    from_ = up[0];
    to_ = down[1];
    port_ = std::stoi(read_line());
  }

  ~daemon_process() {
    stop();
  }

  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  /// Stops the daemon and waits for its process. Idempotent.
  void stop() {
    if (pid_ <= 0)
      return;
    send('q');
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(from_);
    ::close(to_);
    pid_ = -1;
  }

  /// Where the daemon listens.
  std::string address() const {
    return "127.0.0.1:" + std::to_string(port_);
  }

  /// The daemon's VmRSS in KiB.
  long rss() {
    send('r');
    return std::stol(read_line());
  }

  /// The daemon's live heap in bytes (jemalloc's count); -1 when unknown.
  long allocated() {
    send('a');
    return std::stol(read_line());
  }

  /// What the daemon's process has used so far.
  usage used() {
    send('u');
    usage x;
    if (std::sscanf(read_line().c_str(), "%lf %ld %ld", &x.cpu_ms, &x.faults,
                    &x.switches)
        != 3)
      fail("the daemon process answered garbage");
    return x;
  }

private:
  [[noreturn]] static void fail(const std::string& what) {
    std::fprintf(stderr, "daemon process: %s\n", what.c_str());
    std::exit(1);
  }

  static int serve(const app_options& opts, int in, int out) {
    configure_logging("error", "text");
    auto daemon = app::start(opts);
    if (!daemon) {
      std::fprintf(stderr, "daemon process: %s\n",
                   message_of(daemon.error()).c_str());
      return 1;
    }
    auto say = [out](const std::string& line) {
      auto text = line + "\n";
      return ::write(out, text.data(), text.size())
        == static_cast<ssize_t>(text.size());
    };
    if (!say(std::to_string((*daemon)->port())))
      return 1;
    char c = 0;
    while (::read(in, &c, 1) == 1 && c != 'q') {
      if (c == 'r' && !say(std::to_string(rss_kib())))
        return 1;
      if (c == 'a' && !say(std::to_string(allocated_bytes())))
        return 1;
      if (c == 'u') {
        auto x = usage_now();
        char line[96];
        std::snprintf(line, sizeof(line), "%.3f %ld %ld", x.cpu_ms, x.faults,
                      x.switches);
        if (!say(line))
          return 1;
      }
    }
    (*daemon)->stop();
    return 0;
  }

  void send(char c) {
    if (::write(to_, &c, 1) != 1)
      fail("the daemon process is gone");
  }

  std::string read_line() {
    std::string line;
    char c = 0;
    while (::read(from_, &c, 1) == 1 && c != '\n')
      line.push_back(c);
    if (line.empty())
      fail("the daemon process failed");
    return line;
  }

  pid_t pid_ = -1;
  int from_ = -1;
  int to_ = -1;
  int port_ = 0;
};

} // namespace recoverd::bench
