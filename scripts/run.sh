#!/usr/bin/env bash
# The demo, README command (a): installs what is missing, builds, starts
# recoverd with its embedded defaults (gRPC 127.0.0.1:8899, data in
# ./recoverd-data), runs the simulator through a hardware fault -> recovery
# and a link switch, prints their timelines and where to look next, and
# stops recoverd cleanly. Exit code: the simulator's (0 = all as expected).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh

address=127.0.0.1:8899
log=recoverd-demo.log
echo
echo "== starting recoverd (embedded defaults; log in ${log})"
./build/recoverd >"${log}" 2>&1 &
pid=$!
stop_daemon() {
  if kill -0 "${pid}" 2>/dev/null; then
    kill -TERM "${pid}"
    wait "${pid}" && echo "recoverd stopped cleanly (exit 0)" \
      || echo "recoverd exited with $?"
  fi
}
trap stop_daemon EXIT
for _ in $(seq 1 100); do
  grep -q "listening on" "${log}" && break
  if ! kill -0 "${pid}" 2>/dev/null; then
    echo "recoverd did not start:"; cat "${log}"
    trap - EXIT
    exit 1
  fi
  sleep 0.1
done
grep "listening on" "${log}"

echo
echo "== simulating a 16-rank job on 2 pods: a hardware fault, then a link switch"
echo "   (recoverd keeps the reference's waits: 1 s fault flush and 10 s"
echo "   resource release, so the recovery takes about 12 s)"
rc=0
./build/recoverd-sim --server "${address}" --scenario hardware-fault,switch-nic \
  --jobs 1 --ranks 16 --pods 2 --delay-ms 200 --keep-jobs || rc=$?

cat <<EOF

== where to look next (while recoverd runs: ./build/recoverd)
  ./build/recoverctl jobs                                 # the jobs recoverd knows
  ./build/recoverctl job get sim-hardware-fault-0         # one job (add -o json for JSON)
  ./build/recoverctl timeline sim-hardware-fault-0        # its story, phase by phase
  ./build/recoverctl timeline sim-hardware-fault-0 --data-dir recoverd-data  # the same offline
  curl -s 127.0.0.1:8900/api/v1/jobs                      # the dashboard API (HTTP/JSON)
  curl -s 127.0.0.1:8900/metrics                          # Prometheus metrics
  ./build/recoverctl switch-nic JOB NODE DEV=on           # an operator link switch
  ./build/recoverctl stress-test JOB --all-nodes aic,p2p  # an online stress test
  ./build/recoverd-sim --spawn-daemon --scenario all      # every scenario, own daemon
  every job's history is in ./recoverd-data (a RocksDB event log)
EOF
exit "${rc}"
