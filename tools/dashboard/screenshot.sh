#!/usr/bin/env bash
# Writes a PNG of the web dashboard, rendered by headless Chromium, so a
# person can look at it without a browser on the machine.
#
#   tools/dashboard/screenshot.sh [--out FILE] [--url URL] [--size WxH]
#
# Without --url it starts ./build/recoverd on free loopback ports with a
# temporary data directory, runs recoverd-sim through a few scenarios
# (keeping the jobs), opens the first hardware-fault job's incidents, and
# stops the daemon. With --url it only photographs that page, e.g.
# http://127.0.0.1:8900/#job=JOB (add &token=TOKEN when the daemon checks
# access). Default output: build/dashboard.png. Needs chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=build/dashboard.png
url=""
size=1400,1100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --url) url="$2"; shift 2 ;;
    --size) size="${2/x/,}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "screenshot.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v chromium >/dev/null || {
  echo "screenshot.sh: chromium is not installed (apt-get install chromium)" >&2
  exit 1
}

work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null; then
    kill -TERM "${pid}"
    wait "${pid}" || true
  fi
  rm -rf "${work}"
}
trap cleanup EXIT

if [[ -z "${url}" ]]; then
  for bin in build/recoverd build/recoverd-sim; do
    [[ -x "${bin}" ]] || {
      echo "screenshot.sh: ${bin} is missing; build first (ninja -C build recoverd recoverd-sim)" >&2
      exit 1
    }
  done
  ./build/recoverd --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --data-dir "${work}/data" --fault-flush-wait 0 --resource-release-wait 0 \
    --hccl-convergence-wait 0 >"${work}/out" 2>"${work}/daemon.log" &
  pid=$!
  for _ in $(seq 1 100); do
    grep -q "^recoverd: http on " "${work}/out" && break
    kill -0 "${pid}" 2>/dev/null || { cat "${work}/daemon.log" >&2; exit 1; }
    sleep 0.1
  done
  grpc=$(sed -n 's/^recoverd: listening on //p' "${work}/out")
  http=$(sed -n 's/^recoverd: http on //p' "${work}/out")
  [[ -n "${http}" ]] || { echo "screenshot.sh: recoverd did not start" >&2; exit 1; }
  ./build/recoverd-sim --server "${grpc}" --jobs 2 --ranks 8 --pods 2 \
    --scenario hardware-fault,uce-retry,switch-nic,fault-during-recovery \
    --keep-jobs --quiet >"${work}/sim.log" 2>&1 || {
    cat "${work}/sim.log" >&2; exit 1; }
  url="http://${http}/#job=sim-hardware-fault-0"
fi

mkdir -p "$(dirname "${out}")"
# A virtual time budget lets the page's scripts and fetches settle (its live
# watch never ends, so the network cannot tell when the page is done).
timeout 60 chromium --headless=new --no-sandbox --disable-gpu --no-first-run \
  --user-data-dir="${work}/profile" --hide-scrollbars --window-size="${size}" \
  --virtual-time-budget=5000 --screenshot="$(realpath -m "${out}")" "${url}" \
  >"${work}/chromium.log" 2>&1 || { cat "${work}/chromium.log" >&2; exit 1; }
echo "screenshot.sh: wrote ${out} ($(sed "s/token=[^&]*/token=.../" <<<"${url}"))"
