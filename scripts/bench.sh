#!/usr/bin/env bash
# The benchmarks, in one command: builds, runs every benchmark of
# tools/bench (each prints its figures, a baseline measured in the same run
# and the ratio), and writes BENCHMARKS.md with the figures of design §7,
# the machine they ran on and the raw output.
#   bash scripts/bench.sh            # full sizes (several minutes)
#   QUICK=1 bash scripts/bench.sh    # small sizes, to try the command
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null

# A build that just ran leaves the cores busy for a while (and the 1-minute
# load average says so): the first benchmarks wait for it, up to 3 minutes.
waited=0
load1() { cut -d' ' -f1 /proc/loadavg; }
while [[ ${waited} -lt 180 ]] && awk -v l="$(load1)" 'BEGIN { exit !(l > 0.8) }'; do
  sleep 5
  waited=$((waited + 5))
done
load_at_start="$(cut -d' ' -f1-3 /proc/loadavg) (after ${waited} s waiting for a 1-minute load below 0.8)"
echo "load average at the start: ${load_at_start}"

out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
if [[ -n "${QUICK:-}" ]]; then
  journal_args=(--records 20000 --rounds 1)
  recovery_args=(--jobs 100 --samples 50 --cycles 5 --reports 20)
  recovery_256_args=(--jobs 100 --samples 50 --cycles 5 --reports 20)
  storm_args=(--jobs 100 --storms 1)
  storm_light_args=(--jobs 100 --storms 1)
  storm_idle_args=(--jobs 100 --storms 1 --idle 1)
  storm_soak_args=(--jobs 100 --storms 4)
  startup_args=(--jobs 1000 --events 100000)
  memory_args=(--jobs 1000 --settle 2)
  step_args=(--large 2048 --min-seconds 0.2)
else
  journal_args=()
  recovery_args=()
  recovery_256_args=()
  storm_args=(--storms 3)
  storm_light_args=(--storms 5)
  storm_idle_args=(--storms 5 --idle 15)
  storm_soak_args=(--storms 20)
  startup_args=()
  memory_args=()
  step_args=()
fi

# Output files sort in run order; a name ending in -N is the Nth run of a
# benchmark, which its table rows say.
n=0
run() {
  local name=$1
  shift
  n=$((n + 1))
  echo "== ${name}: $*"
  "$@" 2>&1 | tee "${out}/$(printf '%02d' "${n}")-${name}.txt"
  echo
}
# The cheap ones run twice: two same-run ratios show how much they move.
for i in 1 2; do
  run "journal_bench-${i}" ./build/journal_bench "${journal_args[@]}"
done
for i in 1 2; do
  run "recovery_bench-16ranks-${i}" ./build/recovery_bench "${recovery_args[@]}"
done
# The same with access control on and the platform over mTLS (issue 12:
# the report ratio stays within 10% of the plaintext one).
for i in 1 2; do
  run "recovery_bench-secure-${i}" ./build/recovery_bench --secure \
    "${recovery_args[@]}"
done
for i in 1 2; do
  run "recovery_bench-256ranks-${i}" ./build/recovery_bench --ranks 256 \
    "${recovery_256_args[@]}"
done
for i in 1 2; do
  run "storm_bench-${i}" ./build/storm_bench "${storm_args[@]}"
done
# The same with the agents' answers held until every agent has stopTrain:
# the daemon's stop fan-out alone (agents and daemon share the cores here).
for i in 1 2; do
  run "storm_bench-held-${i}" ./build/storm_bench --hold-stop \
    "${storm_args[@]}"
done
# Agents on gRPC's callback API over one channel: the agents' own cost no
# longer weighs on the cores (a thread per stream is most of it above), as
# when they run on other machines; five storms each (they set up fast).
for i in 1 2; do
  run "storm_bench-light-${i}" ./build/storm_bench --light-agents \
    "${storm_light_args[@]}"
done
for i in 1 2; do
  run "storm_bench-light-held-${i}" ./build/storm_bench --light-agents \
    --hold-stop "${storm_light_args[@]}"
done
# A real storm hits a daemon that has been idle: each storm (and the
# round-trip baseline) after 15 s of idling.
for i in 1 2; do
  run "storm_bench-light-idle-${i}" ./build/storm_bench --light-agents \
    "${storm_idle_args[@]}"
done
# Storm after storm with the daemon in a process of its own: its live heap
# must level off (only the soak row is taken from these; their storms are
# as the light rows above).
for i in 1 2; do
  run "storm_bench-soak-${i}" ./build/storm_bench --light-agents \
    --daemon-process "${storm_soak_args[@]}"
done
for i in 1 2; do
  run "step_bench-${i}" ./build/step_bench "${step_args[@]}"
done
# These two take minutes at full size: once (startup_bench takes the median
# of its own start-ups).
run startup_bench ./build/startup_bench "${startup_args[@]}"
run memory_bench ./build/memory_bench "${memory_args[@]}"

{
  echo "# Benchmarks"
  echo
  echo "Written by \`bash scripts/bench.sh\`$([[ -n "${QUICK:-}" ]] && echo " (QUICK=1: small sizes)") on $(date -u +%Y-%m-%dT%H:%MZ)."
  echo "Every figure has its baseline measured in the same run on the same"
  echo "machine; the ratio is ours / baseline (design §7). The machines are"
  echo "shared: figures move between runs, ratios less so."
  echo
  echo "## Machine"
  echo
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
  echo "- memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- OS: $(. /etc/os-release && echo "${PRETTY_NAME}"), kernel $(uname -r)"
  echo "- disk of the data: $(df -h /tmp | awk 'NR==2 {print $1 " (" $2 ")"}')"
  echo "- load average when the run began: ${load_at_start}; when it ended: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## Figures"
  echo
  echo "| figure | recoverd | baseline (same run) | ratio | design target |"
  echo "|---|---|---|---|---|"
  for f in "${out}"/*.txt; do
    run_of=$(basename "${f}" .txt | sed -n 's/.*-\([0-9]\)$/ (run \1)/p')
    rows='^RESULT'
    [[ "${f}" == *-soak-* ]] && rows=$'^RESULT\tSoak'
    { grep "${rows}" "${f}" || true; } | while IFS=$'\t' read -r _ figure ours base ratio target; do
      echo "| ${figure}${run_of} | ${ours} | ${base} | ${ratio} | ${target} |"
    done
  done
  echo
  echo "## What each figure measures"
  echo
  echo "- Journal: 64 job-like writers append 187-byte records with sync=always;"
  echo "  the baseline writes the same records in WriteBatches of the journal's"
  echo "  mean batch size, each followed by a WAL sync."
  echo "- Fault -> stop: from the client's clock just before ReportProcessFault"
  echo "  is sent to the agent's stream thread holding stopTrain (it includes the"
  echo "  durable append of the fault), 1,000 subscribed jobs, every wait at 0;"
  echo "  the baseline is one unary round trip to a trivial gRPC server (p99)."
  echo "- Recovery cycles and reports: in-process daemon on loopback, every wait at"
  echo "  0; reports are ReportProcessFault calls joining a running flow, one"
  echo "  fsync'd event each, on 16-rank jobs and on 256-rank jobs. Client"
  echo "  threads, gRPC, the actors and fsync share the same cores, so on 2 cores"
  echo "  the ratio measures CPU cost per durable call more than fsync latency"
  echo "  (recovery_bench --sync-batch shows the bound without fsync). The"
  echo "  reports' baseline is the same calls: ReportProcessFault with one fault"
  echo "  from as many agent clients (the agent's deadline and wait-for-ready),"
  echo "  answered at once by a trivial gRPC server. Until 2026-12-06 it was a"
  echo "  bare HealthCheck (a smaller request, no deadline), which costs about"
  echo "  the same per call; each run's output still gives the ratio against it."
  echo "- The daemon and the benchmarks that run it use jemalloc (the default"
  echo "  build; -Djemalloc=disabled for glibc malloc)."
  echo "- Fault storm: 1,000 jobs, each with a process manager of the agent"
  echo "  library subscribed, every wait at 0; one ReportDeviceFaults puts a"
  echo "  retry-class fault (80E01801) on every job. Timed from the call being"
  echo "  sent until every agent holds stopTrain, and until every job is back in"
  echo "  INIT with its outcome recorded (the managers answer stop, strategy and"
  echo "  status themselves); baseline: as many unary round trips (1 and 4 per"
  echo "  job) to a trivial gRPC server from 64 threads. Three storms in a row,"
  echo "  the median reported (each storm's figures are in the raw output; the"
  echo "  first, on a daemon just set up, is the slowest). The agents run in the"
  echo "  benchmark's process on the same cores: the ones stopped first answer"
  echo "  (StopComplete, strategies, status) while the rest are still being"
  echo "  stopped; the daemon holds those answers at its edge until every stop"
  echo "  is written (stops first), but sending and receiving them still takes"
  echo "  the same cores. The --hold-stop rows hold every agent's answer until"
  echo "  all have stopTrain: the daemon's fan-out without that competition."
  echo "  Each storm also prints p90 and p99 of the agents' stops. A process"
  echo "  manager reads each stream on a thread of its own (perf: the agents"
  echo "  take 40-57% of the CPU of the stop window on this VM); the"
  echo "  --light-agents rows use agents on gRPC's callback API over one"
  echo "  channel instead (same answers, asynchronous calls, five storms), the"
  echo "  closest this one machine comes to agents on other machines. The"
  echo "  baseline column also gives the fan-out's floor: a trivial server"
  echo "  pushing one stopTrain to as many open streams, read the same way."
  echo "  The rows \"each storm after 15 s idle\" leave the daemon idle before"
  echo "  each storm, and before the round-trip baseline, as a real storm finds"
  echo "  it; back to back, each storm finds the last one's memory and threads"
  echo "  warm. Each storm line of the raw output also gives the page faults and"
  echo "  context switches of its stop window and the resident memory after it."
  echo "- Soak: 20 light-agent storms back to back on 1,000 jobs with the"
  echo "  daemon in a process of its own (storm_bench --daemon-process); its"
  echo "  live heap (jemalloc's allocated bytes) after each storm, the highest"
  echo "  of the last ten against the highest of the first ten (it rises and"
  echo "  falls by 10-20 MB from storm to storm; each storm's figure is in the"
  echo "  raw output). A kilobyte per job and storm kept would show as about"
  echo "  +1 MB per storm."
  echo "- Job size: the pure core alone (decide, encode every event, apply; no"
  echo "  actor, no journal), CPU time per step and encoded event bytes on a"
  echo "  16,384-rank job (2048 pods x 8) vs a 16-rank job: an absorbed"
  echo "  ReportProcessFault naming one rank, and the steps of a full recovery"
  echo "  cycle; also the log bytes one full cycle writes."
  echo "- Restart: app::start on 10,000 jobs / 1,000,000 events (snapshots every"
  echo "  20 events, the default) until a client's ListJobs returns every job,"
  echo "  vs opening the same RocksDB and reading the job ids, each job's latest"
  echo "  snapshot and the events after it on as many threads: after a clean"
  echo "  stop (the jobs start dormant, read when first asked for), with no"
  echo "  current digest (as after a crash: every job folded for its digest only,"
  echo "  replayed in full when first asked for) and replaying and spawning every"
  echo "  job at once (the"
  echo "  start-up before dormant jobs); then a GetJob of every"
  echo "  job, the first time (dormant jobs replayed) vs the second."
  echo "- Memory: the daemon in its own process; RSS growth per job net of the"
  echo "  empty daemon with 10,000 jobs put, agents initialised, registered and"
  echo "  subscribed (10,000 open streams over 16 connections), and the slope"
  echo "  from 5,000 to 10,000 jobs; startup_bench also shows replayed idle jobs"
  echo "  without streams."
  echo
  echo "## How to reproduce"
  echo
  echo '```sh'
  echo "bash scripts/bench.sh"
  echo "./build/journal_bench --help; ./build/recovery_bench --help; ./build/storm_bench --help"
  echo "./build/step_bench --help; ./build/startup_bench --help; ./build/memory_bench --help"
  echo '```'
  echo
  echo "## Raw output"
  for f in "${out}"/*.txt; do
    echo
    echo "### $(basename "${f}" .txt | cut -d- -f2-)"
    echo
    echo '```'
    grep -v '^RESULT' "${f}"
    echo '```'
  done
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
