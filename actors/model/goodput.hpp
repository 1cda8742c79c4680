#pragma once

/// Goodput figures of a job and of the fleet, folded from finished
/// incidents: time lost, MTTR, the effective training time ratio (ETTR),
/// incidents by cause, and duration histograms with bounded labels for
/// /metrics. Pure: the caller passes the time.

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace recoverd {

struct incident;

/// Upper bounds of the duration buckets, in milliseconds (1 s .. 2 h); a
/// last, implicit bucket holds everything longer.
const std::vector<int64_t>& duration_bounds_ms();

/// A histogram of durations over `duration_bounds_ms()`.
struct duration_histogram {
  /// Counts per bucket (not cumulative); the last one is +Inf.
  std::vector<uint64_t> buckets;
  /// Sum of the durations, ms.
  int64_t sum_ms = 0;
  /// Durations counted.
  uint64_t count = 0;

  /// Counts one duration (negative ones count as 0).
  void add(int64_t ms);

  /// Adds another histogram's counts.
  void merge(const duration_histogram& x);
};

/// The label value of an incident kind: "recovery", "switch", "stress" or
/// "other".
std::string kind_label(const std::string& kind);

/// The label value of a strategy: a known strategy, "none" when empty, or
/// "other".
std::string strategy_label(const std::string& strategy);

/// The label value of an outcome: a known outcome (e.g. "recover-success",
/// "killed", "job deleted"), "stress test finish" for any stress result,
/// "operator failed" for a failed operator action, or "other".
std::string outcome_label(const std::string& outcome);

/// The label value of a cause: one of `cause::*`, "other" for anything
/// else.
std::string cause_label(const std::string& source);

/// A flow duration series' labels: (kind, strategy, outcome), bounded.
using flow_key = std::tuple<std::string, std::string, std::string>;

/// Sums over finished incidents. Bounded: every map is keyed by label
/// values from closed vocabularies.
struct goodput_tally {
  /// Finished incidents.
  uint64_t incidents = 0;
  /// Their time lost, ms.
  int64_t lost_ms = 0;
  /// Finished incidents of kind "recovery" (whatever their outcome), and
  /// their time lost (MTTR = recovery_lost_ms / recoveries).
  uint64_t recoveries = 0;
  int64_t recovery_lost_ms = 0;
  /// Finished incidents by cause label.
  std::map<std::string, uint64_t> by_cause;
  /// Flow durations by (kind, strategy, outcome) labels.
  std::map<flow_key, duration_histogram> flow_durations;
  /// Time lost by cause label.
  std::map<std::string, duration_histogram> lost_by_cause;

  /// Counts one finished incident.
  void add(const incident& x);

  /// Adds another tally.
  void merge(const goodput_tally& x);
};

/// A job's or the fleet's goodput at some time.
struct goodput_figures {
  /// Incidents: finished ones plus the running one.
  uint64_t incidents = 0;
  /// Of those, running now.
  uint64_t active = 0;
  /// Finished recovery incidents, and their time lost (ms).
  uint64_t recoveries = 0;
  int64_t recovery_lost_ms = 0;
  /// Mean time to recover: recovery_lost_ms / recoveries; 0 when none.
  int64_t mttr_ms = 0;
  /// Time lost by every incident (a running one until now), ms.
  int64_t time_lost_ms = 0;
  /// Observed training time, ms: from the job's creation (its first event)
  /// to its deletion or to now, summed over the job's lives.
  int64_t observed_ms = 0;
  /// Effective training time ratio: (observed - lost) / observed, within
  /// [0, 1]; 1 when nothing was observed yet.
  double ettr = 1.0;
  /// Incidents (running ones too) by cause label.
  std::map<std::string, uint64_t> by_cause;

  /// Adds another job's figures (the ratios are recomputed by `finish`).
  void merge(const goodput_figures& x);

  /// Computes `mttr_ms` and `ettr` from the sums.
  void finish();
};

} // namespace recoverd
