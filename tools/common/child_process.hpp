#pragma once

/// A child process (used by the end-to-end tests and the simulator): start a
/// binary, read its output, signal it, wait for it.

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace recoverd {

/// A child process with its stdout on a pipe; stderr goes to a file.
class child_process {
public:
  child_process(const std::string& path, const std::vector<std::string>& args,
                const std::string& stderr_file) {
    int fds[2];
    if (::pipe(fds) != 0)
      return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0)
        ::dup2(err, STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(path.c_str()));
      for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(path.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }

  ~child_process() {
    if (running())
      kill(SIGKILL);
    wait();
    if (out_ >= 0)
      ::close(out_);
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Reads stdout until a line starting with `prefix`; returns the rest of
  /// that line, or "" after `timeout` or at end of output.
  std::string read_line_after(const std::string& prefix,
                              std::chrono::milliseconds timeout
                              = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      while (nl != std::string::npos) {
        auto line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0)
          return line.substr(prefix.size());
        nl = buf_.find('\n');
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
      if (left <= 0)
        return {};
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0)
        return {};
      char chunk[512];
      auto n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0)
        return {};
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  /// The child's process id (-1 when it could not be started).
  pid_t pid() const {
    return pid_;
  }

  /// Sends a signal.
  void kill(int sig) {
    if (pid_ > 0)
      ::kill(pid_, sig);
  }

  /// True while the child has not been reaped.
  bool running() {
    if (pid_ <= 0 || exited_)
      return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
      return false;
    }
    return true;
  }

  /// Waits up to `timeout` for the child to end; returns its exit code, 128+N
  /// for signal N, or -1 if it is still running.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > deadline)
        return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ <= 0)
      return -1;
    if (WIFEXITED(status_))
      return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_))
      return 128 + WTERMSIG(status_);
    return -1;
  }

private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
  bool exited_ = false;
  int status_ = 0;
};

} // namespace recoverd
