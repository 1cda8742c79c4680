#pragma once

/// gRPC core's own log lines (handshake failures, transport errors) go
/// through recoverd's logger, so they share its format (text or JSON lines)
/// and level instead of reaching stderr in gRPC's format.

namespace recoverd {

/// Routes gRPC core's log lines to `logger()`: gRPC's ERROR as error, INFO
/// as info, DEBUG as debug, each as "grpc: MESSAGE (FILE:LINE)". Which
/// lines gRPC produces is still set by its GRPC_VERBOSITY (default ERROR).
/// Call once, before the first gRPC object is made.
void route_grpc_logs();

} // namespace recoverd
