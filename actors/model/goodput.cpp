#include "actors/model/goodput.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "actors/model/incidents.hpp"

namespace recoverd {

namespace {

template <size_t N>
bool one_of(const std::array<const char*, N>& xs, const std::string& x) {
  return std::any_of(xs.begin(), xs.end(),
                     [&](const char* y) { return x == y; });
}

bool starts_with(const std::string& x, std::string_view prefix) {
  return x.compare(0, prefix.size(), prefix) == 0;
}

// Strategies a flow may decide.
constexpr std::array<const char*, 6> strategies
  = {"retry", "recover-in-place", "recover", "elastic-training", "dump",
     "exit"};

// How flows end, as the machines and the fold name it.
constexpr std::array<const char*, 20> outcomes = {
  "recovered",           "recover-success",         "recover-failed",
  "retry-success",       "retry-failed",            "dump-success",
  "dump-failed",         "exit-completed",          "exit-failed",
  "elastic-training-failed", "recover-in-place-failed", "killed",
  "job-level-fallback",  "restart-budget-killed",   "restart-budget-fallback",
  "interrupted",         "job deleted",             "job re-created",
  "ended",               "switch nic finish"};

constexpr std::array<const char*, 4> causes
  = {cause::agent_report, cause::fault_center, cause::stress_test,
     cause::operator_request};

} // namespace

const std::vector<int64_t>& duration_bounds_ms() {
  static const std::vector<int64_t> bounds
    = {1000,   5000,   10000,   30000,   60000,  120000,
       300000, 600000, 1800000, 3600000, 7200000};
  return bounds;
}

void duration_histogram::add(int64_t ms) {
  ms = std::max<int64_t>(ms, 0);
  const auto& bounds = duration_bounds_ms();
  if (buckets.empty())
    buckets.resize(bounds.size() + 1);
  size_t i = 0;
  while (i < bounds.size() && ms > bounds[i])
    ++i;
  ++buckets[i];
  sum_ms += ms;
  ++count;
}

void duration_histogram::merge(const duration_histogram& x) {
  if (buckets.size() < x.buckets.size())
    buckets.resize(x.buckets.size());
  for (size_t i = 0; i < x.buckets.size(); ++i)
    buckets[i] += x.buckets[i];
  sum_ms += x.sum_ms;
  count += x.count;
}

std::string kind_label(const std::string& kind) {
  if (kind == "recovery" || kind == "switch" || kind == "stress")
    return kind;
  return "other";
}

std::string strategy_label(const std::string& strategy) {
  if (strategy.empty())
    return "none";
  return one_of(strategies, strategy) ? strategy : "other";
}

std::string outcome_label(const std::string& outcome) {
  if (one_of(outcomes, outcome))
    return outcome;
  // Operator messages carry details (a JSON result, ranks): only their
  // gist is a label.
  if (starts_with(outcome, "stress test finish"))
    return "stress test finish";
  if (outcome.find("failed") != std::string::npos
      || outcome.find("timeout") != std::string::npos)
    return "operator failed";
  return "other";
}

std::string cause_label(const std::string& source) {
  return one_of(causes, source) ? source : cause::other;
}

void goodput_tally::add(const incident& x) {
  auto lost = x.time_lost_ms();
  auto cause = cause_label(x.attribution.source);
  ++incidents;
  lost_ms += lost;
  if (x.kind == "recovery") {
    ++recoveries;
    recovery_lost_ms += lost;
  }
  ++by_cause[cause];
  flow_durations[{kind_label(x.kind), strategy_label(x.strategy),
                  outcome_label(x.outcome)}]
    .add(x.duration_ms());
  lost_by_cause[cause].add(lost);
}

void goodput_tally::merge(const goodput_tally& x) {
  incidents += x.incidents;
  lost_ms += x.lost_ms;
  recoveries += x.recoveries;
  recovery_lost_ms += x.recovery_lost_ms;
  for (const auto& [key, n] : x.by_cause)
    by_cause[key] += n;
  for (const auto& [key, h] : x.flow_durations)
    flow_durations[key].merge(h);
  for (const auto& [key, h] : x.lost_by_cause)
    lost_by_cause[key].merge(h);
}

void goodput_figures::merge(const goodput_figures& x) {
  incidents += x.incidents;
  active += x.active;
  recoveries += x.recoveries;
  recovery_lost_ms += x.recovery_lost_ms;
  time_lost_ms += x.time_lost_ms;
  observed_ms += x.observed_ms;
  for (const auto& [key, n] : x.by_cause)
    by_cause[key] += n;
}

void goodput_figures::finish() {
  mttr_ms = recoveries == 0
              ? 0
              : recovery_lost_ms / static_cast<int64_t>(recoveries);
  if (observed_ms <= 0) {
    ettr = 1.0;
    return;
  }
  auto lost = std::clamp<int64_t>(time_lost_ms, 0, observed_ms);
  ettr = static_cast<double>(observed_ms - lost)
         / static_cast<double>(observed_ms);
}

} // namespace recoverd
