#include <doctest/doctest.h>

#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <nlohmann/json.hpp>

#include "fixtures/log_capture.hpp"
#include "services/grpc_log.hpp"

using namespace recoverd;

TEST_CASE("grpc log: gRPC core's lines reach recoverd's logger in its format "
          "and level") {
  route_grpc_logs();
  // gRPC drops its lines until it is initialised (the daemon's server does
  // that).
  grpc_init();
  log_capture logs{"json"};
  gpr_log(GPR_ERROR, "handshake failed with %s", "a bad certificate");
  auto lines = logs.lines("handshake failed");
  REQUIRE(lines.size() == 1);
  auto line = nlohmann::json::parse(lines[0]);
  CHECK(line["level"] == "error");
  auto msg = line["msg"].get<std::string>();
  CHECK(msg.rfind("grpc: handshake failed with a bad certificate (", 0) == 0);
  CHECK(msg.find("grpc_log_test.cpp:") != std::string::npos);
  MESSAGE("with gRPC verbose, its info lines are info, its debug lines are "
          "below the logger's level (info) and dropped");
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  gpr_log(GPR_INFO, "an info line of gRPC");
  gpr_log(GPR_DEBUG, "a debug line of gRPC");
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  auto info = logs.lines("an info line of gRPC");
  REQUIRE(info.size() == 1);
  CHECK(nlohmann::json::parse(info[0])["level"] == "info");
  CHECK(logs.lines("a debug line of gRPC").empty());
  grpc_shutdown();
}
