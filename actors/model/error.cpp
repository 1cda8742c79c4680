#include "actors/model/error.hpp"

namespace recoverd {

const char* to_string(errc x) {
  switch (x) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::unknown_job: return "unknown_job";
    case errc::job_cap_reached: return "job_cap_reached";
    case errc::storage_failure: return "storage_failure";
    case errc::not_registered: return "not_registered";
    case errc::unexpected_report: return "unexpected_report";
    case errc::overloaded: return "overloaded";
    case errc::corrupt_record: return "corrupt_record";
    case errc::shutting_down: return "shutting_down";
    case errc::history_purged: return "history_purged";
    case errc::unauthenticated: return "unauthenticated";
    case errc::permission_denied: return "permission_denied";
    case errc::conflict: return "conflict";
    case errc::deposed: return "deposed";
  }
  return "unknown";
}

} // namespace recoverd
