// The agent library against an active/standby recoverd: real gRPC servers on
// loopback stand for the replicas. A standby answers every Recover call with
// UNAVAILABLE; the leader serves Init, Register, ReportProcessFault and a
// signal stream; a killed leader refuses connections.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "agent.hpp"
#include "recover.grpc.pb.h"

namespace {

using namespace std::chrono_literals;

/// One replica's Recover service: a standby until `leader` is set.
class replica_service final : public ::Recover::Service {
public:
  replica_service(std::string name, bool leader)
    : name_(std::move(name)), leader(leader) {
  }

  grpc::Status Init(grpc::ServerContext*, const ::ClientInfo*,
                    ::Status* resp) override {
    return serve(inits, resp);
  }

  grpc::Status Register(grpc::ServerContext*, const ::ClientInfo*,
                        ::Status* resp) override {
    return serve(registers, resp);
  }

  grpc::Status ReportProcessFault(grpc::ServerContext*,
                                  const ::ProcessFaultRequest*,
                                  ::Status* resp) override {
    return serve(faults, resp);
  }

  // Writes one signal whose uuid names this replica, then holds the stream
  // open until the client or the server's shutdown cancels it.
  grpc::Status
  SubscribeProcessManageSignal(grpc::ServerContext* ctx, const ::ClientInfo*,
                               grpc::ServerWriter<::ProcessManageSignal>* w)
    override {
    if (!leader) {
      ++refused;
      return standby();
    }
    ++streams;
    ::ProcessManageSignal sig;
    sig.set_uuid("uuid-" + name_);
    sig.set_signaltype("stopTrain");
    w->Write(sig);
    while (!ctx->IsCancelled())
      std::this_thread::sleep_for(10ms);
    return grpc::Status::OK;
  }

  std::atomic<int> inits{0};
  std::atomic<int> registers{0};
  std::atomic<int> faults{0};
  std::atomic<int> streams{0};
  /// Calls answered UNAVAILABLE as a standby.
  std::atomic<int> refused{0};

private:
  static grpc::Status standby() {
    return {grpc::StatusCode::UNAVAILABLE, "standby: not the leader"};
  }

  grpc::Status serve(std::atomic<int>& served, ::Status* resp) {
    if (!leader) {
      ++refused;
      return standby();
    }
    ++served;
    resp->set_code(0);
    return grpc::Status::OK;
  }

  std::string name_;

public:
  std::atomic<bool> leader;
};

/// A replica: its service on a free loopback port.
struct replica {
  replica(const std::string& name, bool leader, int port = 0)
    : service(name, leader) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    REQUIRE(port_ > 0);
  }

  ~replica() {
    kill();
  }

  /// Stops serving: open streams are cancelled, new connections refused.
  void kill() {
    if (server) {
      server->Shutdown(std::chrono::system_clock::now() + 100ms);
      server->Wait();
      server.reset();
    }
  }

  std::string address() const {
    return "127.0.0.1:" + std::to_string(port_);
  }

  int port() const {
    return port_;
  }

  replica_service service;
  std::unique_ptr<grpc::Server> server;

private:
  int port_ = 0;
};

} // namespace

TEST_CASE("agent failover: standby,leader; the leader dies and the standby "
          "takes over") {
  replica a{"a", false};
  replica b{"b", true};
  recoverd::agent::client agent{a.address() + "," + b.address(), "job"};

  MESSAGE("A is a standby: init and register go on to B");
  REQUIRE(agent.init_clusterd().code() == 0);
  CHECK(a.service.refused >= 1);
  CHECK(a.service.inits == 0);
  CHECK(b.service.inits == 1);
  CHECK(b.service.registers == 1);
  CHECK(agent.failovers() == 1);

  MESSAGE("the subscription finds the leader too");
  agent.start_subscribe();
  auto sig = agent.next_signal(5s);
  REQUIRE(sig.has_value());
  CHECK(sig->uuid() == "uuid-b");
  CHECK(b.service.streams == 1);

  MESSAGE("B dies, A becomes the leader: the stream moves on by itself");
  auto before = agent.failovers();
  a.service.leader = true;
  b.kill();
  sig = agent.next_signal(5s);
  REQUIRE(sig.has_value());
  CHECK(sig->uuid() == "uuid-a");
  CHECK(a.service.streams == 1);
  CHECK(agent.subscriptions() >= 2);
  CHECK(agent.failovers() == before + 1);

  MESSAGE("reports follow to A");
  CHECK(agent.report_process_fault({{"3", "1"}}).code() == 0);
  CHECK(agent.report_process_fault({{"4", "1"}}).code() == 0);
  CHECK(a.service.faults == 2);
  CHECK(b.service.faults == 0);
  CHECK(agent.failovers() == before + 1);
  agent.stop();
}

TEST_CASE("agent failover: a subscription alone passes over a standby") {
  replica a{"a", false};
  replica b{"b", true};
  recoverd::agent::client agent{a.address() + "," + b.address(), "job"};
  agent.start_subscribe({}, 20ms);
  auto sig = agent.next_signal(5s);
  REQUIRE(sig.has_value());
  CHECK(sig->uuid() == "uuid-b");
  CHECK(a.service.refused == 1);
  CHECK(agent.subscriptions() == 2);
  CHECK(agent.failovers() == 1);
  MESSAGE("and the calls start where it went");
  CHECK(agent.init().code() == 0);
  CHECK(a.service.refused == 1);
  CHECK(b.service.inits == 1);
  agent.stop();
}

TEST_CASE("agent failover: a dead address and a standby are passed over") {
  replica standby{"standby", false};
  replica leader{"leader", true};
  std::string dead;
  {
    // A port that was free a moment ago: nothing listens there now. Taken
    // after the live ones, so that neither of them gets it again.
    replica gone{"gone", false};
    dead = gone.address();
  }
  recoverd::agent::client agent{
    dead + ", " + standby.address() + " ," + leader.address(), "job"};
  auto started = std::chrono::steady_clock::now();
  REQUIRE(agent.init().code() == 0);
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK(agent.failovers() == 2);
  CHECK(standby.service.refused == 1);
  CHECK(leader.service.inits == 1);
  MESSAGE("the next call goes straight to the leader");
  REQUIRE(agent.register_job().code() == 0);
  CHECK(agent.failovers() == 2);
  CHECK(standby.service.refused == 1);
}

TEST_CASE("agent failover: with no leader a call fails UNAVAILABLE after the "
          "call timeout") {
  replica a{"a", false};
  replica b{"b", false};
  recoverd::agent::client agent{a.address() + "," + b.address(), "job"};
  auto started = std::chrono::steady_clock::now();
  auto st = agent.init();
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(st.code() == -1);
  CHECK(st.info().find("standby") != std::string::npos);
  CHECK(took >= 9s);
  CHECK(took < 12s);
  // Each round of two ends with a 100 ms pause: tens of rounds, not a spin.
  CHECK(a.service.refused + b.service.refused >= 20);
  CHECK(a.service.refused + b.service.refused <= 400);
  CHECK(agent.failovers() >= 20);
}

TEST_CASE("agent failover: one address keeps the old behaviour") {
  MESSAGE("a standby's UNAVAILABLE is the answer: no retry, no failover");
  {
    replica a{"a", false};
    recoverd::agent::client agent{a.address(), "job"};
    auto st = agent.init();
    CHECK(st.code() == -1);
    CHECK(st.info().find("standby") != std::string::npos);
    CHECK(a.service.refused == 1);
    CHECK(agent.failovers() == 0);
  }
  MESSAGE("the call waits for a daemon that is not up yet");
  int port = 0;
  {
    replica gone{"gone", false};
    port = gone.port();
  }
  recoverd::agent::client agent{"127.0.0.1:" + std::to_string(port), "job"};
  ::Status st;
  auto started = std::chrono::steady_clock::now();
  std::thread caller{[&] { st = agent.init(); }};
  std::this_thread::sleep_for(300ms);
  replica late{"late", true, port};
  caller.join();
  CHECK(std::chrono::steady_clock::now() - started >= 300ms);
  CHECK(st.code() == 0);
  CHECK(late.service.inits == 1);
  CHECK(agent.failovers() == 0);
}
