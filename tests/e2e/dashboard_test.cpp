// End-to-end: the web dashboard in a real browser. The real daemon is
// driven by recoverd-sim, Debian's headless Chromium loads `/`, and the
// rendered DOM must list the jobs and draw the incident's phases as bars
// proportional to their durations, with no console message.

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fixtures/daemon.hpp"
#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;

namespace {

const std::string sim_bin = RECOVERD_SIM_BIN;

// The flags that make a simulated recovery quick.
const std::vector<std::string> quick_waits{"--fault-flush-wait",      "0",
                                           "--resource-release-wait", "0",
                                           "--hccl-convergence-wait", "0"};

/// A daemon on free loopback ports whose simulated recoveries are quick.
running_daemon start_daemon(const temp_dir& dir,
                            std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), quick_waits.begin(), quick_waits.end());
  running_daemon d{dir, "127.0.0.1:0", extra};
  REQUIRE_MESSAGE(!d.http.empty(), "the daemon serves no HTTP");
  return d;
}

/// Chromium's path, or "" when it is not installed.
std::string chromium() {
  auto [rc, out] = run_command("command -v chromium");
  if (rc != 0 || out.empty())
    return {};
  return out.substr(0, out.find('\n'));
}

/// True when `probe` succeeds; otherwise says that the test is skipped
/// because `package` is missing.
bool have(const char* package, const std::string& probe) {
  if (run_command(probe).first == 0)
    return true;
  MESSAGE("SKIPPED: " << package
                      << " is not installed (scripts/setup.sh installs it)");
  return false;
}

/// What headless Chromium made of a page.
struct rendered_page {
  /// The DOM after the scripts ran.
  std::string dom;
  /// The page's console messages (Chromium's CONSOLE log lines).
  std::string console;
};

/// Loads `url` in headless Chromium with a fresh profile in `dir` and
/// returns the DOM once the page settled (a virtual time budget lets its
/// scripts and fetches run).
rendered_page render(const temp_dir& dir, const std::string& url,
                     const std::string& name) {
  auto log = dir / (name + ".chromium.log");
  // The page's own watch never ends: the budget, not the network, decides
  // when the DOM is dumped. `timeout` bounds a browser that hangs.
  auto cmd = "( timeout 60 " + chromium()
    + " --headless=new --no-sandbox --disable-gpu --no-first-run"
      " --user-data-dir="
    + (dir / (name + ".profile"))
    + " --enable-logging=stderr --v=0 --virtual-time-budget=5000"
      " --dump-dom '"
    + url + "' 2>" + log + " )";
  auto [rc, out] = run_command(cmd);
  REQUIRE_MESSAGE(rc == 0, "chromium failed (" << rc << "): " << out);
  rendered_page page;
  page.dom = std::move(out);
  std::ifstream in{log};
  std::string line;
  while (std::getline(in, line))
    if (line.find(":CONSOLE") != std::string::npos)
      page.console += line + "\n";
  return page;
}

/// The element that starts with `open` (e.g. `<tr data-job="x"`) up to the
/// end of `tag`; "" when there is none. The elements read here do not nest.
std::string element(const std::string& dom, const std::string& open,
                    const std::string& tag) {
  auto i = dom.find(open);
  if (i == std::string::npos)
    return {};
  auto j = dom.find("</" + tag + ">", i);
  return dom.substr(i, j == std::string::npos ? std::string::npos : j - i);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto i = text.find(what); i != std::string::npos;
       i = text.find(what, i + what.size()))
    ++n;
  return n;
}

int64_t int_of(const nlohmann::json& x) {
  if (x.is_string())
    return std::stoll(x.get<std::string>());
  return x.is_number() ? x.get<int64_t>() : 0;
}

/// Runs recoverd-sim's hardware fault on `jobs` jobs and keeps them.
void simulate(const running_daemon& d, int jobs) {
  auto [rc, out] = run_command(sim_bin + " --server " + d.address + " --jobs "
                               + std::to_string(jobs)
                               + " --ranks 4 --scenario hardware-fault "
                                 "--keep-jobs --quiet");
  REQUIRE_MESSAGE(rc == 0, out);
}

/// Checks that the timeline in `dom` shows `incident`'s phases, each as
/// wide as its share of the incident's duration.
void check_timeline(const std::string& dom, const nlohmann::json& incident) {
  const auto& phases = incident["phases"];
  REQUIRE(phases.size() >= 3);
  auto total = std::max<int64_t>(
    {int_of(incident["durationMs"]), int_of(phases.back()["sinceStartMs"]), 1});
  const std::regex bar{R"re(<div class="phase [^"]*" data-phase="([^"]+)" )re"
                       R"re(data-duration-ms="(\d+)" title="[^"]*" )re"
                       R"re(style="width: ([0-9.]+)%;">)re"};
  std::vector<std::smatch> drawn{
    std::sregex_iterator{dom.begin(), dom.end(), bar}, std::sregex_iterator{}};
  REQUIRE(drawn.size() == phases.size());
  for (size_t i = 0; i < phases.size(); ++i) {
    auto name = phases[i]["name"].get<std::string>();
    auto ms = int_of(phases[i]["durationMs"]);
    CAPTURE(name);
    CHECK(drawn[i][1] == name);
    CHECK(std::stoll(drawn[i][2]) == ms);
    CHECK(std::stod(drawn[i][3])
          == doctest::Approx(100.0 * static_cast<double>(ms)
                             / static_cast<double>(total))
               .epsilon(0.001));
    // Labelled with its name and duration.
    CHECK(dom.find("<span class=\"phase-name\">" + name + "</span>")
          != std::string::npos);
  }
}

} // namespace

TEST_CASE("e2e: the dashboard in headless Chromium lists the simulated jobs "
          "and draws an incident's phases as a timeline") {
  if (!have("chromium", "command -v chromium"))
    return;
  temp_dir dir;
  auto d = start_daemon(dir);
  simulate(d, 2);
  httplib::Client http{"http://" + d.http};
  auto res = http.Get("/api/v1/jobs/sim-hardware-fault-0/incidents");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  auto incidents = nlohmann::json::parse(res->body)["incidents"];
  REQUIRE(incidents.size() == 1);

  MESSAGE("the page opened on one job (#job=)");
  auto page
    = render(dir, "http://" + d.http + "/#job=sim-hardware-fault-0", "job");
  const auto& dom = page.dom;
  CHECK_MESSAGE(page.console.empty(), page.console);
  for (const char* job : {"sim-hardware-fault-0", "sim-hardware-fault-1"}) {
    CAPTURE(job);
    auto row = element(dom, std::string{"<tr data-job=\""} + job + "\"", "tr");
    REQUIRE_FALSE(row.empty());
    CHECK(row.find(">sim<") != std::string::npos);
    CHECK(row.find(">INIT<") != std::string::npos);
    CHECK(row.find(">Healthy<") != std::string::npos);
    CHECK(row.find(">recover-success<") != std::string::npos);
  }
  CHECK(element(dom, "<tr data-job=\"sim-hardware-fault-0\"", "tr")
          .find("class=\"selected\"")
        != std::string::npos);
  CHECK(dom.find("<section id=\"job\" class=\"card\" "
                 "aria-labelledby=\"job-title\">")
        != std::string::npos);
  CHECK(dom.find("Incidents of sim-hardware-fault-0") != std::string::npos);
  CHECK(count(dom, "<li class=\"incident\"") == 1);
  CHECK(dom.find("data-kind=\"recovery\" data-outcome=\"recover-success\"")
        != std::string::npos);
  check_timeline(dom, incidents[0]);
  MESSAGE("the live watch is open; the fleet panels rendered something");
  CHECK(dom.find("data-state=\"live\">live<") != std::string::npos);
  CHECK(element(dom, "<div id=\"stats-body\">", "section").find("loading")
        == std::string::npos);
  CHECK(element(dom, "<div id=\"nodes-body\">", "section").find("loading")
        == std::string::npos);
  MESSAGE("no error is shown");
  CHECK(count(dom, "class=\"error\"") == 2);
  CHECK(count(dom, "class=\"error\" hidden=\"\"") == 2);
}

TEST_CASE("e2e: with access control the dashboard loads without "
          "credentials, asks for a token, and shows the jobs with a token "
          "from the URL fragment") {
  if (!have("chromium", "command -v chromium"))
    return;
  // The simulator declares its jobs as a platform without credentials:
  // run it first, then restart the daemon on the same data with access
  // control.
  temp_dir dir;
  simulate(start_daemon(dir), 1);
  const std::string token = "dash-viewer-token";
  auto [hrc, hash] = run_command("printf %s " + token + " | sha256sum");
  REQUIRE(hrc == 0);
  {
    std::ofstream f{dir / "authz.toml"};
    f << "[[token]]\nname = \"dash\"\nrole = \"viewer\"\nsha256 = \""
      << hash.substr(0, 64) << "\"\n";
  }
  // (tests/services/web_test.cpp checks the answers themselves.)
  auto d = start_daemon(dir, {"--authz", dir / "authz.toml"});

  MESSAGE("no token: the page asks for one and shows no job");
  auto anonymous = render(dir, "http://" + d.http + "/", "anonymous");
  CHECK_MESSAGE(anonymous.console.empty(), anonymous.console);
  CHECK(anonymous.dom.find("<section id=\"login\" class=\"card\" "
                           "aria-labelledby=\"login-title\">")
        != std::string::npos);
  CHECK(anonymous.dom.find("data-state=\"signed-out\"") != std::string::npos);
  CHECK(anonymous.dom.find("<tr data-job=") == std::string::npos);

  MESSAGE("#token=: the jobs and the incident, the token gone from the URL");
  auto signed_in = render(
    dir, "http://" + d.http + "/#token=" + token + "&job=sim-hardware-fault-0",
    "token");
  CHECK_MESSAGE(signed_in.console.empty(), signed_in.console);
  CHECK(signed_in.dom.find("<section id=\"login\" class=\"card\" hidden=\"\"")
        != std::string::npos);
  CHECK(signed_in.dom.find("<tr data-job=\"sim-hardware-fault-0\"")
        != std::string::npos);
  CHECK(count(signed_in.dom, "<li class=\"incident\"") == 1);
  CHECK(signed_in.dom.find("data-phase=\"result\"") != std::string::npos);
  CHECK(signed_in.dom.find("data-state=\"live\">live<") != std::string::npos);
  CHECK(signed_in.dom.find(token) == std::string::npos);
}

TEST_CASE("e2e: the dashboard updates live from the watch: jobs created "
          "after the page loaded appear with their incident, no reload; a "
          "click on a row opens that job") {
  if (!have("chromium", "command -v chromium"))
    return;
  if (!have("python3-websocket", "/usr/bin/python3 -c 'import websocket'"))
    return;
  temp_dir dir;
  auto d = start_daemon(dir);
  // The script opens the page, waits for its watch, runs the simulator and
  // waits for the page to show what the simulator did.
  auto [rc, out] = run_command(
    "/usr/bin/python3 " RECOVERD_SOURCE_DIR "/tests/e2e/dashboard_live.py "
    + chromium() + " " + (dir / "live.profile") + " 'http://" + d.http
    + "/#job=sim-hardware-fault-0' 2 -- " + sim_bin + " --server " + d.address
    + " --jobs 2 --ranks 4 --scenario hardware-fault --keep-jobs --quiet");
  REQUIRE_MESSAGE(rc == 0, out);
  // The script's answer is its last line.
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  auto seen = nlohmann::json::parse(out.substr(out.rfind('\n') + 1));
  CHECK(
    seen["jobs"]
    == nlohmann::json::array({"sim-hardware-fault-0", "sim-hardware-fault-1"}));
  CHECK(seen["same"] == true);
  CHECK(seen["events"].get<int>() > 0);
  CHECK(seen["live"] == "live");
  CHECK(seen["incidents"] == 1);
  CHECK(seen["phases"].front() == "fault_seen");
  CHECK(seen["phases"].back() == "result");
  CHECK_MESSAGE(seen["errors"].empty(), seen["errors"].dump());
  MESSAGE("a click on the other job's row opens its incidents");
  const auto& clicked = seen["clicked"];
  CHECK(clicked["title"] == "Incidents of sim-hardware-fault-1");
  CHECK(clicked["same"] == true);
  CHECK(clicked["incidents"] == 1);
  CHECK(clicked["phases"].back() == "result");
  CHECK_MESSAGE(clicked["errors"].empty(), clicked["errors"].dump());
}
