// The second table: what a report means in the state that receives it.
// (state, report kind, result code, operator action) -> the event of the
// transition table. The first matching row wins; a state with no row for
// the report does not wait for it (401, nothing changes).

#include "actors/model/machines/machine.hpp"

#include <array>

#include "actors/model/text.hpp"
#include "actors/model/validate.hpp"

namespace recoverd::machines {

namespace {

/// How a row matches the report's result code.
enum class code_is : uint8_t { any, equal, not_equal };

/// A condition on the report's content beyond its code.
enum class when : uint8_t {
  always,
  /// The stress result isolates a node or faults a rank (or a fault was
  /// reported while the test ran).
  stress_result_fails,
};

struct report_row {
  flow_state state;
  report_kind kind;
  code_is match;
  int32_t code;
  /// `none`: any operator action.
  om_kind om;
  when condition;
  flow_event event;
};

constexpr auto any_om = om_kind::none;

// clang-format off
const std::vector<report_row>& report_rows() {
  using rk = report_kind;
  static const std::vector<report_row> table = {
    // ReportStopComplete: 404 means a process was not ready (R12).
    {st::wait_stop_complete, rk::stop, code_is::equal, 404, any_om, when::always, ev::process_not_ready},
    {st::wait_stop_complete, rk::stop, code_is::any, 0, any_om, when::always, ev::receive_report},
    // The pause of an operator action.
    {st::wait_pause_complete, rk::stop, code_is::equal, 499, any_om, when::always, ev::process_pause_fail},
    {st::wait_pause_complete, rk::stop, code_is::any, 0, om_kind::stress, when::always, ev::stress_test_recv_pause},
    {st::wait_pause_complete, rk::stop, code_is::any, 0, om_kind::switch_nic, when::always, ev::switch_nic_recv_pause},
    // A link switch: 406 from ReportRecoverStatus reports a fault (§8.2 step 4).
    {st::wait_switch_nic_finished, rk::status, code_is::equal, 406, any_om, when::always, ev::switch_nic_recv_fault},
    {st::wait_switch_nic_finished, rk::switch_nic, code_is::not_equal, 0, any_om, when::always, ev::switch_nic_fail},
    {st::wait_switch_nic_finished, rk::switch_nic, code_is::any, 0, any_om, when::always, ev::receive_report},
    // A stress test: 406 reports a fault (§9.2 step 4); the result decides.
    {st::wait_stress_test_finished, rk::status, code_is::equal, 406, any_om, when::always, ev::stress_test_recv_fault},
    {st::wait_stress_test_finished, rk::stress, code_is::any, 0, any_om, when::stress_result_fails, ev::stress_test_fail},
    {st::wait_stress_test_finished, rk::stress, code_is::any, 0, any_om, when::always, ev::receive_report},
    // The continue of an operator action.
    {st::wait_continue_train, rk::status, code_is::equal, 499, any_om, when::always, ev::continue_train_fail},
    {st::wait_continue_train, rk::status, code_is::any, 0, om_kind::stress, when::always, ev::stress_test_recv_continue},
    {st::wait_continue_train, rk::status, code_is::any, 0, om_kind::switch_nic, when::always, ev::switch_nic_recv_continue},
    // Process-level recovery: the strategies, then the results.
    {st::wait_recover_strategy, rk::strategy, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_step_retry_status, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_process_recover_status, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_dump_status, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_scale_in_isolate, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_scale_in_status, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
    {st::wait_scale_out_status, rk::status, code_is::any, 0, any_om, when::always, ev::receive_report},
  };
  return table;
}
// clang-format on

bool matches(const report_row& row, const recovery& rec, const flow_input& in) {
  if (row.state != rec.flow.state || row.kind != in.kind)
    return false;
  if (row.match == code_is::equal && in.report.code != row.code)
    return false;
  if (row.match == code_is::not_equal && in.report.code == row.code)
    return false;
  if (row.om != any_om && row.om != rec.action.kind)
    return false;
  return row.condition == when::always || stress_fails(rec, in.stress_result);
}

} // namespace

expected<flow_event> report_event(const recovery& rec, const flow_input& in) {
  for (const auto& row : report_rows())
    if (matches(row, rec, in))
      return row.event;
  return fail(errc::unexpected_report,
              std::string{"not expected in state "}
                + to_string(rec.flow.state));
}

} // namespace recoverd::machines

namespace recoverd {

// The last row of a state names the report it waits for (the rows before it
// are the special codes of that wait).
report_kind expected_report(flow_state state) {
  auto result = report_kind::none;
  for (const auto& row : machines::report_rows())
    if (row.state == state)
      result = row.kind;
  return result;
}

} // namespace recoverd

namespace recoverd {

namespace {

// Every strategy name of the protocol (reference §0): configured, reported
// by agents, or sent as changeStrategy.
constexpr std::array<std::string_view, 12> strategy_names = {
  "retry",     "recover",          "recover-in-place", "dump",
  "exit",      "continue",         "elastic-training", "downgrade",
  "upgrade",   "migration",        "job-rescheduling", "pod-rescheduling"};

failure bad_field(const std::string& field, const std::string& what) {
  return fail(errc::invalid_argument, field + ": " + what);
}

std::string quoted(std::string_view x) {
  return "\"" + excerpt(x) + "\"";
}

} // namespace

bool is_canonical_rank(std::string_view x) {
  if (x.empty() || x.size() > 9 || (x.size() > 1 && x[0] == '0'))
    return false;
  for (auto c : x)
    if (c < '0' || c > '9')
      return false;
  return true;
}

bool is_strategy_name(std::string_view x) {
  for (auto name : strategy_names)
    if (x == name)
      return true;
  return false;
}

const std::string& strategy_names_text() {
  static const std::string result = [] {
    std::string xs;
    for (auto name : strategy_names) {
      if (!xs.empty())
        xs += ", ";
      xs += name;
    }
    return xs;
  }();
  return result;
}

failure validate_report(const job_spec& spec, const flow_input& in,
                        const rank_index* ranks) {
  switch (in.kind) {
    case report_kind::process:
      // An empty report would start a recovery of no rank.
      if (in.faults.empty())
        return bad_field("faultRanks", "must not be empty (a fault report "
                                       "names at least one rank)");
      return failure{};
    case report_kind::strategy:
      for (size_t i = 0; i < in.strategies.size(); ++i)
        if (!is_strategy_name(in.strategies[i]))
          return bad_field("strategies[" + std::to_string(i) + "]",
                           "unknown strategy " + quoted(in.strategies[i])
                             + " (known: " + strategy_names_text() + ")");
      return failure{};
    case report_kind::stop: {
      if (in.faults.empty())
        return failure{};
      rank_index local;
      if (ranks == nullptr) {
        local = rank_index{spec};
        ranks = &local;
      }
      for (size_t i = 0; i < in.faults.size(); ++i) {
        const auto& f = in.faults[i];
        auto field = "faultRanks[" + std::to_string(i) + "]";
        if (!is_canonical_rank(f.rank_id))
          return bad_field(field + ".rankId",
                           "must be a canonical non-negative decimal, got "
                             + quoted(f.rank_id));
        if (ranks->find(f.rank_id) == nullptr)
          return bad_field(field + ".rankId",
                           "rank " + f.rank_id
                             + " is not in the job's topology");
        if (!f.fault_type.empty() && !fault_type_from_string(f.fault_type))
          return bad_field(field + ".faultType",
                           "unknown type " + quoted(f.fault_type)
                             + " (allowed: \"\", 0, 1, 2)");
      }
      return failure{};
    }
    case report_kind::stress:
      return validate_stress_results(spec, in.stress_result, ranks);
    default: return failure{};
  }
}

} // namespace recoverd
