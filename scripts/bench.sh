#!/usr/bin/env bash
# Builds and runs the benchmarks; prints figures and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
./build/journal_bench "$@"
