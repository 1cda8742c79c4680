#include "services/grpc_log.hpp"

#include <grpc/support/log.h>

#include "actors/log.hpp"

namespace recoverd {

namespace {

spdlog::level::level_enum level_of(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      return spdlog::level::debug;
    case GPR_LOG_SEVERITY_INFO:
      return spdlog::level::info;
    default:
      return spdlog::level::err;
  }
}

void to_spdlog(gpr_log_func_args* args) {
  auto level = level_of(args->severity);
  if (!logger().should_log(level))
    return;
  logger().log(level, "grpc: {} ({}:{})",
               args->message != nullptr ? args->message : "",
               args->file != nullptr ? args->file : "?", args->line);
}

} // namespace

void route_grpc_logs() {
  gpr_set_log_function(to_spdlog);
}

} // namespace recoverd
