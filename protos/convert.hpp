#pragma once

/// Translation between the generated protobuf messages and the domain types
/// of `actors/types.hpp`. Used by `services/` (the API edge) and `storage/`
/// (the event-log codec); nothing else touches generated types.

#include "actors/model/types.hpp"
#include "platform.pb.h"
#include "recover.pb.h"

namespace recoverd::convert {

/// JobSpec -> job_spec.
job_spec from_proto(const recoverd::platform::v1::JobSpec& x);
/// job_spec -> JobSpec.
void to_proto(const job_spec& x, recoverd::platform::v1::JobSpec& out);

/// DeviceFault -> device_fault.
device_fault from_proto(const recoverd::platform::v1::DeviceFault& x);
/// device_fault -> DeviceFault.
void to_proto(const device_fault& x, recoverd::platform::v1::DeviceFault& out);

/// JobDeviceFaults -> job_device_faults.
job_device_faults from_proto(const recoverd::platform::v1::JobDeviceFaults& x);

/// job_status -> JobStatus.
void to_proto(const job_status& x, recoverd::platform::v1::JobStatus& out);
/// job_summary -> JobSummary.
void to_proto(const job_summary& x, recoverd::platform::v1::JobSummary& out);
/// node_health -> NodeHealth.
void to_proto(const node_health& x, recoverd::platform::v1::NodeHealth& out);
/// JobSummary -> job_summary (a stored digest's listing line).
job_summary from_proto(const recoverd::platform::v1::JobSummary& x);
/// NodeHealth -> node_health.
node_health from_proto(const recoverd::platform::v1::NodeHealth& x);
/// annotations_view -> Annotations.
void to_proto(const annotations_view& x,
              recoverd::platform::v1::Annotations& out);

/// process_signal -> ProcessManageSignal.
void to_proto(const process_signal& x, ::ProcessManageSignal& out);
/// ProcessManageSignal -> process_signal.
process_signal from_proto(const ::ProcessManageSignal& x);

/// Repeated string field -> vector.
template <class Repeated>
std::vector<std::string> to_vector(const Repeated& xs) {
  return {xs.begin(), xs.end()};
}

} // namespace recoverd::convert
