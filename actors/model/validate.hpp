#pragma once

/// Checks of client input that several entries share: rank numerals,
/// strategy names, and the reports of the Recover protocol. Pure; a refusal
/// is an `invalid_argument` failure naming the field in the request's
/// spelling and echoing client text only as an excerpt.

#include <string>
#include <string_view>

#include "actors/model/error.hpp"
#include "actors/model/recovery.hpp"
#include "actors/model/topology.hpp"

namespace recoverd {

/// True if `x` is a global rank in canonical decimal form: digits only, no
/// sign, no spaces, no leading zero (except "0" itself), at most 9 digits.
/// Canonical numerals make "1" and "01" the same rank or an error, never
/// two ranks.
bool is_canonical_rank(std::string_view x);

/// True if `x` is a strategy name of the protocol (reference §0).
bool is_strategy_name(std::string_view x);

/// The strategy names of the protocol, comma-separated, for messages.
const std::string& strategy_names_text();

/// Checks a report's content before the machine sees it:
/// - ReportProcessFault names at least one rank;
/// - ReportRecoverStrategy names only strategies of the protocol;
/// - ReportStopComplete's faultRanks are canonical ranks of the job with a
///   known (or empty) fault type;
/// - ReplyStressTestResult as `validate_stress_results`.
/// The ranks and types of ReportProcessFault are `classify_process_fault`'s.
/// @param ranks The job's rank index; built from `spec` when null.
failure validate_report(const job_spec& spec, const flow_input& in,
                        const rank_index* ranks = nullptr);

} // namespace recoverd
