#pragma once

/// The one place where errors become gRPC statuses.

#include <grpcpp/support/status.h>

#include <caf/error.hpp>

namespace recoverd {

/// Maps an error to a gRPC status: invalid_argument -> INVALID_ARGUMENT,
/// unknown_job -> NOT_FOUND, job_cap_reached and overloaded ->
/// RESOURCE_EXHAUSTED, storage_failure and shutting_down -> UNAVAILABLE,
/// not_registered -> FAILED_PRECONDITION, corrupt_record -> DATA_LOSS,
/// unauthenticated -> UNAUTHENTICATED, permission_denied ->
/// PERMISSION_DENIED,
/// CAF's request_timeout -> DEADLINE_EXCEEDED, anything else -> INTERNAL.
/// An empty error is OK. A message longer than 1 KiB is cut (ending with
/// its size) and made valid UTF-8.
grpc::Status to_grpc_status(const caf::error& err);

/// Maps a gRPC status code to the HTTP status of the JSON API:
/// INVALID_ARGUMENT and OUT_OF_RANGE -> 400, UNAUTHENTICATED -> 401,
/// PERMISSION_DENIED -> 403, NOT_FOUND -> 404,
/// FAILED_PRECONDITION -> 409, RESOURCE_EXHAUSTED -> 429, UNAVAILABLE -> 503,
/// DEADLINE_EXCEEDED -> 504, OK -> 200, anything else -> 500.
int to_http_status(grpc::StatusCode code);

} // namespace recoverd
