#!/usr/bin/env bash
# Installs what is missing and builds everything into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=debugoptimized >/dev/null
fi
ninja -C build
