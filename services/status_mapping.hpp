#pragma once

/// The one place where errors become gRPC statuses.

#include <grpcpp/support/status.h>

#include <caf/error.hpp>

namespace recoverd {

/// Maps an error to a gRPC status: invalid_argument -> INVALID_ARGUMENT,
/// unknown_job -> NOT_FOUND, job_cap_reached and overloaded ->
/// RESOURCE_EXHAUSTED, storage_failure and shutting_down -> UNAVAILABLE,
/// not_registered -> FAILED_PRECONDITION, corrupt_record -> DATA_LOSS,
/// CAF's request_timeout -> DEADLINE_EXCEEDED, anything else -> INTERNAL.
/// An empty error is OK.
grpc::Status to_grpc_status(const caf::error& err);

} // namespace recoverd
