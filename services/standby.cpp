#include "services/standby.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "services/http_server.hpp"
#include "services/listener.hpp"

namespace recoverd {

namespace {

// Every method of every service: a standby has no registered service, so
// each call reaches this one.
class unavailable_service final : public grpc::CallbackGenericService {
public:
  unavailable_service(std::atomic<size_t>& refused,
                      std::function<std::string()> leader)
    : refused_(refused), leader_(std::move(leader)) {
    // nop
  }

  grpc::ServerGenericBidiReactor*
  CreateReactor(grpc::GenericCallbackServerContext*) override {
    ++refused_;
    std::string msg = "recoverd standby: this replica does not lead";
    if (leader_)
      if (auto who = leader_(); !who.empty())
        msg += "; the leader is " + who;
    return new refusal(std::move(msg));
  }

private:
  // Reads the request first, then finishes: a call finished before its
  // request was read may be left open on the client's side.
  class refusal final : public grpc::ServerGenericBidiReactor {
  public:
    explicit refusal(std::string msg) : msg_(std::move(msg)) {
      StartRead(&request_);
    }

    void OnReadDone(bool) override {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, msg_));
    }

    void OnDone() override {
      delete this;
    }

  private:
    std::string msg_;
    grpc::ByteBuffer request_;
  };

  std::atomic<size_t>& refused_;
  std::function<std::string()> leader_;
};

} // namespace

struct standby_server::impl {
  app_options opts;
  std::function<std::string()> leader;
  std::atomic<size_t> refused{0};
  // gRPC takes a generic service on one server only: one each.
  std::vector<std::unique_ptr<unavailable_service>> services;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::Server> control_server;
  int port = 0;
  int control_port = 0;
  std::unique_ptr<guarded_http_server> http;
  std::thread http_thread;
  int http_port = 0;
  bool stopped = false;

  caf::error serve_grpc(const std::string& listen, const tls_options& tls,
                        std::unique_ptr<grpc::Server>& out, int& bound) {
    auto creds = make_server_credentials(tls);
    if (!creds)
      return creds.error();
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(listen, *creds, &bound);
    services.push_back(std::make_unique<unavailable_service>(refused, leader));
    builder.RegisterCallbackGenericService(services.back().get());
    out = builder.BuildAndStart();
    if (!out || bound == 0)
      return make_error(errc::invalid_argument,
                        "cannot listen on " + listen
                          + " (address in use or invalid)");
    return caf::none;
  }

  caf::error serve_http() {
    auto where = parse_listen_address(opts.http_listen);
    if (!where)
      return where.error();
    auto tls = make_ssl_context(opts.http_tls);
    if (!tls)
      return tls.error();
    http = std::make_unique<guarded_http_server>(http_server_limits{});
    http->set_tls(*tls);
    http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok (standby)\n", "text/plain");
    });
    auto unready = [this](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      std::string msg = "standby: this replica does not lead";
      if (leader)
        if (auto who = leader(); !who.empty())
          msg += "; the leader is " + who;
      res.set_content(msg + "\n", "text/plain");
    };
    http->Get(".*", unready);
    http->Post(".*", unready);
    http->set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    const auto& host = where->host;
    int port = where->port;
    if (port == 0)
      http_port = http->bind_to_any_port(host);
    else if (http->bind_to_port(host, port))
      http_port = port;
    if (http_port <= 0)
      return make_error(errc::invalid_argument,
                        "cannot listen for HTTP on " + opts.http_listen
                          + " (address in use or invalid)");
    http_thread = std::thread([this] { http->listen_after_bind(); });
    for (int i = 0; i < 2000 && !http->is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return caf::none;
  }
};

caf::expected<std::unique_ptr<standby_server>>
standby_server::start(const app_options& opts,
                      std::function<std::string()> leader) {
  std::unique_ptr<standby_server> self{new standby_server};
  self->impl_ = std::make_unique<impl>();
  auto& x = *self->impl_;
  x.opts = opts;
  x.leader = std::move(leader);
  if (auto err = x.serve_grpc(x.opts.listen, x.opts.tls, x.server, x.port))
    return err;
  if (!x.opts.control_listen.empty())
    if (auto err = x.serve_grpc(x.opts.control_listen, x.opts.control_tls,
                                x.control_server, x.control_port)) {
      self->stop();
      return err;
    }
  if (!x.opts.http_listen.empty())
    if (auto err = x.serve_http()) {
      self->stop();
      return err;
    }
  return self;
}

standby_server::~standby_server() {
  stop();
}

namespace {

std::string with_port(const std::string& listen, int port) {
  return listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port);
}

} // namespace

std::string standby_server::address() const {
  return with_port(impl_->opts.listen, impl_->port);
}

std::string standby_server::control_address() const {
  return impl_->control_server
           ? with_port(impl_->opts.control_listen, impl_->control_port)
           : std::string{};
}

std::string standby_server::http_address() const {
  return impl_->http ? with_port(impl_->opts.http_listen, impl_->http_port)
                     : std::string{};
}

void standby_server::stop() {
  if (!impl_ || impl_->stopped)
    return;
  impl_->stopped = true;
  auto deadline = std::chrono::system_clock::now()
                  + std::chrono::milliseconds(500);
  if (impl_->server)
    impl_->server->Shutdown(deadline);
  if (impl_->control_server)
    impl_->control_server->Shutdown(deadline);
  if (impl_->http) {
    impl_->http->stop();
    if (impl_->http_thread.joinable())
      impl_->http_thread.join();
  }
  impl_->server.reset();
  impl_->control_server.reset();
  impl_->http.reset();
}

size_t standby_server::refused() const {
  return impl_->refused.load();
}

} // namespace recoverd
