#!/usr/bin/env bash
# Builds and runs the benchmarks; prints figures and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
echo "== journal: group commit vs bare RocksDB"
./build/journal_bench
echo
echo "== recovery: fault -> stop latency and cycles/s vs trivial gRPC"
./build/recovery_bench
echo
echo "== start-up: 10,000 jobs / 1,000,000 events until serving vs bare RocksDB scan; memory per job"
./build/startup_bench
