// End-to-end: the real daemon, the real recoverd-kube adapter and a fake
// Kubernetes API server (tests/kube/fake_apiserver.py: list, watch with
// resourceVersions and bookmarks, 410 Gone after a compaction, get, create,
// update with preconditions, merge patch, delete). The test plays the
// cluster (it creates the PodGroup, pods and ConfigMaps), the platform (it
// answers ProcessConfirmFault on the PodGroup) and, with the agent library,
// the training job.

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/sha.h>

#include "agent.hpp"
#include "child_process.hpp"
#include "fixtures/eventually.hpp"
#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"
#include "platform.grpc.pb.h"

using namespace recoverd::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace pb = recoverd::platform::v1;

namespace {

const std::string python = "/usr/bin/python3";
const std::string pg_path
  = "/apis/scheduling.volcano.sh/v1beta1/namespaces/train/podgroups";
const std::string pod_path = "/api/v1/namespaces/train/pods";
const std::string job_id = "3f1c-job-uid";

std::string sha256_hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (auto b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

/// The fake API server and a JSON client for it.
struct fake_kube {
  std::unique_ptr<child_process> proc;
  std::unique_ptr<httplib::Client> http;
  std::string url;

  explicit fake_kube(const temp_dir& dir) {
    proc = std::make_unique<child_process>(
      python,
      std::vector<std::string>{std::string{RECOVERD_SOURCE_DIR}
                                 + "/tests/kube/fake_apiserver.py",
                               "--port", "0"},
      dir / "fake.log");
    auto port = proc->read_line_after("");
    REQUIRE_MESSAGE(!port.empty(), "the fake API server did not start");
    url = "http://127.0.0.1:" + port;
    http = std::make_unique<httplib::Client>("127.0.0.1", std::stoi(port));
  }

  json call(const std::string& method, const std::string& path,
            const json& body = nullptr, int* code = nullptr) {
    auto text = body.is_null() ? std::string{} : body.dump();
    auto r = method == "GET"    ? http->Get(path)
             : method == "POST" ? http->Post(path, text, "application/json")
             : method == "PATCH"
               ? http->Patch(path, text, "application/merge-patch+json")
               : http->Delete(path);
    std::string what = method + " " + path + ": no answer";
    REQUIRE_MESSAGE(r, what);
    if (code != nullptr)
      *code = r->status;
    return json::parse(r->body);
  }

  json get(const std::string& path) {
    return call("GET", path);
  }

  std::string annotation(const std::string& path, const std::string& key) {
    auto a = get(path)["metadata"]["annotations"];
    return a.is_object() && a.contains(key) ? a[key].get<std::string>()
                                            : "<absent>";
  }
};

json pod(int rank, const std::string& node, const std::string& phase) {
  json devices = json::array({{{"device_id", "0"}, {"device_ip", "10.0.0.1"}},
                              {{"device_id", "1"}, {"device_ip", "10.0.0.2"}}});
  json config = {{"pod_name", "llama-worker-" + std::to_string(rank)},
                 {"server_id", node},
                 {"super_pod_id", 0},
                 {"devices", devices}};
  return {
    {"metadata",
     {{"name", "llama-worker-" + std::to_string(rank)},
      {"annotations",
       {{"hccl/rankIndex", std::to_string(rank)},
        {"huawei.com/AscendReal", "Ascend910-0,Ascend910-1"},
        {"ascend.kubectl.kubernetes.io/ascend-910-configuration",
         config.dump()}}},
      {"ownerReferences",
       json::array({{{"kind", "AscendJob"},
                     {"name", "llama"},
                     {"uid", job_id},
                     {"controller", true}}})}}},
    {"spec", {{"nodeName", node}}},
    {"status", {{"phase", phase}}}};
}

/// The device plugin's ConfigMap for `node` with one fault on Ascend910-1.
json device_info(const std::string& node, const std::string& code,
                 const std::string& level) {
  json fault = json::array({{{"fault_type", "CardUnhealthy"},
                             {"npu_name", "Ascend910-1"},
                             {"fault_level", level},
                             {"fault_code", code},
                             {"fault_time_and_level_map", json::object()}}});
  json info = {{"DeviceList",
                {{"huawei.com/Ascend910", "Ascend910-0"},
                 {"huawei.com/Ascend910-Unhealthy", "Ascend910-1"},
                 {"huawei.com/Ascend910-Fault", fault.dump()}}},
               {"UpdateTime", 1735689600}};
  // nlohmann's dump sorts keys and adds no spaces, as Go's encoding does.
  json cfg = {{"DeviceInfo", info},
              {"SuperPodID", 0},
              {"ServerIndex", 0},
              {"CheckCode", sha256_hex(info.dump())}};
  return {{"metadata",
           {{"name", "mindx-dl-deviceinfo-" + node},
            {"labels", {{"mx-consumer-cim", "true"}}}}},
          {"data", {{"DeviceInfoCfg", cfg.dump()}}}};
}

// The cluster round trips of these tests take longer than the default.
bool in_cluster_soon(const std::function<bool()>& ok,
                     std::chrono::milliseconds limit = 20s) {
  return recoverd::test::eventually(ok, limit, 50ms);
}

std::string read_file(const std::string& path) {
  std::ifstream f{path};
  return {std::istreambuf_iterator<char>{f}, {}};
}

} // namespace

TEST_CASE("e2e kube: the adapter keeps recoverd in step with a (fake) "
          "cluster and writes back what ClusterD writes") {
  temp_dir dir;
  fake_kube kube{dir};
  child_process daemon{
    RECOVERD_BIN,
    {"--listen", "127.0.0.1:0", "--http-listen", "off", "--data-dir",
     dir / "db", "--fault-flush-wait", "0", "--resource-release-wait", "0",
     "--hccl-convergence-wait", "0", "--report-timeout", "20s",
     "--job-fallback-wait", "60s",
     // One RestartRequest (weight 0.5) quarantines its node in the fleet's
     // node registry.
     "--node-quarantine-score", "0.5"},
    dir / "daemon.log"};
  auto address = daemon.read_line_after("recoverd: listening on ");
  REQUIRE_MESSAGE(!address.empty(), "the daemon did not start");
  std::ofstream{dir / "kubeconfig"}
    << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
       "    server: "
    << kube.url
    << "\nusers:\n- name: test\n  user: {}\ncontexts:\n- name: fake\n"
       "  context: {cluster: fake, user: test}\ncurrent-context: fake\n";
  child_process adapter{python,
                        {RECOVERD_KUBE, "--kubeconfig", dir / "kubeconfig",
                         "--recoverd", address, "--resync-seconds", "2",
                         "--release-clear-delay", "1",
                         "--log-level", "debug"},
                        dir / "kube.log"};
  auto adapter_log = [&] { return read_file(dir / "kube.log"); };
  auto platform = pb::Platform::NewStub(
    grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto get_job = [&](pb::JobStatus& out) {
    pb::JobRef ref;
    ref.set_jobid(job_id);
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 5s);
    return platform->GetJob(&c, ref, &out);
  };
  auto job = [&] {
    pb::JobStatus st;
    get_job(st);
    return st;
  };

  MESSAGE("nodes with their super-device ids, the user's reset ConfigMap, "
          "then a PodGroup and its pods");
  for (const char* node : {"node-a", "node-b", "node-c"})
    kube.call("POST", "/api/v1/nodes",
              {{"metadata",
                {{"name", node},
                 {"annotations",
                  {{"baseDeviceInfos",
                    R"({"Ascend910-0":{"IP":"10.1.0.1","SuperDeviceID":41},)"
                    R"("Ascend910-1":{"IP":"10.1.0.2","SuperDeviceID":42}})"}}}}}});
  kube.call("POST", "/api/v1/namespaces/train/configmaps",
            {{"metadata",
              {{"name", "reset-config-llama"},
               {"labels", {{"reset", "true"}}}}},
             {"data",
              {{"reset.json", R"({"status":"initializing"})"},
               {"checkCode", ""}}}});
  kube.call(
    "POST", pg_path,
    {{"metadata",
      {{"name", "llama-" + job_id},
       {"labels", {{"process-recover-enable", "on"}}},
       {"annotations",
        {{"recover-strategy", "recover,dump"},
         {"ProcessRecoverStrategy", "recover"}}},
       {"ownerReferences",
        json::array({{{"kind", "AscendJob"},
                      {"name", "llama"},
                      {"uid", job_id},
                      {"controller", true}}})}}},
     {"spec", {{"minMember", 2}}}});
  auto pg = pg_path + "/llama-" + job_id;
  kube.call("POST", pod_path, pod(0, "node-a", "Running"));
  auto first = kube.call("POST", pod_path, pod(1, "node-b", "Running"));
  {
    INFO("adapter log:\n" << adapter_log());
    REQUIRE(in_cluster_soon([&] {
      auto st = job();
      return st.spec().pods_size() == 2 && st.spec().pods(1).running();
    }));
  }
  auto st = job();
  CHECK(st.spec().name() == "llama");
  CHECK(st.spec().namespace_() == "train");
  CHECK(st.spec().platformmode());
  CHECK(st.spec().pods(1).uid() == first["metadata"]["uid"]);
  CHECK(st.spec().pods(1).nodename() == "node-b");
  REQUIRE(st.spec().pods(1).devices_size() == 2);
  CHECK(st.spec().pods(1).devices(1).rankid() == "3"); // 1 * 2 + 1

  MESSAGE("the agent registers; a device fault on node-b starts a recovery");
  recoverd::agent::client agent{address, job_id};
  REQUIRE(agent.init_clusterd().code() == 0);
  agent.start_subscribe();
  REQUIRE(in_cluster_soon([&] { return job().subscribed(); }));
  kube.call("POST", "/api/v1/namespaces/kube-system/configmaps",
            device_info("node-b", "80C98009", "RestartRequest"));
  std::string confirmed;
  json release;
  const std::string release_path
    = "/api/v1/namespaces/cluster-system/configmaps/fault-job-info";
  std::vector<std::string> seen;
  bool done = in_cluster_soon(
    [&] {
      if (auto sig = agent.next_signal(50ms)) {
        seen.push_back(sig->signaltype() + "/" + sig->changestrategy());
        const auto& type = sig->signaltype();
        if (type == "preExitProcess") {
          // The framework's part: the processes on the faulty device exit
          // and report it.
          std::vector<recoverd::agent::fault> faults;
          for (const auto& f : sig->faultranks())
            faults.emplace_back(f.rankid(), "1");
          agent.report_process_fault(faults);
        } else if (type == "stopTrain") {
          agent.report_stop_complete(0);
        } else if (type == "globalFault") {
          agent.report_recover_strategy({"recover", "dump"});
        } else if (type == "changeStrategy") {
          agent.report_recover_status(0, sig->changestrategy());
        }
      }
      // The platform's part: answer the confirm list on the PodGroup, once
      // the adapter has published the release information of the step.
      auto c = kube.annotation(pg, "ProcessConfirmFault");
      if (confirmed.empty() && c != "<absent>" && !c.empty()) {
        auto info = kube.get(release_path)["data"];
        if (info.is_object() && info.contains(job_id)) {
          release = json::parse(info[job_id].get<std::string>());
          confirmed = c;
          kube.call(
            "PATCH", pg,
            {{"metadata", {{"annotations", {{"ProcessResultFault", c}}}}}});
        }
      }
      return !job().lastoutcome().empty();
    },
    40s);
  std::string story;
  for (const auto& s : seen)
    story += s + " ";
  INFO("signals: " << story);
  {
    INFO("adapter log:\n" << adapter_log());
    REQUIRE(done);
  }
  CHECK(job().lastoutcome() == "recover-success");
  CHECK(story.find("preExitProcess/") != std::string::npos);
  MESSAGE("ProcessConfirmFault was written on the PodGroup: pod 1's ranks");
  CHECK(confirmed.find("3:1") != std::string::npos);
  CHECK(in_cluster_soon([&] {
    return kube.annotation(pg, "ProcessRecoverStatus") == "recover-success";
  }));
  MESSAGE("fault-job-info held the fault node's super-device ids and the "
          "super pod's healthy nodes during the step, and is cleared after "
          "the success");
  CHECK(release["0"]["SdIds"] == json::array({"41", "42"}));
  CHECK(release["0"]["FaultNodes"].contains("node-b"));
  CHECK(release["0"]["NodeNames"] == json::array({"node-a"}));
  CHECK(release["0"]["JobId"] == job_id);
  CHECK(in_cluster_soon([&] {
    auto info = kube.get(release_path)["data"];
    return info.is_object() && !info.contains(job_id);
  }));
  MESSAGE("recoverd removed the confirm list at the end: so does the PodGroup");
  CHECK(in_cluster_soon(
    [&] { return kube.annotation(pg, "ProcessConfirmFault") == "<absent>"; }));
  CHECK(kube.get(pg)["metadata"]["labels"]["process-recover-enable"] == "on");
  MESSAGE("the reset ConfigMap holds resetJson byte for byte");
  auto reset_path = "/api/v1/namespaces/train/configmaps/reset-config-llama";
  CHECK(in_cluster_soon([&] {
    return kube.get(reset_path)["data"]["reset.json"] == job().resetjson();
  }));
  auto reset = kube.get(reset_path);
  CHECK(reset["data"]["checkCode"] == job().resetcheckcode());
  CHECK(reset["data"]["checkCode"]
        == sha256_hex(reset["data"]["reset.json"].get<std::string>()));
  CHECK(reset["metadata"]["labels"]["reset"] == "true");

  MESSAGE("pod 1 is rescheduled: a new uid, not running yet");
  kube.call("DELETE", pod_path + "/llama-worker-1");
  auto second = kube.call("POST", pod_path, pod(1, "node-c", "Pending"));
  REQUIRE(in_cluster_soon([&] {
    auto s = job();
    return s.spec().pods_size() == 2
           && s.spec().pods(1).uid() == second["metadata"]["uid"]
           && !s.spec().pods(1).running();
  }));
  CHECK(job().spec().pods(1).nodename() == "node-c");

  MESSAGE("a confirm list left by the platform: job-level fallback, label "
          "pause until the job runs again, then on");
  kube.call("PATCH", pg,
            {{"metadata", {{"annotations", {{"ProcessConfirmFault", "1:1"}}}}}});
  REQUIRE(in_cluster_soon([&] {
    return job().spec().annotations().count("ProcessConfirmFault") > 0;
  }));
  agent.report_process_fault({{"0", "1"}});
  CHECK(in_cluster_soon([&] {
    if (auto sig = agent.next_signal(50ms))
      if (sig->signaltype() == "stopTrain")
        agent.report_stop_complete(0);
    return kube.get(pg)["metadata"]["labels"]["process-recover-enable"]
           == "pause";
  }));
  kube.call("PATCH", pod_path + "/llama-worker-1",
            {{"status", {{"phase", "Running"}}}});
  CHECK(in_cluster_soon(
    [&] {
      return kube.get(pg)["metadata"]["labels"]["process-recover-enable"]
             == "on";
    },
    30s));
  CHECK(in_cluster_soon(
    [&] { return job().lastoutcome() == "job-level-fallback"; }));

  MESSAGE("a watch broken by a compaction (410): the adapter lists again and "
          "loses no change");
  kube.call("POST", "/fake/pause");
  kube.call("PATCH", pg,
            {{"metadata", {{"annotations", {{"RankTableReady", "true"}}}}}});
  kube.call("POST", "/fake/compact");
  kube.call("POST", "/fake/break");
  kube.call("POST", "/fake/resume");
  CHECK(in_cluster_soon([&] {
    auto a = job().spec().annotations();
    return a.count("RankTableReady") > 0 && a.at("RankTableReady") == "true";
  }));
  CHECK(read_file(dir / "kube.log").find("listing again")
        != std::string::npos);

  MESSAGE("deleting the PodGroup deletes the job and clears the reset "
          "document");
  kube.call("DELETE", pg);
  CHECK(in_cluster_soon([&] {
    pb::JobStatus gone;
    return get_job(gone).error_code() == grpc::StatusCode::NOT_FOUND;
  }));
  CHECK(in_cluster_soon([&] {
    auto doc = json::parse(
      kube.get(reset_path)["data"]["reset.json"].get<std::string>());
    return doc["RankList"].empty() && doc["RestartFaultProcess"] == false;
  }));

  MESSAGE("the node registry quarantined node-b (its fault outlives the "
          "job): the adapter annotates it; an operator's clear removes the "
          "annotation, and only where the adapter put it");
  const std::string node_b = "/api/v1/nodes/node-b";
  const std::string node_a = "/api/v1/nodes/node-a";
  kube.call("PATCH", node_a,
            {{"metadata", {{"annotations", {{"NodeHealthyStatus",
                                             "UnHealthy"}}}}}});
  CHECK(in_cluster_soon([&] {
    return kube.annotation(node_b, "NodeHealthyStatus") == "UnHealthy";
  }));
  {
    pb::ClearNodeHealthRequest req;
    req.set_node("node-b");
    pb::ClearNodeHealthResponse resp;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 5s);
    auto st = platform->ClearNodeHealth(&c, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.noderegistry());
  }
  CHECK(in_cluster_soon([&] {
    return kube.annotation(node_b, "NodeHealthyStatus") == "<absent>";
  }));
  // Someone else's annotation on node-a stays.
  CHECK(kube.annotation(node_a, "NodeHealthyStatus") == "UnHealthy");

  MESSAGE("a PodGroup asking for hot switch: recoverd refuses the job with a "
          "clear error, the adapter logs it once and goes on");
  kube.call(
    "POST", pg_path,
    {{"metadata",
      {{"name", "hot"},
       {"labels",
        {{"process-recover-enable", "on"}, {"subHealthyStrategy", "hotSwitch"}}},
       {"ownerReferences",
        json::array({{{"name", "hot"}, {"uid", "hot-uid"}, {"controller", true}}})}}}});
  CHECK(in_cluster_soon([&] {
    return read_file(dir / "kube.log").find("hot-uid (train/hot): PutJob refused")
           != std::string::npos;
  }));
  CHECK(read_file(dir / "kube.log").find("hotSwitch") != std::string::npos);
  std::this_thread::sleep_for(2500ms); // one resync: not refused again
  auto log_text = read_file(dir / "kube.log");
  auto first_refusal = log_text.find("hot-uid (train/hot): PutJob refused");
  CHECK(log_text.find("hot-uid (train/hot): PutJob refused", first_refusal + 1)
        == std::string::npos);
  agent.stop();
}

TEST_CASE("e2e kube: the adapter's translation rules (Python unit tests)") {
  // Ranks from pods, strategies and switches from the PodGroup, the fault
  // ConfigMaps (levels, CheckCode, free-restart gate, node-level faults),
  // the reset document rules and the annotation merge.
  auto [rc, out] = run_command(
    "PYTHONPATH=" RECOVERD_KUBE_PYTHONPATH " " + python + " "
    + RECOVERD_SOURCE_DIR + "/tests/kube/test_translation.py");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("OK") != std::string::npos);
}

TEST_CASE("e2e kube: recoverd-kube's command line") {
  auto [vrc, version] = run_command(python + " " RECOVERD_KUBE " --version");
  CHECK(vrc == 0);
  CHECK(version.find(std::string{"recoverd-kube "} + RECOVERD_VERSION)
        != std::string::npos);
  auto [nrc, none] = run_command(python + " " RECOVERD_KUBE " --in-cluster");
  CHECK(nrc == 2);
  CHECK(none.find("--recoverd ADDR is required") != std::string::npos);
  auto [hrc, help] = run_command(python + " " RECOVERD_KUBE " --help");
  CHECK(hrc == 0);
  for (const char* flag : {"--kubeconfig", "--in-cluster", "--recoverd",
                           "--namespace", "--ca", "--cert", "--key",
                           "--token-file"})
    CHECK_MESSAGE(help.find(flag) != std::string::npos, flag);
}
