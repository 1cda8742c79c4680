#include "services/status_mapping.hpp"

#include <caf/sec.hpp>

#include "actors/error.hpp"
#include "actors/model/text.hpp"

namespace recoverd {

grpc::Status to_grpc_status(const caf::error& err) {
  if (!err)
    return grpc::Status::OK;
  // Messages may echo client input: bounded and valid UTF-8 on the wire.
  constexpr size_t max_message = 1024;
  auto msg = message_of(err);
  if (msg.size() > max_message || !is_utf8(msg))
    msg = excerpt(msg, max_message);
  if (auto code = errc_of(err)) {
    switch (*code) {
      case errc::invalid_argument:
        return {grpc::StatusCode::INVALID_ARGUMENT, msg};
      case errc::unknown_job:
        return {grpc::StatusCode::NOT_FOUND, msg};
      case errc::job_cap_reached:
      case errc::overloaded:
        return {grpc::StatusCode::RESOURCE_EXHAUSTED, msg};
      case errc::storage_failure:
        return {grpc::StatusCode::UNAVAILABLE,
                "state change refused, the event log cannot be written: "
                  + msg};
      case errc::shutting_down:
        return {grpc::StatusCode::UNAVAILABLE, msg};
      case errc::not_registered:
        return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case errc::unexpected_report:
        return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case errc::corrupt_record:
        return {grpc::StatusCode::DATA_LOSS, msg};
      case errc::history_purged:
        return {grpc::StatusCode::OUT_OF_RANGE, msg};
      case errc::unauthenticated:
        return {grpc::StatusCode::UNAUTHENTICATED, msg};
      case errc::permission_denied:
        return {grpc::StatusCode::PERMISSION_DENIED, msg};
      case errc::conflict:
        return {grpc::StatusCode::ABORTED, msg};
      case errc::deposed:
        // UNAVAILABLE, never PERMISSION_DENIED: agents retry it, and a
        // standby's answer must send them on to the leader.
        return {grpc::StatusCode::UNAVAILABLE, msg};
    }
  }
  if (err == caf::sec::request_timeout)
    return {grpc::StatusCode::DEADLINE_EXCEEDED, "internal request timed out"};
  return {grpc::StatusCode::INTERNAL, msg};
}

int to_http_status(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

} // namespace recoverd
