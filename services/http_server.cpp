#include "services/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "actors/log.hpp"

namespace recoverd {

namespace {

using clock_type = std::chrono::steady_clock;

// A request head longer than this is handed to the parser unfinished: it
// answers 414 or 400.
constexpr size_t max_head = 16 * 1024;

// How long a write may wait for the client to take data.
constexpr int write_timeout_ms = 5000;

/// One client connection, owned by whoever holds it: the waiter, the ready
/// queue or a request thread.
struct connection {
  int sock = -1;
  /// TLS: the session (the socket is non-blocking then); null: plaintext.
  SSL* ssl = nullptr;
  /// TLS: the handshake is done.
  bool handshaken = false;
  /// TLS: the session waits for the socket to take data, not to give it.
  bool want_write = false;
  /// TLS: the names of the client certificate, verified by the handshake.
  std::vector<std::string> cert_names;
  /// Bytes read but not yet consumed by the parser (from `used` on).
  std::string in;
  size_t used = 0;
  /// When the next request head must be complete.
  clock_type::time_point deadline;
  /// Requests answered on this connection.
  size_t served = 0;

  size_t buffered() const {
    return in.size() - used;
  }

  // True once the buffer holds a whole request head (or too much to wait
  // for more).
  bool head_complete() const {
    std::string_view rest{in.data() + used, buffered()};
    return rest.find("\r\n\r\n") != std::string_view::npos
           || rest.find("\n\n") != std::string_view::npos
           || rest.size() >= max_head;
  }

  // Drops consumed bytes.
  void compact() {
    in.erase(0, used);
    used = 0;
  }
};

void close_socket(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

void close_connection(connection& c) {
  if (c.ssl != nullptr) {
    if (c.handshaken)
      SSL_shutdown(c.ssl); // best effort: the socket does not block
    SSL_free(c.ssl);
    c.ssl = nullptr;
  }
  close_socket(c.sock);
}

// The names of a verified client certificate: its CN, then its DNS SANs.
std::vector<std::string> verified_names(SSL* ssl) {
  std::vector<std::string> out;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr)
    return out;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert),
                                  NID_commonName, cn, sizeof(cn))
        > 0)
      out.emplace_back(cn);
    auto* sans = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
      const auto* name = sk_GENERAL_NAME_value(sans, i);
      if (name->type != GEN_DNS)
        continue;
      const auto* s = name->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(sans);
  }
  X509_free(cert);
  return out;
}

// Moves a TLS session on without blocking: the handshake, then every
// decrypted byte into `c.in`. False when the client is gone or the session
// failed.
bool pump_tls(connection& c) {
  c.want_write = false;
  auto again = [&c](int r) {
    switch (SSL_get_error(c.ssl, r)) {
      case SSL_ERROR_WANT_READ:
        return true;
      case SSL_ERROR_WANT_WRITE:
        c.want_write = true;
        return true;
      default:
        return false;
    }
  };
  if (!c.handshaken) {
    if (int r = SSL_do_handshake(c.ssl); r != 1)
      return again(r);
    c.handshaken = true;
    c.cert_names = verified_names(c.ssl);
  }
  char buf[4096];
  while (c.buffered() < max_head) {
    int n = SSL_read(c.ssl, buf, sizeof(buf));
    if (n <= 0)
      return again(n);
    c.in.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// The names of the client certificate of the request this thread runs.
thread_local const std::vector<std::string>* current_names = nullptr;

int millis_until(clock_type::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                t - clock_type::now())
                .count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

bool wait_for(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  int n = 0;
  do {
    n = ::poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

/// cpp-httplib's view of a connection while a request runs: buffered head
/// bytes first, then the socket; every read ends at the request's deadline.
class connection_stream final : public httplib::Stream {
public:
  connection_stream(connection& c, clock_type::time_point deadline)
    : conn_(c), deadline_(deadline) {
    // nop
  }

  bool is_readable() const override {
    return conn_.buffered() > 0
           || (conn_.ssl != nullptr && SSL_pending(conn_.ssl) > 0)
           || wait_for(conn_.sock, POLLIN, millis_until(deadline_));
  }

  bool is_writable() const override {
    return wait_for(conn_.sock, POLLOUT, write_timeout_ms);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (conn_.buffered() > 0) {
      auto n = std::min(size, conn_.buffered());
      std::copy_n(conn_.in.data() + conn_.used, n, ptr);
      conn_.used += n;
      return static_cast<ssize_t>(n);
    }
    if (conn_.ssl != nullptr)
      return tls_io(
        [&] {
          return SSL_read(conn_.ssl, ptr, static_cast<int>(std::min<size_t>(
                                            size, INT32_MAX)));
        },
        millis_until(deadline_));
    if (!wait_for(conn_.sock, POLLIN, millis_until(deadline_)))
      return -1;
    ssize_t n = 0;
    do {
      n = ::recv(conn_.sock, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (conn_.ssl != nullptr)
      return tls_io(
        [&] {
          return SSL_write(conn_.ssl, ptr, static_cast<int>(std::min<size_t>(
                                             size, INT32_MAX)));
        },
        write_timeout_ms);
    if (!is_writable())
      return -1;
    ssize_t n = 0;
    do {
      n = ::send(conn_.sock, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(conn_.sock, reinterpret_cast<sockaddr*>(&addr), &len)
        == 0)
      address_of(addr, ip, port);
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(conn_.sock, reinterpret_cast<sockaddr*>(&addr), &len)
        == 0)
      address_of(addr, ip, port);
  }

  socket_t socket() const override {
    return conn_.sock;
  }

private:
  // Runs a TLS read or write on the non-blocking socket, waiting (at most
  // `timeout_ms` each time) for what the session wants.
  template <class F>
  ssize_t tls_io(F op, int timeout_ms) const {
    for (;;) {
      int n = op();
      if (n > 0)
        return n;
      switch (SSL_get_error(conn_.ssl, n)) {
        case SSL_ERROR_WANT_READ:
          if (!wait_for(conn_.sock, POLLIN, timeout_ms))
            return -1;
          break;
        case SSL_ERROR_WANT_WRITE:
          if (!wait_for(conn_.sock, POLLOUT, timeout_ms))
            return -1;
          break;
        case SSL_ERROR_ZERO_RETURN:
          return 0;
        default:
          return -1;
      }
    }
  }

  connection& conn_;
  clock_type::time_point deadline_;
};

} // namespace

/// The waiter, the request threads and the connections between them.
struct guarded_http_server::state {
  state(guarded_http_server& owner, http_server_limits l)
    : server(owner), limits(l) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      wake_read = fds[0];
      wake_write = fds[1];
    }
    waiter = std::thread([this] { wait_loop(); });
    for (size_t i = 0; i < std::max<size_t>(limits.threads, 1); ++i)
      workers.emplace_back([this] { work_loop(); });
  }

  ~state() {
    stop();
    if (wake_read >= 0)
      ::close(wake_read);
    if (wake_write >= 0)
      ::close(wake_write);
  }

  // Ends the threads and closes every connection. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (stopping)
        return;
      stopping = true;
    }
    wake();
    ready_cv.notify_all();
    if (waiter.joinable())
      waiter.join();
    for (auto& w : workers)
      if (w.joinable())
        w.join();
    std::lock_guard<std::mutex> guard{mtx};
    for (auto& c : incoming)
      close_connection(*c);
    incoming.clear();
    for (auto& c : ready)
      close_connection(*c);
    ready.clear();
  }

  void wake() {
    char x = 1;
    if (wake_write >= 0)
      [[maybe_unused]] auto n = ::write(wake_write, &x, 1);
  }

  // A new or kept-alive connection waits for its next head.
  void add(std::unique_ptr<connection> c) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (!stopping) {
        incoming.push_back(std::move(c));
        c = nullptr;
      }
    }
    if (c)
      return drop(std::move(c));
    wake();
  }

  void drop(std::unique_ptr<connection> c) {
    close_connection(*c);
    --open;
  }

  void wait_loop() {
    std::vector<std::unique_ptr<connection>> waiting;
    std::vector<pollfd> fds;
    char buf[4096];
    for (;;) {
      {
        std::lock_guard<std::mutex> guard{mtx};
        if (stopping)
          break;
        for (auto& c : incoming)
          waiting.push_back(std::move(c));
        incoming.clear();
      }
      // Heads that are complete already (pipelined requests) go at once.
      auto now = clock_type::now();
      std::vector<std::unique_ptr<connection>> keep;
      for (auto& c : waiting) {
        if (c->head_complete())
          hand_over(std::move(c));
        else if (now >= c->deadline)
          expire(std::move(c));
        else
          keep.push_back(std::move(c));
      }
      waiting.swap(keep);
      fds.clear();
      fds.push_back({wake_read, POLLIN, 0});
      auto next = now + std::chrono::seconds(60);
      for (auto& c : waiting) {
        fds.push_back({c->sock, c->want_write ? short{POLLOUT} : short{POLLIN},
                       0});
        next = std::min(next, c->deadline);
      }
      int n = ::poll(fds.data(), fds.size(), millis_until(next) + 1);
      if (n < 0 && errno != EINTR) {
        ES_ERROR("http server cannot wait for requests: {}",
                 std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (fds[0].revents != 0)
        while (::read(wake_read, buf, sizeof(buf)) > 0) {
          // nop: drained
        }
      for (size_t i = 1; i < fds.size(); ++i) {
        auto& c = waiting[i - 1];
        if (fds[i].revents == 0)
          continue;
        if (c->ssl != nullptr) {
          if (!pump_tls(*c))
            drop(std::move(c));
          continue;
        }
        auto got = ::recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
        if (got > 0) {
          c->in.append(buf, static_cast<size_t>(got));
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          drop(std::move(c)); // the client closed or the socket failed
        }
      }
      waiting.erase(std::remove(waiting.begin(), waiting.end(), nullptr),
                    waiting.end());
    }
    for (auto& c : waiting)
      drop(std::move(c));
  }

  // The head is late: a client in the middle of one learns why.
  void expire(std::unique_ptr<connection> c) {
    ++timed_out;
    if (c->buffered() > 0) {
      // Unread input at close makes the kernel send a reset, which may
      // discard the answer: drain what is there first (best effort; bytes
      // that arrive later still reset).
      char buf[4096];
      while (::recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        // nop
      }
      static const std::string answer
        = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
          "Content-Length: 0\r\n\r\n";
      if (c->ssl != nullptr && c->handshaken)
        SSL_write(c->ssl, answer.data(), static_cast<int>(answer.size()));
      else if (c->ssl == nullptr)
        [[maybe_unused]] auto n = ::send(c->sock, answer.data(),
                                         answer.size(),
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    drop(std::move(c));
  }

  void hand_over(std::unique_ptr<connection> c) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      ready.push_back(std::move(c));
    }
    ready_cv.notify_one();
  }

  void work_loop() {
    for (;;) {
      std::unique_ptr<connection> c;
      {
        std::unique_lock<std::mutex> guard{mtx};
        ready_cv.wait(guard, [this] { return stopping || !ready.empty(); });
        if (ready.empty())
          return;
        c = std::move(ready.front());
        ready.pop_front();
      }
      serve(std::move(c));
    }
  }

  // Runs one request on `c`; then the connection waits for the next one or
  // is closed.
  void serve(std::unique_ptr<connection> c) {
    bool closed = false;
    bool last = c->served + 1 >= limits.max_requests_per_connection;
    bool ok = false;
    try {
      connection_stream strm{*c, clock_type::now() + limits.request_timeout};
      current_names = &c->cert_names;
      ok = server.serve_request(strm, last, closed);
    } catch (const std::exception& e) {
      // cpp-httplib catches what handlers throw; this is anything else.
      ES_ERROR("http server dropped a connection: {}", e.what());
    } catch (...) {
      ES_ERROR("http server dropped a connection after an unknown error");
    }
    current_names = nullptr;
    ++c->served;
    c->compact();
    // Bytes the session decrypted already would not wake the waiter.
    if (ok && c->ssl != nullptr && SSL_pending(c->ssl) > 0 && !pump_tls(*c))
      ok = false;
    bool stopped = false;
    {
      std::lock_guard<std::mutex> guard{mtx};
      stopped = stopping;
    }
    if (!ok || closed || last || stopped || !server.is_running())
      return drop(std::move(c));
    c->deadline = clock_type::now() + limits.request_timeout;
    add(std::move(c));
  }

  guarded_http_server& server;
  const http_server_limits limits;
  std::mutex mtx;
  std::condition_variable ready_cv;
  bool stopping = false;
  std::vector<std::unique_ptr<connection>> incoming;
  std::deque<std::unique_ptr<connection>> ready;
  std::atomic<size_t> open{0};
  std::atomic<size_t> timed_out{0};
  std::atomic<size_t> refused{0};
  int wake_read = -1;
  int wake_write = -1;
  std::thread waiter;
  std::vector<std::thread> workers;
};

namespace {

/// cpp-httplib's accept loop hands each socket to its task queue: this one
/// runs the task at once, on the accept thread, and the task only passes
/// the socket to the waiter. At the end of the accept loop it stops the
/// threads.
class inline_queue final : public httplib::TaskQueue {
public:
  explicit inline_queue(std::weak_ptr<guarded_http_server::state> s)
    : state_(std::move(s)) {
    // nop
  }

  void enqueue(std::function<void()> fn) override {
    fn();
  }

  void shutdown() override {
    if (auto s = state_.lock())
      s->stop();
  }

private:
  std::weak_ptr<guarded_http_server::state> state_;
};

} // namespace

guarded_http_server::guarded_http_server(http_server_limits limits)
  : state_(std::make_shared<state>(*this, limits)) {
  std::weak_ptr<state> s = state_;
  new_task_queue = [s] { return new inline_queue(s); };
  auto idle = std::chrono::duration_cast<std::chrono::seconds>(
                limits.request_timeout)
                .count();
  set_keep_alive_timeout(std::max<time_t>(idle, 1));
  set_keep_alive_max_count(limits.max_requests_per_connection);
  set_read_timeout(limits.request_timeout);
  // The routes take no body; a client must not make us hold a large one.
  set_payload_max_length(64 * 1024);
}

guarded_http_server::~guarded_http_server() {
  state_->stop();
}

void guarded_http_server::set_backlog(int n) {
  // Listening again on a listening socket only changes its backlog.
  if (svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, n) != 0)
    ES_WARN("http server keeps its accept queue of 5: {}",
            std::strerror(errno));
}

size_t guarded_http_server::timed_out() const {
  return state_->timed_out;
}

size_t guarded_http_server::refused() const {
  return state_->refused;
}

bool guarded_http_server::process_and_close_socket(socket_t sock) {
  auto& s = *state_;
  if (++s.open > s.limits.max_connections) {
    --s.open;
    ++s.refused;
    close_socket(sock);
    return false;
  }
  auto c = std::make_unique<connection>();
  c->sock = sock;
  c->deadline = clock_type::now() + s.limits.request_timeout;
  if (tls_) {
    // The waiter runs the handshake without blocking, within the same
    // deadline as a request head.
    int flags = ::fcntl(sock, F_GETFL, 0);
    c->ssl = SSL_new(tls_.get());
    if (c->ssl == nullptr || flags < 0
        || ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0
        || SSL_set_fd(c->ssl, sock) != 1) {
      s.drop(std::move(c));
      return false;
    }
    SSL_set_accept_state(c->ssl);
  }
  s.add(std::move(c));
  return true;
}

void guarded_http_server::set_tls(ssl_context_ptr ctx) {
  tls_ = std::move(ctx);
}

const std::vector<std::string>& guarded_http_server::current_cert_names() {
  static const std::vector<std::string> none;
  return current_names != nullptr ? *current_names : none;
}

bool guarded_http_server::serve_request(httplib::Stream& strm, bool last,
                                        bool& closed) {
  return process_request(strm, last, closed, nullptr);
}

} // namespace recoverd
