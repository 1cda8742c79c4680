// The dashboard's files on the HTTP port, over real loopback sockets: their
// types and caching headers, the Content-Security-Policy that keeps the page
// on this origin, and access control (the files are public, the API they
// call is not).

#include <doctest/doctest.h>

#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actors/error.hpp"
#include "fixtures/temp_dir.hpp"
#include "services/access.hpp"
#include "services/app.hpp"

using namespace recoverd;

namespace {

constexpr const char* viewer_token = "dashboard-viewer-token";

/// A daemon with an HTTP port; with `authz`, access control by a viewer
/// token.
std::unique_ptr<app> start_daemon(const test::temp_dir& dir, bool authz) {
  app_options opts;
  opts.listen = "127.0.0.1:0";
  opts.http_listen = "127.0.0.1:0";
  opts.data_dir = dir / "db";
  opts.worker_threads = 2;
  if (authz) {
    auto policy = parse_authz("[[token]]\nname = \"dash\"\nrole = "
                              "\"viewer\"\nsha256 = \""
                                + sha256_hex(viewer_token) + "\"\n",
                              "test.toml");
    REQUIRE_MESSAGE(policy, message_of(policy.error()));
    opts.authz = std::make_shared<const authz_policy>(std::move(*policy));
  }
  auto x = app::start(opts);
  REQUIRE_MESSAGE(x, (x ? "" : message_of(x.error())));
  REQUIRE((*x)->http_port() > 0);
  return std::move(*x);
}

} // namespace

TEST_CASE("http: the dashboard is served at / and /ui/ with its type, an "
          "ETag, no-cache and a same-origin CSP; other paths stay 404") {
  test::temp_dir dir;
  auto daemon = start_daemon(dir, false);
  httplib::Client http{"127.0.0.1", daemon->http_port()};
  for (const auto& [path, type] :
       std::vector<std::pair<std::string, std::string>>{
         {"/", "text/html; charset=utf-8"},
         {"/ui/app.js", "text/javascript; charset=utf-8"},
         {"/ui/style.css", "text/css; charset=utf-8"}}) {
    CAPTURE(path);
    auto res = http.Get(path);
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type") == type);
    CHECK(res->get_header_value("Cache-Control") == "no-cache");
    CHECK(res->get_header_value("X-Content-Type-Options") == "nosniff");
    auto csp = res->get_header_value("Content-Security-Policy");
    CHECK(csp.find("default-src 'none'") != std::string::npos);
    CHECK(csp.find("script-src 'self';") != std::string::npos);
    CHECK(csp.find("connect-src 'self';") != std::string::npos);
    CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
    MESSAGE("nothing from another origin: no URL with a scheme");
    CHECK(res->body.find("http:") == std::string::npos);
    CHECK(res->body.find("https:") == std::string::npos);
    CHECK(res->body.find("//cdn") == std::string::npos);
    MESSAGE("the ETag revalidates: 304 without a body");
    auto etag = res->get_header_value("ETag");
    REQUIRE(etag.size() > 2);
    CHECK(etag.front() == '"');
    auto same = http.Get(path, {{"If-None-Match", etag}});
    REQUIRE(same);
    CHECK(same->status == 304);
    CHECK(same->body.empty());
    auto other = http.Get(path, {{"If-None-Match", "\"not-this-one\""}});
    REQUIRE(other);
    CHECK(other->status == 200);
    CHECK(other->body == res->body);
  }
  MESSAGE("the page loads exactly its own files");
  auto page = http.Get("/");
  REQUIRE(page);
  CHECK(page->body.find("<script src=\"/ui/app.js\" defer></script>")
        != std::string::npos);
  CHECK(page->body.find("<link rel=\"stylesheet\" href=\"/ui/style.css\">")
        != std::string::npos);
  CHECK(page->body.find("<table id=\"jobs\">") != std::string::npos);
  for (const char* path : {"/index.html", "/ui/", "/ui/nope.js", "/ui/app.js/x",
                           "/ui/../ui/app.js", "/app.js"}) {
    CAPTURE(path);
    auto res = http.Get(path);
    REQUIRE(res);
    CHECK(res->status == 404);
    CHECK(nlohmann::json::parse(res->body)["error"]["status"] == "NOT_FOUND");
    CHECK_FALSE(res->has_header("Content-Security-Policy"));
  }
  daemon->stop();
}

TEST_CASE("access control: the dashboard's files need no credentials; the "
          "API and the watch it calls do") {
  test::temp_dir dir;
  auto daemon = start_daemon(dir, true);
  httplib::Client http{"127.0.0.1", daemon->http_port()};
  for (const char* path : {"/", "/ui/app.js", "/ui/style.css"}) {
    CAPTURE(path);
    auto res = http.Get(path);
    REQUIRE(res);
    CHECK(res->status == 200);
  }
  const httplib::Headers token{
    {"Authorization", std::string{"Bearer "} + viewer_token}};
  const httplib::Headers wrong{{"Authorization", "Bearer nope"}};
  for (const char* path :
       {"/api/v1/jobs", "/api/v1/status", "/api/v1/watch", "/ui/nope.js"}) {
    CAPTURE(path);
    auto none = http.Get(path);
    REQUIRE(none);
    CHECK(none->status == 401);
    auto refused = http.Get(path, wrong);
    REQUIRE(refused);
    CHECK(refused->status == 401);
  }
  auto jobs = http.Get("/api/v1/jobs", token);
  REQUIRE(jobs);
  CHECK(jobs->status == 200);
  MESSAGE("an unknown path with a good token is still a 404");
  auto nope = http.Get("/ui/nope.js", token);
  REQUIRE(nope);
  CHECK(nope->status == 404);
  daemon->stop();
}
