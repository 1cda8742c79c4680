#include "services/listener.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "actors/error.hpp"
#include "actors/log.hpp"

namespace recoverd {

namespace {

// The peer's address without its port; IPv4-mapped IPv6 reads as IPv4, so
// that one host counts once whichever family it dials.
std::string peer_address(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr))
      inet_ntop(AF_INET, &a.sin6_addr.s6_addr[12], buf, sizeof(buf));
    else
      inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

caf::error bad_address(const std::string& address, const std::string& why) {
  return make_error(errc::invalid_argument,
                    "cannot listen on " + address + ": " + why);
}

} // namespace

caf::expected<listen_address>
parse_listen_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return bad_address(address, "expected host:port");
  auto host = address.substr(0, colon);
  auto port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos
      || port.size() > 5 || std::stoi(port) > 65535)
    return bad_address(address, "the port must be a number from 0 to 65535");
  return listen_address{host, static_cast<uint16_t>(std::stoi(port))};
}

caf::expected<std::unique_ptr<grpc_listener>>
grpc_listener::open(const std::string& address, connection_limits limits) {
  auto parsed = parse_listen_address(address);
  if (!parsed)
    return parsed.error();
  const auto& host = parsed->host;
  auto port = std::to_string(parsed->port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (auto rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                            port.c_str(), &hints, &found);
      rc != 0)
    return bad_address(address, gai_strerror(rc));
  std::unique_ptr<grpc_listener> self{new grpc_listener};
  self->limits_ = limits;
  std::string last_error = "no address";
  for (auto* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                      ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR lets a restart bind past TIME_WAIT; no SO_REUSEPORT, so
    // a second daemon fails instead of sharing the port.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) {
      int zero = 0;
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0
        || ::listen(fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    self->fd_ = fd;
    break;
  }
  freeaddrinfo(found);
  if (self->fd_ < 0)
    return bad_address(address, last_error);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(self->fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  self->port_ = bound.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                  : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
  if (::pipe2(self->wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    return bad_address(address, std::strerror(errno));
  return self;
}

grpc_listener::~grpc_listener() {
  stop();
  for (auto& fd : wake_)
    if (fd >= 0)
      ::close(fd);
}

void grpc_listener::attach(grpc::ServerBuilder& builder,
                           std::shared_ptr<grpc::ServerCredentials> creds) {
  acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
    grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
    std::move(creds));
}

void grpc_listener::start() {
  if (thread_.joinable() || fd_ < 0)
    return;
  thread_ = std::thread{[this] { run(); }};
}

void grpc_listener::stop() {
  if (thread_.joinable()) {
    char c = 0;
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
    thread_.join();
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

connection_figures grpc_listener::figures() const {
  std::lock_guard<std::mutex> guard{mtx_};
  const_cast<grpc_listener*>(this)->prune();
  return figures_;
}

void grpc_listener::run() {
  pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      return;
    if (fds[1].revents != 0)
      return;
    if (fds[0].revents != 0)
      accept_one();
  }
}

void grpc_listener::accept_one() {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS
        || errno == ENOMEM) {
      // Out of descriptors: the pending connection stays queued; wait a
      // little instead of spinning on it.
      ES_WARN("recoverd cannot accept a connection: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return;
  }
  auto peer = peer_address(addr);
  const char* refused = nullptr;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    prune();
    if (limits_.total > 0 && open_.size() >= limits_.total) {
      ++figures_.refused_total;
      refused = "the listener's cap of connections";
    } else if (limits_.per_peer > 0 && per_peer_[peer] >= limits_.per_peer) {
      ++figures_.refused_peer;
      refused = "the cap of connections per peer";
    }
    if (refused == nullptr) {
      struct stat st{};
      fstat(fd, &st);
      open_[fd] = {static_cast<uint64_t>(st.st_dev),
                   static_cast<uint64_t>(st.st_ino), peer};
      ++per_peer_[peer];
      ++figures_.accepted;
      figures_.open = open_.size();
    } else if (per_peer_[peer] == 0) {
      per_peer_.erase(peer);
    }
  }
  if (refused != nullptr) {
    ::close(fd);
    // One line a second at most: a flood must not become a log flood.
    auto now = std::chrono::steady_clock::now();
    if (now - last_warning_ >= std::chrono::seconds(1)) {
      last_warning_ = now;
      ES_WARN("recoverd refused a connection from {}: {} is reached "
              "(total {}, per peer {})",
              peer, refused, limits_.total, limits_.per_peer);
    }
    return;
  }
  // gRPC's own accept path turns Nagle off; connections handed over keep
  // what the socket has.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
  p.listener_fd = fd_;
  p.fd = fd;
  acceptor_->HandleNewConnection(&p);
}

void grpc_listener::prune() {
  for (auto i = open_.begin(); i != open_.end();) {
    struct stat st{};
    bool same = fstat(i->first, &st) == 0
                && static_cast<uint64_t>(st.st_dev) == i->second.dev
                && static_cast<uint64_t>(st.st_ino) == i->second.ino;
    if (same) {
      ++i;
      continue;
    }
    auto p = per_peer_.find(i->second.peer);
    if (p != per_peer_.end() && --p->second == 0)
      per_peer_.erase(p);
    i = open_.erase(i);
  }
  figures_.open = open_.size();
}

} // namespace recoverd
