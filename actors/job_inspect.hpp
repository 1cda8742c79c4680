#pragma once

/// The inspection view of a JOB actor (kept apart from `job.cpp`, which only
/// answers with it).

#include "actors/inspection.hpp"
#include "actors/job.hpp"

namespace recoverd {

/// The folded state and the open streams of a job actor's state.
job_inspection inspect_job(const job_state& st);

/// A job actor's answer to the shared status request: named "job/<id>",
/// with its recovery state and health as facts.
component_status job_status_of(const job_state& st, status_verbosity v);

} // namespace recoverd
