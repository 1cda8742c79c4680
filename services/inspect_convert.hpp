#pragma once

/// Domain -> proto for the Inspect API (protos/inspect.proto). Shared by the
/// gRPC service, the HTTP gateway and `recoverctl` (offline), so every way
/// of looking at a job says the same thing.

#include <string>

#include "actors/model/incidents.hpp"
#include "actors/model/node_registry.hpp"
#include "actors/inspection.hpp"
#include "actors/status.hpp"
#include "inspect.pb.h"

namespace recoverd::convert {

/// incident -> Incident.
void to_proto(const incident& x, recoverd::inspection::v1::Incident& out);

/// goodput_figures -> Goodput (without the job id).
void to_proto(const goodput_figures& x, recoverd::inspection::v1::Goodput& out);

/// goodput_report -> StatsResponse (GetStats).
void to_proto(const goodput_report& x,
              recoverd::inspection::v1::StatsResponse& out);

/// A job's folded state -> JobState (the snapshot record's state, so the
/// fields are exactly those stored).
void to_proto(const job_model& x, recoverd::events::v1::JobState& out);

/// job_view -> JobOverview (a ListJobs line).
void to_proto(const job_view& x, recoverd::inspection::v1::JobOverview& out);

/// job_view -> JobDetail (GetJob).
void to_proto(const job_view& x, recoverd::inspection::v1::JobDetail& out);

/// inspected_event -> EventRecord.
void to_proto(const inspected_event& x,
              recoverd::inspection::v1::EventRecord& out);

/// published_event -> EventRecord (decodes the record for kind and summary;
/// a record that does not decode keeps kind "unknown").
void to_proto(const published_event& x,
              recoverd::inspection::v1::EventRecord& out);

/// job_at -> JobAt.
void to_proto(const job_at& x, recoverd::inspection::v1::JobAt& out);

/// component_status -> ComponentStatus.
void to_proto(const component_status& x,
              recoverd::inspection::v1::ComponentStatus& out);

/// Every component's status -> StatusResponse (healthy when each is).
void to_proto(const std::vector<component_status>& xs,
              recoverd::inspection::v1::StatusResponse& out);

/// The node registry's listing -> ListNodesResponse.
void to_proto(const node_listing& x,
              recoverd::inspection::v1::ListNodesResponse& out);

/// Renders a message as proto3 JSON (lowerCamel names, default values
/// printed); `pretty` adds indentation.
std::string to_json(const google::protobuf::Message& msg, bool pretty = false);

} // namespace recoverd::convert
