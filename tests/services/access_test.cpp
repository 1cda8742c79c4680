// Access control over real TLS: certificates made by openssl at test time,
// the control and agent listeners, roles, per-job agents, tokens.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "fixtures/certs.hpp"
#include "fixtures/service_fixture.hpp"
#include "inspect.grpc.pb.h"
#include "services/access.hpp"

using namespace recoverd;
using namespace recoverd::test;

namespace {

constexpr const char* token_text = "s3cret-operator-token";

std::string authz_text() {
  return "[[identity]]\nname = \"ops-1\"\nrole = \"operator\"\n"
         "[[identity]]\nname = \"viewer-1\"\nrole = \"viewer\"\n"
         "[[identity]]\nname = \"platform-1\"\nrole = \"platform\"\n"
         "[[identity]]\nname = \"agent-a\"\nrole = \"agent\"\n"
         "jobs = [\"job-a\"]\n"
         "[[token]]\nname = \"ops-token\"\nrole = \"operator\"\nsha256 = \""
    + sha256_hex(token_text) + "\"\n";
}

std::shared_ptr<const authz_policy> policy() {
  auto x = parse_authz(authz_text(), "test.toml");
  REQUIRE_MESSAGE(x, message_of(x.error()));
  return std::make_shared<const authz_policy>(std::move(*x));
}

// A channel over TLS to `address`, with the client certificate of `who`
// (none when empty).
std::shared_ptr<grpc::Channel> tls_channel(const test_pki& pki,
                                           const std::string& address,
                                           const std::string& who) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = pki.read("ca.pem");
  if (!who.empty()) {
    opts.pem_private_key = pki.read(who + ".key");
    opts.pem_cert_chain = pki.read(who + ".pem");
  }
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(opts), args);
}

std::unique_ptr<grpc::ClientContext> context(const std::string& token = {}) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty())
    c->AddMetadata("authorization", "Bearer " + token);
  return c;
}

// A daemon with an agent and a control listener on free loopback ports.
app_options split_options(const temp_dir& dir) {
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.control_listen = "127.0.0.1:0";
  opts.data_dir = dir / "db";
  opts.worker_threads = 2;
  return opts;
}

grpc::Status put_job(pb::Platform::Stub& stub, const std::string& id) {
  pb::PutJobRequest req;
  *req.mutable_spec() = spec_of(id);
  pb::PutJobResponse resp;
  auto c = context();
  return stub.PutJob(c.get(), req, &resp);
}

grpc::Status stress(::Recover::Stub& stub, const std::string& id,
                    const std::string& token = {}) {
  ::StressTestParam req;
  req.set_jobid(id);
  req.add_allnodesops(0);
  ::Status resp;
  auto c = context(token);
  return stub.StressTest(c.get(), req, &resp);
}

grpc::Status init(::Recover::Stub& stub, const std::string& id) {
  ::ClientInfo req;
  req.set_jobid(id);
  req.set_role("taskd");
  ::Status resp;
  auto c = context();
  return stub.Init(c.get(), req, &resp);
}

} // namespace

TEST_CASE("access table: every RPC of every service has a rule") {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* name : {"Recover", "recoverd.platform.v1.Platform",
                           "recoverd.inspection.v1.Inspect"}) {
    const auto* svc = pool->FindServiceByName(name);
    REQUIRE(svc != nullptr);
    for (int i = 0; i < svc->method_count(); ++i) {
      auto method = "/" + std::string{name} + "/" + svc->method(i)->name();
      CHECK_MESSAGE(rule_of(method) != nullptr, method);
    }
  }
  CHECK(rule_of("/Recover/NoSuchThing") == nullptr);
}

TEST_CASE("access table: roles per method") {
  auto p = policy();
  access_settings on{p, listener_kind::combined, true, false};
  auto as = [](std::string name) {
    caller_credentials c;
    c.cert_names = {std::move(name)};
    return c;
  };
  auto code = [&](const char* method, const std::string& who,
                  const std::string& job = {}) {
    auto x = authorize(on, method, as(who), job);
    return x ? errc{} : *errc_of(x.error());
  };
  CHECK(code("/recoverd.platform.v1.Platform/DeleteJob", "viewer-1")
        == errc::permission_denied);
  CHECK(code("/recoverd.platform.v1.Platform/GetJob", "viewer-1") == errc{});
  CHECK(code("/recoverd.platform.v1.Platform/PutJob", "ops-1")
        == errc::permission_denied);
  CHECK(code("/Recover/StressTest", "ops-1") == errc{});
  CHECK(code("/recoverd.platform.v1.Platform/PutJob", "platform-1") == errc{});
  CHECK(code("/Recover/Init", "agent-a", "job-a") == errc{});
  CHECK(code("/Recover/Init", "agent-a", "job-b") == errc::permission_denied);
  CHECK(code("/Recover/Init", "stranger") == errc::unauthenticated);
  CHECK(code("/Recover/Init", "ops-1", "job-a") == errc::permission_denied);
  caller_credentials token;
  token.bearer_token = token_text;
  CHECK(authorize(on, "/Recover/StressTest", token)->name == "ops-token");
  token.bearer_token = "wrong";
  CHECK(*errc_of(authorize(on, "/Recover/StressTest", token).error())
        == errc::unauthenticated);
  // O&M off on the agent listener, agent RPCs off on the control listener.
  access_settings agent{p, listener_kind::agent, false, false};
  CHECK(*errc_of(authorize(agent, "/Recover/StressTest", as("ops-1")).error())
        == errc::permission_denied);
  access_settings control{p, listener_kind::control, true, false};
  CHECK(*errc_of(
          authorize(control, "/Recover/Init", as("agent-a"), "job-a").error())
        == errc::permission_denied);
  // Off: everyone may call everything.
  access_settings off;
  CHECK(authorize(off, "/recoverd.platform.v1.Platform/DeleteJob", {}));
}

TEST_CASE("authz file: bad files are refused with a clear message") {
  auto bad = [](const std::string& text) {
    auto x = parse_authz(text, "f.toml");
    REQUIRE_FALSE(x);
    return message_of(x.error());
  };
  CHECK(bad("[[identity]]\nname = \"x\"\nrole = \"boss\"\n").find("role")
        != std::string::npos);
  CHECK(bad("[[identity]]\nrole = \"viewer\"\n").find("name")
        != std::string::npos);
  CHECK(bad("[[token]]\nname = \"t\"\nrole = \"viewer\"\nsha256 = \"ab\"\n")
          .find("sha256")
        != std::string::npos);
  CHECK(bad("[[identity]]\nname = \"x\"\nrole = \"viewer\"\njobs = [\"a\"]\n")
          .find("only an agent")
        != std::string::npos);
  CHECK(bad("[[identity]\nname = ").find("f.toml") != std::string::npos);
  CHECK(bad("[[identity]]\nname = \"x\"\nrole = \"viewer\"\ncolour = 1\n")
          .find("unknown key")
        != std::string::npos);
  CHECK(bad("[[identity]]\nname = \"x\"\nrole = \"viewer\"\n"
            "[[identity]]\nname = \"x\"\nrole = \"agent\"\n")
          .find("twice")
        != std::string::npos);
  CHECK_FALSE(load_authz_file("/nonexistent/authz.toml"));
}

TEST_CASE("access control over mTLS: control and agent listeners") {
  test_pki pki{"ops-1", "viewer-1", "platform-1", "agent-a", "stranger"};
  temp_dir dir;
  auto opts = split_options(dir);
  opts.tls = {pki.file("server.pem"), pki.file("server.key"),
              pki.file("ca.pem"), client_cert_mode::optional};
  opts.control_tls = {pki.file("server.pem"), pki.file("server.key"),
                      pki.file("ca.pem"), client_cert_mode::required};
  opts.authz = policy();
  auto started = app::start(opts);
  REQUIRE_MESSAGE(started, message_of(started.error()));
  auto& daemon = **started;
  auto control = daemon.control_address();
  auto agent = daemon.address();
  REQUIRE(control != agent);

  MESSAGE("platform-1 puts jobs");
  auto platform
    = pb::Platform::NewStub(tls_channel(pki, control, "platform-1"));
  REQUIRE(put_job(*platform, "job-a").ok());
  REQUIRE(put_job(*platform, "job-b").ok());

  MESSAGE("no client certificate: refused by the control listener");
  auto anonymous = pb::Platform::NewStub(tls_channel(pki, control, ""));
  pb::JobRef ref;
  ref.set_jobid("job-a");
  pb::JobStatus status;
  {
    auto c = context();
    CHECK_FALSE(anonymous->GetJob(c.get(), ref, &status).ok());
  }
  MESSAGE("plaintext: refused by the control listener");
  {
    auto plain = pb::Platform::NewStub(
      grpc::CreateChannel(control, grpc::InsecureChannelCredentials()));
    auto c = context();
    CHECK_FALSE(plain->GetJob(c.get(), ref, &status).ok());
  }

  MESSAGE("viewer-1: GetJob OK, DeleteJob PERMISSION_DENIED");
  auto viewer = pb::Platform::NewStub(tls_channel(pki, control, "viewer-1"));
  {
    auto c = context();
    auto st = viewer->GetJob(c.get(), ref, &status);
    CHECK_MESSAGE(st.ok(), st.error_message());
  }
  {
    pb::DeleteJobResponse resp;
    auto c = context();
    auto st = viewer->DeleteJob(c.get(), ref, &resp);
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(st.error_message().find("viewer-1") != std::string::npos);
  }
  {
    auto inspect = recoverd::inspection::v1::Inspect::NewStub(
      tls_channel(pki, control, "viewer-1"));
    recoverd::inspection::v1::ListJobsRequest req;
    recoverd::inspection::v1::ListJobsResponse resp;
    auto c = context();
    auto st = inspect->ListJobs(c.get(), req, &resp);
    CHECK_MESSAGE(st.ok(), st.error_message());
  }

  MESSAGE("ops-1: StressTest allowed, PutJob denied");
  auto ops_channel = tls_channel(pki, control, "ops-1");
  auto ops_recover = ::Recover::NewStub(ops_channel);
  {
    auto st = stress(*ops_recover, "job-a");
    CHECK_MESSAGE(st.ok(), st.error_message());
  }
  auto ops_platform = pb::Platform::NewStub(ops_channel);
  CHECK(put_job(*ops_platform, "job-c").error_code()
        == grpc::StatusCode::PERMISSION_DENIED);

  MESSAGE("audit: the events name the identity that caused them");
  {
    pb::SetAnnotationsRequest req;
    req.set_jobid("job-a");
    (*req.mutable_set())["RankTableReady"] = "true";
    pb::Annotations resp;
    auto c = context();
    auto st = ops_platform->SetAnnotations(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  {
    auto inspect = recoverd::inspection::v1::Inspect::NewStub(
      tls_channel(pki, control, "viewer-1"));
    recoverd::inspection::v1::ListEventsRequest req;
    req.set_jobid("job-a");
    recoverd::inspection::v1::ListEventsResponse resp;
    auto c = context();
    auto st = inspect->ListEvents(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    REQUIRE(resp.events_size() >= 2);
    CHECK(resp.events(0).kind() == "job_put");
    CHECK(resp.events(0).event().by() == "platform-1");
    const auto& last = resp.events(resp.events_size() - 1);
    CHECK(last.kind() == "annotations_changed");
    CHECK(last.event().by() == "ops-1");
    CHECK(last.summary().find("ops-1") != std::string::npos);
  }

  MESSAGE("agent RPCs are not served on the control listener");
  auto agent_on_control
    = ::Recover::NewStub(tls_channel(pki, control, "agent-a"));
  CHECK(init(*agent_on_control, "job-a").error_code()
        == grpc::StatusCode::PERMISSION_DENIED);

  MESSAGE("agent-a (job-a only) on the agent listener");
  auto agent_a = ::Recover::NewStub(tls_channel(pki, agent, "agent-a"));
  CHECK(init(*agent_a, "job-a").ok());
  auto denied = init(*agent_a, "job-b");
  CHECK(denied.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(denied.error_message().find("job-b") != std::string::npos);
  {
    ::ProcessFaultRequest req;
    req.set_jobid("job-b");
    req.add_faultranks()->set_rankid("0");
    ::Status resp;
    auto c = context();
    CHECK(agent_a->ReportProcessFault(c.get(), req, &resp).error_code()
          == grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    ::ClientInfo req;
    req.set_jobid("job-b");
    auto c = context();
    auto reader = agent_a->SubscribeProcessManageSignal(c.get(), req);
    ::ProcessManageSignal msg;
    CHECK_FALSE(reader->Read(&msg));
    CHECK(reader->Finish().error_code() == grpc::StatusCode::PERMISSION_DENIED);
  }

  MESSAGE("a certificate the authz file does not name: UNAUTHENTICATED");
  auto stranger = ::Recover::NewStub(tls_channel(pki, agent, "stranger"));
  CHECK(init(*stranger, "job-a").error_code()
        == grpc::StatusCode::UNAUTHENTICATED);

  MESSAGE("a bearer token in gRPC metadata identifies the operator");
  auto no_cert = ::Recover::NewStub(tls_channel(pki, agent, ""));
  {
    auto st = stress(*no_cert, "job-a", token_text);
    CHECK_MESSAGE(st.ok(), st.error_message());
  }
  CHECK(stress(*no_cert, "job-a", "wrong-token").error_code()
        == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(stress(*no_cert, "job-a").error_code()
        == grpc::StatusCode::UNAUTHENTICATED);
  daemon.stop();
}

TEST_CASE("access control: the unmodified plaintext agent path") {
  temp_dir dir;
  auto opts = split_options(dir);
  opts.authz = policy();
  opts.anonymous_agents = true;
  opts.om_on_agent_listener = false;
  opts.http_listen = "127.0.0.1:0";
  auto started = app::start(opts);
  REQUIRE_MESSAGE(started, message_of(started.error()));
  auto& daemon = **started;
  auto plain = ::Recover::NewStub(
    grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials()));
  ::ClientInfo req;
  req.set_jobid("job-x");
  ::Status resp;
  {
    auto c = context();
    auto st = plain->Init(c.get(), req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.code() == 502); // unknown job, as the reference answers
  }
  {
    auto c = context();
    CHECK(plain->HealthCheck(c.get(), req, &resp).ok());
  }
  MESSAGE("O&M is off on the agent listener");
  auto st = stress(*plain, "job-x");
  CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(st.error_message().find("control listener") != std::string::npos);
  MESSAGE("the HTTP port takes the same tokens");
  httplib::Client http{"127.0.0.1", daemon.http_port()};
  auto none = http.Get("/api/v1/jobs");
  REQUIRE(none);
  CHECK(none->status == 401);
  auto good = http.Get(
    "/api/v1/jobs", {{"Authorization", std::string{"Bearer "} + token_text}});
  REQUIRE(good);
  CHECK(good->status == 200);
  auto wrong = http.Get("/api/v1/jobs", {{"Authorization", "Bearer nope"}});
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
  MESSAGE("probes need no credentials");
  auto live = http.Get("/healthz");
  REQUIRE(live);
  CHECK(live->status == 200);
  auto ready = http.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  CHECK(daemon.unready_reason().empty());
  daemon.stop();
}

namespace {

// A plaintext daemon with access control by tokens (gRPC metadata), for
// the tests that need many identities without certificates.
struct token_daemon {
  temp_dir dir;
  std::unique_ptr<app> daemon;

  explicit token_daemon(const std::string& authz, rate_limits limits = {}) {
    start(authz, limits);
  }

  void start(const std::string& authz, rate_limits limits) {
    app_options opts;
    opts.listen = "127.0.0.1:0";
    opts.data_dir = dir / "db";
    opts.worker_threads = 2;
    auto p = parse_authz(authz, "test.toml");
    REQUIRE_MESSAGE(p, message_of(p.error()));
    opts.authz = std::make_shared<const authz_policy>(std::move(*p));
    opts.limits = limits;
    auto started = app::start(opts);
    REQUIRE_MESSAGE(started, message_of(started.error()));
    daemon = std::move(*started);
  }

  std::unique_ptr<pb::Platform::Stub> platform() const {
    return pb::Platform::NewStub(grpc::CreateChannel(
      daemon->address(), grpc::InsecureChannelCredentials()));
  }
};

std::string token_entry(const std::string& name, const std::string& role,
                        const std::string& extra = {}) {
  return "[[token]]\nname = \"" + name + "\"\nrole = \"" + role
    + "\"\nsha256 = \"" + sha256_hex("t-" + name) + "\"\n" + extra;
}

grpc::Status put_as(pb::Platform::Stub& stub, const std::string& token,
                    const std::string& id) {
  pb::PutJobRequest req;
  *req.mutable_spec() = spec_of(id);
  pb::PutJobResponse resp;
  auto c = context("t-" + token);
  return stub.PutJob(c.get(), req, &resp);
}

double percentile(std::vector<double> xs, double p) {
  REQUIRE_FALSE(xs.empty());
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1));
  return xs[i];
}

} // namespace

TEST_CASE("access control: a platform identity's job cap, across restarts") {
  auto authz = token_entry("small", "platform", "max_jobs = 1\n")
    + token_entry("big", "platform");
  token_daemon d{authz};
  auto stub = d.platform();
  REQUIRE(put_as(*stub, "small", "job-1").ok());
  MESSAGE("an update of its own job is no new job");
  REQUIRE(put_as(*stub, "small", "job-1").ok());
  auto refused = put_as(*stub, "small", "job-2");
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(refused.error_message().find("small") != std::string::npos);
  MESSAGE("another identity is not held by it");
  CHECK(put_as(*stub, "big", "job-3").ok());
  CHECK(put_as(*stub, "big", "job-4").ok());
  MESSAGE("after a restart the owners are known from the log");
  d.daemon->stop();
  d.daemon.reset();
  d.start(authz, {});
  stub = d.platform();
  CHECK(put_as(*stub, "small", "job-2").error_code()
        == grpc::StatusCode::RESOURCE_EXHAUSTED);
  {
    pb::JobRef ref;
    ref.set_jobid("job-1");
    pb::DeleteJobResponse resp;
    auto c = context("t-small");
    REQUIRE(stub->DeleteJob(c.get(), ref, &resp).ok());
  }
  CHECK(put_as(*stub, "small", "job-2").ok());
  d.daemon->stop();
}

TEST_CASE("access control: authz max_jobs is for platforms, positive") {
  CHECK_FALSE(parse_authz(token_entry("v", "viewer", "max_jobs = 3\n"), "f"));
  CHECK_FALSE(parse_authz(token_entry("p", "platform", "max_jobs = 0\n"), "f"));
  auto ok = parse_authz(token_entry("p", "platform", "max_jobs = 3\n"), "f");
  REQUIRE(ok);
  CHECK(ok->tokens.begin()->second.max_jobs == 3);
}

TEST_CASE("fairness: a client at 10x its limit is refused, another keeps "
          "its latency") {
  // Printed figures, no timed assertion: this machine is shared.
  auto authz = token_entry("noisy", "viewer") + token_entry("quiet", "viewer")
    + token_entry("p", "platform");
  rate_limits limits;
  REQUIRE_FALSE(parse_rate_limit("read=400/400", limits));
  token_daemon d{authz, limits};
  REQUIRE(put_as(*d.platform(), "p", "job-a").ok());
  auto quiet_stub = d.platform();
  pb::JobRef ref;
  ref.set_jobid("job-a");
  // The quiet client: 150 GetJob calls at ~200/s (half its limit).
  auto measure = [&](size_t& refused) {
    std::vector<double> ms;
    for (int i = 0; i < 150; ++i) {
      pb::JobStatus status;
      auto c = context("t-quiet");
      auto t0 = std::chrono::steady_clock::now();
      auto st = quiet_stub->GetJob(c.get(), ref, &status);
      ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - t0)
                     .count());
      if (!st.ok())
        ++refused;
      std::this_thread::sleep_for(5ms);
    }
    return ms;
  };
  size_t idle_refused = 0;
  auto idle = measure(idle_refused);
  MESSAGE("the noisy client: 4 threads of GetJob as fast as they go");
  std::atomic<bool> stop{false};
  std::atomic<size_t> sent{0};
  std::atomic<size_t> exhausted{0};
  std::atomic<size_t> retry_hints{0};
  std::vector<std::thread> noisy;
  for (int t = 0; t < 4; ++t)
    noisy.emplace_back([&] {
      auto stub = d.platform();
      while (!stop) {
        pb::JobStatus status;
        auto c = context("t-noisy");
        auto st = stub->GetJob(c.get(), ref, &status);
        ++sent;
        if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++exhausted;
          auto& md = c->GetServerTrailingMetadata();
          if (md.count("grpc-retry-pushback-ms") > 0)
            ++retry_hints;
        }
      }
    });
  std::this_thread::sleep_for(200ms);
  auto t0 = std::chrono::steady_clock::now();
  size_t loaded_refused = 0;
  auto loaded = measure(loaded_refused);
  auto secs
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  auto before = sent.load();
  stop = true;
  for (auto& t : noisy)
    t.join();
  auto rate = static_cast<double>(before) / (secs + 0.2);
  auto idle_p99 = percentile(idle, 0.99);
  auto loaded_p99 = percentile(loaded, 0.99);
  MESSAGE("noisy: " << sent.load() << " calls (~" << static_cast<int>(rate)
                    << "/s, " << rate / 400 << "x its limit of 400/s), "
                    << exhausted.load() << " RESOURCE_EXHAUSTED");
  MESSAGE("quiet GetJob p50 idle "
          << percentile(idle, 0.5) << " ms, loaded " << percentile(loaded, 0.5)
          << " ms; p99 idle " << idle_p99 << " ms, loaded " << loaded_p99
          << " ms (ratio " << loaded_p99 / idle_p99 << ")");
  CHECK(exhausted.load() > 0);
  CHECK(exhausted.load() == retry_hints.load());
  CHECK(idle_refused == 0);
  CHECK(loaded_refused == 0);
  CHECK(d.daemon->limiter().refused_by_client(rpc_class::read)
        == exhausted.load());
  d.daemon->stop();
}

TEST_CASE("access control: HTTPS with client certificates and tokens") {
  test_pki pki{"viewer-1", "agent-a", "stranger"};
  temp_dir dir;
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.data_dir = dir / "db";
  opts.worker_threads = 2;
  opts.http_listen = "127.0.0.1:0";
  opts.http_tls = {pki.file("server.pem"), pki.file("server.key"),
                   pki.file("ca.pem"), client_cert_mode::optional};
  opts.authz = policy();
  auto started = app::start(opts);
  REQUIRE_MESSAGE(started, message_of(started.error()));
  auto& daemon = **started;
  auto get = [&](const std::string& who, const httplib::Headers& headers = {}) {
    std::unique_ptr<httplib::SSLClient> c;
    if (who.empty())
      c = std::make_unique<httplib::SSLClient>("127.0.0.1", daemon.http_port());
    else
      c = std::make_unique<httplib::SSLClient>("127.0.0.1", daemon.http_port(),
                                               pki.file(who + ".pem"),
                                               pki.file(who + ".key"));
    c->set_ca_cert_path(pki.file("ca.pem"));
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5);
    c->set_read_timeout(5);
    auto res = c->Get("/api/v1/jobs", headers);
    return res ? res->status : -1;
  };
  MESSAGE("a viewer's certificate: 200; an agent's: 403; unknown: 401");
  CHECK(get("viewer-1") == 200);
  CHECK(get("agent-a") == 403);
  CHECK(get("stranger") == 401);
  MESSAGE("no certificate: the token decides");
  CHECK(get("") == 401);
  CHECK(get("", {{"Authorization", std::string{"Bearer "} + token_text}})
        == 200);
  MESSAGE("two requests on one TLS connection (keep-alive)");
  {
    httplib::SSLClient c{"127.0.0.1", daemon.http_port(),
                         pki.file("viewer-1.pem"), pki.file("viewer-1.key")};
    c.set_ca_cert_path(pki.file("ca.pem"));
    c.set_keep_alive(true);
    auto a = c.Get("/api/v1/jobs");
    auto b = c.Get("/metrics");
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->status == 200);
    CHECK(b->status == 200);
    CHECK(b->body.find("recoverd_rate_limited_total") != std::string::npos);
  }
  MESSAGE("plaintext to the HTTPS port gets no answer");
  {
    httplib::Client plain{"127.0.0.1", daemon.http_port()};
    plain.set_read_timeout(2);
    auto res = plain.Get("/api/v1/jobs");
    CHECK((!res || res->status >= 400));
  }
  MESSAGE("a client that starts a handshake and stalls does not hold others");
  {
    auto sock = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(daemon.http_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
            == 0);
    const char partial[] = "\x16\x03\x01\x02\x00\x01";
    ::send(sock, partial, sizeof(partial) - 1, MSG_NOSIGNAL);
    CHECK(get("viewer-1") == 200);
    ::close(sock);
  }
  daemon.stop();
}
