// step_bench: what one step of the pure core costs on a small job and on a
// very large one (design §7: a step's CPU time and event bytes do not grow
// with the job's rank count beyond the ranks the step names).
//
// No threads, no actors, no storage: a job is driven through the pure job
// model (`decide`, then `storage::encode_event` of every event, then
// `apply`), exactly the work a job actor does around the journal for one
// input. Two steps are measured on a 16-rank and a 16,384-rank job (pods of
// 8 devices):
// 1. an absorbed ReportProcessFault naming one rank while a flow runs (the
//    job waits for its strategy report), as the report benchmark sends it;
//    the ranks named cycle through the first 16, so the fault set is the
//    same on both jobs;
// 2. a full recovery cycle: fault, stopTrain delivered, stop report, global
//    fault delivered, strategy report, changeStrategy delivered, status
//    report, and the zero-length waits firing, back to INIT.
// The baseline is the same step on the 16-rank job in the same run; the
// ratio large / small should be 1. A snapshot does grow with the ranks. It
// is measured as the job actor writes one (`encode_snapshot_after`): the
// usual one, whose events leave the spec as it is, copies the model but the
// spec and takes the spec's bytes kept from the one before; the first after
// a spec change encodes the spec again (one in the same commit as the
// change copies and encodes the whole model). The rows "with its share of
// snapshots" add the usual snapshot's cost divided by the absorbed steps
// between two snapshots under the daemon's policy (`snapshot_due`), and
// show what every 20 events would cost instead.

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/config.hpp"
#include "actors/error.hpp"
#include "actors/model/job_model.hpp"
#include "actors/log.hpp"
#include "actors/model/recovery.hpp"
#include "storage/event_codec.hpp"

using namespace recoverd;

namespace {

constexpr size_t devices_per_pod = 8;

// The daemon's default snapshot cadence (--snapshot-every).
const uint64_t snapshot_every = job_config{}.snapshot_every;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "step_bench: %s\n", what.c_str());
  std::exit(1);
}

// CPU time of this thread in ns: the core is single-threaded, and a shared
// machine's other load does not count.
int64_t cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

job_spec make_spec(size_t ranks) {
  job_spec spec;
  spec.job_id = "step-" + std::to_string(ranks);
  spec.name = "train-" + spec.job_id;
  spec.ns = "bench";
  spec.framework = "pytorch";
  spec.recover_strategies = {"retry", "recover", "dump"};
  spec.process_recover_enable = true;
  size_t rank = 0;
  for (size_t p = 0; p < ranks / devices_per_pod; ++p) {
    pod x;
    x.pod_rank = static_cast<int32_t>(p);
    x.uid = spec.job_id + "-pod-" + std::to_string(p) + "-3f2a9c1e";
    char node[32];
    std::snprintf(node, sizeof(node), "node-%05zu", p);
    x.node_name = node;
    x.running = true;
    x.super_pod_id = static_cast<int32_t>(p / 64);
    for (size_t d = 0; d < devices_per_pod; ++d)
      x.devices.push_back({std::to_string(d), std::to_string(rank++)});
    spec.pods.push_back(std::move(x));
  }
  return spec;
}

/// What the steps measured so far cost.
struct tally {
  size_t steps = 0;
  size_t events = 0;
  uint64_t bytes = 0;
  int64_t cpu_ns = 0;
};

// One job driven through the pure model, as its job actor would drive it.
class job_driver {
public:
  explicit job_driver(size_t ranks) {
    waits_.fault_flush = millis{0};
    waits_.resource_release = millis{0};
    waits_.hccl_convergence = millis{0};
    waits_.restart_all = millis{0};
    client_ = {"", "taskd", "ipv4:10.0.0.1:40000"};
    auto spec = make_spec(ranks);
    client_.job_id = spec.job_id;
    auto t0 = cpu_ns();
    run(put_cmd{std::move(spec)});
    put_ms = static_cast<double>(cpu_ns() - t0) / 1e6;
    run(init_cmd{client_});
    run(register_cmd{client_, false});
    run(subscribe_cmd{client_, 0});
  }

  /// Decides, encodes and applies one input; its cost goes to `counted`.
  void run(const command& cmd) {
    auto t0 = cpu_ns();
    auto d = decide(model_, cmd);
    if (!d)
      die(model_.spec.job_id + ": " + message_of(d.error()));
    uint64_t bytes = 0;
    for (auto& body : d->events) {
      event ev{model_.seq + 1, now_, std::move(body)};
      bytes += storage::encode_event(ev).size();
      model_ = apply(std::move(model_), ev);
    }
    counted.cpu_ns += cpu_ns() - t0;
    counted.bytes += bytes;
    counted.events += d->events.size();
    ++counted.steps;
    now_ += 7;
  }

  void flow(flow_input in) {
    in.now_ms = now_;
    in.fresh_uuid = "17A0" + std::to_string(now_) + "-"
                    + std::to_string(model_.seq) + "c0ffee";
    run(flow_cmd{std::move(in), waits_});
  }

  // Delivers the pending signal and fires due deadlines, as the job actor
  // does after a step.
  void settle() {
    for (int i = 0; i < 20; ++i) {
      const auto& rec = model_.rec;
      flow_input in;
      if (rec.flow.outbox) {
        in.name = send_result_event(*rec.flow.outbox);
        if (in.name == ev::none)
          return;
        in.delivered = *rec.flow.outbox;
      } else if (rec.flow.deadline_ms > 0 && rec.flow.deadline_ms <= now_) {
        in.name = rec.flow.deadline_event;
      } else {
        return;
      }
      flow(std::move(in));
    }
  }

  void report(report_kind kind, std::vector<std::string> strategies,
              const std::string& strategy = "") {
    flow_input in;
    in.name = ev::receive_report;
    in.kind = kind;
    in.strategies = std::move(strategies);
    in.report.strategy = strategy;
    flow(std::move(in));
    settle();
  }

  /// A ReportProcessFault naming `rank`, classified as the job actor does.
  void process_fault(const std::string& rank) {
    std::vector<fault_rank> faults{{rank, "1"}};
    auto kind = classify_process_fault(model_.rec, model_.spec, model_.init,
                                       faults, model_.ranks.get());
    if (!kind)
      die(kind.error().message());
    flow_input in;
    in.name = *kind;
    in.kind = report_kind::process;
    in.faults = std::move(faults);
    flow(std::move(in));
  }

  /// Fault, stop, global fault, strategy, recover, success.
  void recovery_cycle(size_t round) {
    process_fault(std::to_string(round % 16));
    settle();
    report(report_kind::stop, {});
    report(report_kind::strategy, {"recover", "dump"});
    report(report_kind::status, {}, "recover");
    if (model_.rec.flow.state != st::init)
      die(model_.spec.job_id + ": the cycle ended in "
          + to_string(model_.rec.flow.state));
  }

  /// Starts a flow and stops at the strategy wait.
  void to_strategy_wait() {
    process_fault("0");
    settle();
    report(report_kind::stop, {});
  }

  /// Writes a snapshot as the job actor does, after events that leave the
  /// spec as it is; its cost goes to `snapshots`. With `spec_changed`, the
  /// spec's bytes kept from the snapshot before are dropped first (as an
  /// event that changes the spec drops them), and the cost goes to
  /// `first_snapshots`.
  void snapshot(bool spec_changed) {
    if (spec_changed)
      spec_bytes_.reset();
    auto t0 = cpu_ns();
    auto bytes = storage::encode_snapshot_after(model_, spec_bytes_, {}).size();
    auto& t = spec_changed ? first_snapshots : snapshots;
    t.cpu_ns += cpu_ns() - t0;
    t.bytes += bytes;
    ++t.steps;
  }

  flow_state state() const {
    return model_.rec.flow.state;
  }

  tally counted;
  tally snapshots;
  tally first_snapshots;
  double put_ms = 0;

private:
  timeouts waits_;
  client_info client_;
  job_model model_;
  std::optional<std::string> spec_bytes_;
  int64_t now_ = 1'700'000'000'000;
};

/// Per-step figures of one job size.
struct figures {
  size_t ranks = 0;
  double put_ms = 0;
  double absorbed_us = 0;
  double absorbed_bytes = 0;
  size_t absorbed_samples = 0;
  /// A snapshot whose events keep the spec (the usual one).
  double snapshot_us = 0;
  double snapshot_bytes = 0;
  /// The first snapshot after a spec change.
  double first_snapshot_us = 0;
  /// Absorbed steps per snapshot under the daemon's policy.
  uint64_t snapshot_cadence = 0;
  double cycle_step_us = 0;
  double cycle_step_bytes = 0;
  double cycle_us = 0;
  double cycle_bytes = 0;
  double cycle_steps = 0;
  size_t cycles = 0;

  /// A snapshot's CPU time and bytes, per absorbed step.
  double snapshot_share_us() const {
    return snapshot_us / static_cast<double>(snapshot_cadence);
  }
  double snapshot_share_bytes() const {
    return snapshot_bytes / static_cast<double>(snapshot_cadence);
  }
};

figures measure(size_t ranks, double min_seconds, size_t max_samples) {
  figures result;
  result.ranks = ranks;
  auto budget = static_cast<int64_t>(min_seconds * 1e9);
  {
    job_driver job{ranks};
    result.put_ms = job.put_ms;
    job.to_strategy_wait();
    job.counted = {};
    for (size_t n = 0; n < max_samples
                       && (n < 3 || job.counted.cpu_ns < budget);
         ++n)
      job.process_fault(std::to_string(n % 16));
    if (job.state() == st::init)
      die("the absorbed faults ended the flow");
    auto steps = static_cast<double>(job.counted.steps);
    result.absorbed_samples = job.counted.steps;
    result.absorbed_us = static_cast<double>(job.counted.cpu_ns) / 1e3 / steps;
    result.absorbed_bytes = static_cast<double>(job.counted.bytes) / steps;
    for (size_t n = 0; n < max_samples
                       && (n < 3 || job.first_snapshots.cpu_ns < budget);
         ++n)
      job.snapshot(true);
    for (size_t n = 0; n < max_samples
                       && (n < 3 || job.snapshots.cpu_ns < budget);
         ++n)
      job.snapshot(false);
    auto per = [](const tally& t) {
      return static_cast<double>(t.cpu_ns) / 1e3
             / static_cast<double>(t.steps);
    };
    result.first_snapshot_us = per(job.first_snapshots);
    result.snapshot_us = per(job.snapshots);
    result.snapshot_bytes = static_cast<double>(job.snapshots.bytes)
                            / static_cast<double>(job.snapshots.steps);
    // The daemon's policy, after a snapshot of this size, on absorbed steps.
    snapshot_tail tail{0, 0, static_cast<uint64_t>(result.snapshot_bytes)};
    while (!snapshot_due(tail, snapshot_every)) {
      tail.events += 1;
      tail.bytes += static_cast<uint64_t>(result.absorbed_bytes);
    }
    result.snapshot_cadence = tail.events;
  }
  {
    job_driver job{ranks};
    job.recovery_cycle(0); // warm-up, not counted
    job.counted = {};
    size_t cycles = 0;
    for (; cycles < max_samples && (cycles < 3 || job.counted.cpu_ns < budget);
         ++cycles)
      job.recovery_cycle(cycles + 1);
    auto steps = static_cast<double>(job.counted.steps);
    auto n = static_cast<double>(cycles);
    result.cycles = cycles;
    result.cycle_steps = steps / n;
    result.cycle_us = static_cast<double>(job.counted.cpu_ns) / 1e3 / n;
    result.cycle_bytes = static_cast<double>(job.counted.bytes) / n;
    result.cycle_step_us = static_cast<double>(job.counted.cpu_ns) / 1e3 / steps;
    result.cycle_step_bytes = static_cast<double>(job.counted.bytes) / steps;
  }
  return result;
}

void print(const figures& f) {
  std::printf("%zu ranks (%zu pods x %zu devices; PutJob decide+apply %.1f "
              "ms):\n",
              f.ranks, f.ranks / devices_per_pod, devices_per_pod, f.put_ms);
  std::printf("  absorbed ReportProcessFault naming one rank: %.1f us CPU, "
              "%.0f event bytes per step (%zu samples)\n",
              f.absorbed_us, f.absorbed_bytes, f.absorbed_samples);
  std::printf("  snapshot (the model but its spec copied and encoded, the "
              "spec's bytes kept; %.1f us CPU the first time after a spec "
              "change): %.1f us CPU, %.0f bytes; written every %llu absorbed "
              "steps, so %.1f us and %.0f bytes more per step (every %llu "
              "events it would be %.1f us and %.0f bytes)\n",
              f.first_snapshot_us, f.snapshot_us, f.snapshot_bytes,
              static_cast<unsigned long long>(f.snapshot_cadence),
              f.snapshot_share_us(), f.snapshot_share_bytes(),
              static_cast<unsigned long long>(snapshot_every),
              f.snapshot_us / snapshot_every,
              f.snapshot_bytes / snapshot_every);
  std::printf("  full recovery cycle: %.1f steps, %.1f us CPU and %.0f bytes "
              "per step, %.1f us and %.0f bytes written per cycle (%zu "
              "cycles)\n",
              f.cycle_steps, f.cycle_step_us, f.cycle_step_bytes, f.cycle_us,
              f.cycle_bytes, f.cycles);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  size_t small = 16;
  size_t large = 16'384;
  double min_seconds = 1.0;
  size_t max_samples = 2000;
  CLI::App cli{"step_bench: CPU time and event bytes of one step of the pure "
               "core, small job vs large job"};
  cli.set_version_flag("--version", std::string{"step_bench "} + RECOVERD_VERSION);
  cli.add_option("--small", small, "ranks of the small job (the baseline)")
    ->capture_default_str();
  cli.add_option("--large", large, "ranks of the large job")
    ->capture_default_str();
  cli.add_option("--min-seconds", min_seconds,
                 "CPU seconds to spend on each measurement (at least 3 "
                 "samples)")
    ->capture_default_str();
  cli.add_option("--max-samples", max_samples,
                 "most steps (or cycles) per measurement")
    ->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  if (small < devices_per_pod || large < devices_per_pod
      || small % devices_per_pod != 0 || large % devices_per_pod != 0) {
    std::fprintf(stderr, "step_bench: rank counts must be multiples of 8\n");
    return 2;
  }
  configure_logging("error", "text");
  auto s = measure(small, min_seconds, max_samples);
  print(s);
  auto l = measure(large, min_seconds, max_samples);
  print(l);
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0; };
  std::printf("ratio %zu / %zu ranks: absorbed fault CPU %.1f, bytes %.1f; "
              "cycle step CPU %.1f, bytes %.1f (design target: 1, does not "
              "grow with ranks)\n",
              large, small, ratio(l.absorbed_us, s.absorbed_us),
              ratio(l.absorbed_bytes, s.absorbed_bytes),
              ratio(l.cycle_step_us, s.cycle_step_us),
              ratio(l.cycle_step_bytes, s.cycle_step_bytes));
  // Machine-readable lines for scripts/bench.sh (BENCHMARKS.md).
  std::printf("RESULT\tJob size: absorbed ReportProcessFault step, CPU (%zu "
              "vs %zu ranks)\t%.1f us\t%.1f us (%zu ranks)\t%.1f\tdoes not "
              "grow (1)\n",
              large, small, l.absorbed_us, s.absorbed_us, small,
              ratio(l.absorbed_us, s.absorbed_us));
  std::printf("RESULT\tJob size: absorbed ReportProcessFault step, event "
              "bytes (%zu vs %zu ranks)\t%.0f B\t%.0f B (%zu ranks)\t%.1f\t"
              "does not grow (1)\n",
              large, small, l.absorbed_bytes, s.absorbed_bytes, small,
              ratio(l.absorbed_bytes, s.absorbed_bytes));
  std::printf("RESULT\tJob size: recovery-cycle step, CPU (%zu vs %zu ranks)"
              "\t%.1f us\t%.1f us (%zu ranks)\t%.1f\tdoes not grow (1)\n",
              large, small, l.cycle_step_us, s.cycle_step_us, small,
              ratio(l.cycle_step_us, s.cycle_step_us));
  std::printf("RESULT\tJob size: recovery-cycle step, event bytes (%zu vs %zu "
              "ranks)\t%.0f B\t%.0f B (%zu ranks)\t%.1f\tdoes not grow (1)\n",
              large, small, l.cycle_step_bytes, s.cycle_step_bytes, small,
              ratio(l.cycle_step_bytes, s.cycle_step_bytes));
  // With its share of the snapshots, under the daemon's policy: bounded
  // (a snapshot adds at most twice the events' bytes), not flat. `step` and
  // `snap` pick the figure (CPU or bytes) of a step and of a snapshot.
  auto share_row = [&](const char* what, const char* unit, auto step,
                       auto snap) {
    auto with = [&](const figures& f) {
      return step(f) + snap(f) / static_cast<double>(f.snapshot_cadence);
    };
    auto every_20 = step(l) + snap(l) / static_cast<double>(snapshot_every);
    std::printf("RESULT\tJob size: absorbed ReportProcessFault step with its "
                "share of snapshots, %s (%zu vs %zu ranks)\t%.1f %s\t%.1f %s "
                "(%zu ranks)\t%.1f\tbounded (every 20 events: %.0f)\n",
                what, large, small, with(l), unit, with(s), unit, small,
                ratio(with(l), with(s)), ratio(every_20, with(s)));
  };
  share_row(
    "CPU", "us", [](const figures& f) { return f.absorbed_us; },
    [](const figures& f) { return f.snapshot_us; });
  share_row(
    "bytes", "B", [](const figures& f) { return f.absorbed_bytes; },
    [](const figures& f) { return f.snapshot_bytes; });
  std::printf("RESULT\tLog bytes per full recovery cycle (%zu ranks; %zu "
              "ranks: %.0f B)\t%.0f B\t-\t-\t(before/after, no target)\n",
              small, large, l.cycle_bytes, s.cycle_bytes);
  return 0;
}
