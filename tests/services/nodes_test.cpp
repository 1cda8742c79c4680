// The fleet's node registry over real gRPC and HTTP with the real journal:
// faults of job A on a node count for job B on that node, the record
// survives deleting job A and restarting the daemon on the same data
// directory, and an operator's clear ends the quarantine durably.

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actors/error.hpp"
#include "fixtures/service_fixture.hpp"
#include "fixtures/temp_dir.hpp"
#include "inspect.grpc.pb.h"
#include "platform.grpc.pb.h"
#include "services/app.hpp"

using namespace recoverd;
using namespace std::chrono_literals;
namespace pb = recoverd::platform::v1;
namespace pi = recoverd::inspection::v1;

namespace {

/// A daemon with gRPC and HTTP on free loopback ports, on `dir`.
struct nodes_daemon {
  std::unique_ptr<app> daemon;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Platform::Stub> platform;
  std::unique_ptr<pi::Inspect::Stub> inspect;

  explicit nodes_daemon(const std::string& dir) {
    app_options opts;
    opts.listen = "127.0.0.1:0";
    opts.http_listen = "127.0.0.1:0";
    opts.data_dir = dir;
    opts.worker_threads = 2;
    auto x = app::start(opts);
    REQUIRE_MESSAGE(x, (x ? "" : message_of(x.error())));
    daemon = std::move(*x);
    channel = grpc::CreateChannel(daemon->address(),
                                  grpc::InsecureChannelCredentials());
    platform = pb::Platform::NewStub(channel);
    inspect = pi::Inspect::NewStub(channel);
  }

  static std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + 10s);
    return c;
  }

  void put(const std::string& job) {
    pb::PutJobRequest req;
    *req.mutable_spec() = test::spec_of(job);
    pb::PutJobResponse resp;
    auto c = ctx();
    auto st = platform->PutJob(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  /// A fault-center snapshot of `job`: (node, device, code, level) each.
  void report(const std::string& job,
              const std::vector<std::vector<std::string>>& faults) {
    pb::ReportDeviceFaultsRequest req;
    auto& j = *req.add_jobs();
    j.set_jobid(job);
    for (const auto& f : faults) {
      auto& x = *j.add_faults();
      x.set_nodename(f[0]);
      x.set_deviceid(f[1]);
      x.add_faultcodes(f[2]);
      x.set_faultlevel(f[3]);
    }
    pb::ReportDeviceFaultsResponse resp;
    auto c = ctx();
    auto st = platform->ReportDeviceFaults(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    REQUIRE(resp.results_size() == 1);
    REQUIRE_MESSAGE(resp.results(0).accepted(), resp.results(0).error());
    REQUIRE(resp.results(0).ignored().empty());
  }

  pi::ListNodesResponse nodes(bool quarantined_only = false) {
    pi::ListNodesRequest req;
    req.set_quarantinedonly(quarantined_only);
    pi::ListNodesResponse resp;
    auto c = ctx();
    auto st = inspect->ListNodes(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return resp;
  }

  /// The registry's record of `node`; fails the test when there is none.
  pi::NodeRecord node(const std::string& name) {
    auto all = nodes();
    for (const auto& n : all.nodes())
      if (n.node() == name)
        return n;
    FAIL("node " << name << " has no record");
    return {};
  }

  /// Waits until the registry's record of `name` satisfies `ok`: jobs hand
  /// their observations over after their own events are durable.
  pi::NodeRecord await_node(const std::string& name,
                            const std::function<bool(const pi::NodeRecord&)>&
                              ok) {
    auto until = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      auto all = nodes();
      for (const auto& n : all.nodes())
        if (n.node() == name && ok(n))
          return n;
      if (std::chrono::steady_clock::now() > until)
        FAIL("node " << name << " never reached the expected record");
      std::this_thread::sleep_for(20ms);
    }
  }

  pb::ListNodeHealthResponse health() {
    pb::ListNodeHealthRequest req;
    pb::ListNodeHealthResponse resp;
    auto c = ctx();
    auto st = platform->ListNodeHealth(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return resp;
  }

  grpc::Status clear(const std::string& node, pb::ClearNodeHealthResponse& out,
                     const std::string& job = "") {
    pb::ClearNodeHealthRequest req;
    req.set_node(node);
    req.set_jobid(job);
    auto c = ctx();
    return platform->ClearNodeHealth(c.get(), req, &out);
  }

  std::string http_get(const std::string& path) {
    httplib::Client c{"127.0.0.1", daemon->http_port()};
    c.set_read_timeout(10, 0);
    auto res = c.Get(path);
    REQUIRE(res);
    REQUIRE_MESSAGE(res->status == 200, res->body);
    return res->body;
  }
};

} // namespace

TEST_CASE("node registry: faults of job A on a node count for job B there; "
          "the record survives deleting A and restarts; a clear is "
          "durable") {
  test::temp_dir dir;
  auto db = dir / "db";
  {
    nodes_daemon d{db};
    d.put("jobA");
    d.put("jobB");
    CHECK(d.nodes().nodes().empty());
    MESSAGE("job A: two chip restarts on node-0 (score 2, below 3)");
    d.report("jobA", {{"node-0", "0", "c1", "RestartNPU"}});
    d.await_node("node-0", [](const auto& n) { return n.faults() == 1; });
    // The snapshot repeats the first fault: it is not counted again.
    d.report("jobA", {{"node-0", "0", "c1", "RestartNPU"},
                      {"node-0", "1", "c2", "RestartNPU"}});
    auto x = d.await_node("node-0",
                          [](const auto& n) { return n.faults() == 2; });
    CHECK_FALSE(x.quarantined());
    CHECK(x.score() == doctest::Approx(2.0).epsilon(0.01));
    CHECK(x.lastjobid() == "jobA");
    CHECK(d.health().nodes().empty());
    MESSAGE("job B on the same node: one more fault lifts it to 3");
    d.report("jobB", {{"node-0", "1", "c3", "RestartNPU"}});
    x = d.await_node("node-0", [](const auto& n) { return n.quarantined(); });
    CHECK(x.faults() == 3);
    CHECK(x.reason() == "score");
    CHECK(x.lastjobid() == "jobB");
    CHECK(x.sincems() > 0);
    CHECK(d.nodes(true).nodes_size() == 1);
    auto health = d.health();
    REQUIRE(health.nodes_size() == 1);
    CHECK(health.nodes(0).node() == "node-0");
    CHECK(health.nodes(0).jobid() == "jobB");
    CHECK(health.nodes(0).status() == "UnHealthy");
    CHECK(health.nodes(0).reason().rfind("quarantined by the node registry",
                                         0)
          == 0);
    MESSAGE("HTTP: /api/v1/nodes and the gauges of /metrics");
    auto body = nlohmann::json::parse(d.http_get("/api/v1/nodes"));
    REQUIRE(body["nodes"].size() == 1);
    CHECK(body["nodes"][0]["node"] == "node-0");
    CHECK(body["nodes"][0]["quarantined"] == true);
    CHECK(body["nodes"][0]["reason"] == "score");
    CHECK(body["nodes"][0]["lastJobId"] == "jobB");
    CHECK(body["nodes"][0]["faults"] == "3");
    CHECK(body["threshold"] == 3.0);
    CHECK(body["halfLifeMs"] == "3600000");
    auto metrics = d.http_get("/metrics");
    CHECK(metrics.find("\nrecoverd_nodes_tracked 1\n") != std::string::npos);
    CHECK(metrics.find("\nrecoverd_nodes_quarantined 1\n")
          != std::string::npos);
    MESSAGE("deleting job A keeps the fleet's record");
    pb::JobRef ref;
    ref.set_jobid("jobA");
    pb::DeleteJobResponse deleted;
    auto c = nodes_daemon::ctx();
    REQUIRE(d.platform->DeleteJob(c.get(), ref, &deleted).ok());
    CHECK(d.node("node-0").quarantined());
  }
  MESSAGE("a restart on the same data directory finds the record");
  {
    nodes_daemon d{db};
    auto x = d.node("node-0");
    CHECK(x.quarantined());
    CHECK(x.faults() == 3);
    CHECK(x.reason() == "score");
    MESSAGE("bad input changes nothing: an unknown node is NOT_FOUND");
    pb::ClearNodeHealthResponse resp;
    CHECK(d.clear("node-9", resp).error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK(d.clear("", resp).error_code()
          == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(d.node("node-0").quarantined());
    MESSAGE("the operator clears node-0");
    auto st = d.clear("node-0", resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.noderegistry());
    CHECK(resp.jobids().empty());
    x = d.node("node-0");
    CHECK_FALSE(x.quarantined());
    CHECK(x.score() == 0.0);
    CHECK(x.faults() == 3);
    CHECK(d.health().nodes().empty());
    pb::ClearNodeHealthResponse again;
    CHECK(d.clear("node-0", again).error_code()
          == grpc::StatusCode::NOT_FOUND);
  }
  MESSAGE("the clear survives a restart too");
  {
    nodes_daemon d{db};
    auto x = d.node("node-0");
    CHECK_FALSE(x.quarantined());
    CHECK(x.faults() == 3);
    CHECK(d.nodes(true).nodes().empty());
  }
}
