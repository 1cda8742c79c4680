// End-to-end: the daemon reads a data directory written by the previous
// record version (flow steps holding the whole recovery state, before
// delta events) and answers exactly as the version that wrote it did; a new
// event appended to an old log, and a restart, keep it so.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;
namespace fs = std::filesystem;

namespace {

const std::string daemon_bin = RECOVERD_BIN;
const std::string ctl_bin = RECOVERCTL_BIN;
const fs::path fixture = fs::path{RECOVERD_SOURCE_DIR} / "tests/fixtures/v1";

const char* jobs[]
  = {"sim-hardware-fault-0",        "sim-uce-retry-0",  "sim-network-fault-0",
     "sim-fault-during-recovery-0", "sim-switch-nic-0", "sim-stress-test-0"};

std::string slurp(const fs::path& p) {
  std::ifstream f{p};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct daemon_on {
  std::unique_ptr<child_process> proc;
  std::string grpc;
  std::unique_ptr<httplib::Client> http;

  daemon_on(const temp_dir& dir, const std::string& tag) {
    proc = std::make_unique<child_process>(
      daemon_bin,
      std::vector<std::string>{"--listen", "127.0.0.1:0", "--http-listen",
                               "127.0.0.1:0", "--data-dir", dir / "data"},
      dir / ("daemon-" + tag + ".log"));
    grpc = proc->read_line_after("recoverd: listening on ");
    REQUIRE_MESSAGE(!grpc.empty(),
                    "the daemon did not start on the old log: "
                      << slurp(dir / ("daemon-" + tag + ".log")));
    auto address = proc->read_line_after("recoverd: http on ");
    REQUIRE(!address.empty());
    http = std::make_unique<httplib::Client>("http://" + address);
  }

  std::string get(const std::string& path) {
    auto res = http->Get(path.c_str());
    REQUIRE_MESSAGE(res, "GET " << path << " failed");
    REQUIRE_MESSAGE(res->status == 200, path << ": " << res->body);
    return res->body;
  }

  // (seq, kind) of every event of `job`, and whether each has a summary.
  nlohmann::json kinds(const std::string& job) {
    auto evs = nlohmann::json::parse(
      get("/api/v1/jobs/" + job + "/events?limit=1000"))["events"];
    auto result = nlohmann::json::array();
    for (const auto& e : evs) {
      CHECK_MESSAGE(!e.value("summary", std::string{}).empty(),
                    job << " event " << e["seq"] << " has no summary");
      result.push_back({{"seq", e["seq"]}, {"kind", e["kind"]}});
    }
    return result;
  }
};

// An answer without the members incidents gained after the fixture was
// written (time lost, its split by phase, attribution): the rest must be
// what the previous version answered.
nlohmann::json without_goodput(const std::string& body) {
  auto x = nlohmann::json::parse(body);
  auto strip = [](nlohmann::json& incident) {
    for (const char* key : {"timeLostMs", "lostByPhase", "attribution"})
      incident.erase(key);
  };
  if (x.contains("lastIncident"))
    strip(x["lastIncident"]);
  if (x.contains("incidents"))
    for (auto& i : x["incidents"])
      strip(i);
  return x;
}

} // namespace

TEST_CASE("e2e: a data directory of the previous record version replays "
          "to the same jobs and incidents") {
  temp_dir dir;
  auto [trc, tout] = run_command("tar xzf " + (fixture / "data.tar.gz").string()
                                 + " -C " + dir.path().string());
  REQUIRE_MESSAGE(trc == 0, tout);
  {
    daemon_on d{dir, "1"};
    for (const std::string job : jobs) {
      CAPTURE(job);
      CHECK(without_goodput(d.get("/api/v1/jobs/" + job))
            == nlohmann::json::parse(slurp(fixture / (job + ".job.json"))));
      CHECK(without_goodput(d.get("/api/v1/jobs/" + job + "/incidents"))
            == nlohmann::json::parse(
              slurp(fixture / (job + ".incidents.json"))));
      CHECK(d.kinds(job)
            == nlohmann::json::parse(slurp(fixture / (job + ".kinds.json"))));
    }
    // A new record after the old ones.
    auto [arc, aout] = run_command(ctl_bin + " --server " + d.grpc
                                   + " annotate sim-stress-test-0 team=blue");
    REQUIRE_MESSAGE(arc == 0, aout);
  }
  daemon_on d{dir, "2"};
  auto job = nlohmann::json::parse(d.get("/api/v1/jobs/sim-stress-test-0"));
  auto old
    = nlohmann::json::parse(slurp(fixture / "sim-stress-test-0.job.json"));
  CHECK(job["state"]["spec"]["annotations"]["team"] == "blue");
  CHECK(job["state"]["recovery"] == old["state"]["recovery"]);
  auto incidents
    = without_goodput(d.get("/api/v1/jobs/sim-stress-test-0/incidents"));
  auto old_incidents = nlohmann::json::parse(
    slurp(fixture / "sim-stress-test-0.incidents.json"));
  CHECK(incidents["incidents"] == old_incidents["incidents"]);
  CHECK(incidents["lastSeq"] == "60");
}
