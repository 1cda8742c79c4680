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

out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
if [[ -n "${QUICK:-}" ]]; then
  journal_args=(--records 20000 --rounds 1)
  recovery_args=(--jobs 100 --samples 50 --cycles 5 --reports 20)
  startup_args=(--jobs 1000 --events 100000)
else
  journal_args=()
  recovery_args=()
  startup_args=()
fi

run() {
  local name=$1
  shift
  echo "== ${name}: $*"
  "$@" 2>&1 | tee "${out}/${name}.txt"
  echo
}
run journal_bench ./build/journal_bench "${journal_args[@]}"
run recovery_bench ./build/recovery_bench "${recovery_args[@]}"
if [[ -x ./build/startup_bench ]]; then
  run startup_bench ./build/startup_bench "${startup_args[@]}"
fi

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
  echo "- load average when the run began: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## Figures"
  echo
  echo "| figure | recoverd | baseline (same run) | ratio | design target |"
  echo "|---|---|---|---|---|"
  grep -h '^RESULT' "${out}"/*.txt | while IFS=$'\t' read -r _ figure ours base ratio target; do
    echo "| ${figure} | ${ours} | ${base} | ${ratio} | ${target} |"
  done
  echo
  echo "## What each figure measures"
  echo
  echo "- Journal: 64 job-like writers append 187-byte records with sync=always;"
  echo "  the baseline writes the same records in WriteBatches of the journal's"
  echo "  mean batch size, each followed by a WAL sync."
  echo "- Fault -> stop: ReportProcessFault returning at the agent to the agent's"
  echo "  stream thread holding stopTrain (the signal may overtake the reply: 0)."
  echo "- Recovery cycles and reports: in-process daemon on loopback, every wait at"
  echo "  0; reports are ReportProcessFault calls joining a running flow, one"
  echo "  fsync'd event each. Client threads, gRPC, the actors and fsync share the"
  echo "  same cores, so on 2 cores the ratio measures CPU cost per durable call"
  echo "  more than fsync latency (recovery_bench --sync-batch shows the bound"
  echo "  without fsync)."
  echo "- Restart: app::start on 10,000 jobs / 1,000,000 events (snapshots every"
  echo "  20 events, the default) until every job is served, vs opening the same"
  echo "  RocksDB and scanning every event and snapshot."
  echo "- Memory: RSS growth with 10,000 registered idle jobs loaded, per job."
  echo
  echo "## How to reproduce"
  echo
  echo '```sh'
  echo "bash scripts/bench.sh"
  echo "./build/journal_bench --help; ./build/recovery_bench --help; ./build/startup_bench --help"
  echo '```'
  echo
  echo "## Raw output"
  for f in "${out}"/*.txt; do
    echo
    echo "### $(basename "${f}" .txt)"
    echo
    echo '```'
    grep -v '^RESULT' "${f}"
    echo '```'
  done
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
