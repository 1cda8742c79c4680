#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test suite,
# and ends with the plain line "N passed, N failed" (test cases).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
# What failed, repeated at the end: a CI shows only the tail of the output.
summary=$(mktemp)
trap 'rm -f "${summary}"' EXIT

# The "N passed" and "N failed" of a doctest log's summary line, or nothing
# when the suite died before it.
counts() {
  local line
  line=$(grep -E '^\[doctest\] test cases:' "$1" | tail -n 1)
  [[ -n "${line}" ]] || return 1
  sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"${line}"
  sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"${line}"
}

# Each failed check under its test case's name, with the lines doctest
# indents below it (values, logged messages). doctest's own lines start
# with the check's file and line, which a daemon's log line does not.
failures() {
  awk -v suite="$1" '
    /^TEST CASE:/ { tc = $0; shown = 0; more = 0; next }
    /^[^ ]+:[0-9]+: (FATAL )?ERROR: / {
      if (!shown) { print suite ": " tc; shown = 1 }
      print; more = 4; next
    }
    more > 0 && /^  / { print; more--; next }
    { more = 0 }' "$2"
}

for suite in build/tests/recoverd_tests build/tests/recoverd_e2e_tests; do
  echo "== ${suite}"
  log=$(mktemp)
  "${suite}" --no-intro=true 2>&1 | tee "${log}"
  rc=${PIPESTATUS[0]}
  if ! mapfile -t pf < <(counts "${log}") || [[ ${#pf[@]} -ne 2 ]]; then
    # The suite died before its summary: count it as one failure.
    failed=$((failed + 1))
    { echo "${suite} died before its summary; its last lines:"
      tail -n 20 "${log}"; } >>"${summary}"
    rm -f "${log}"
    continue
  fi
  passed=$((passed + pf[0]))
  if [[ ${rc} -ne 0 && ${pf[1]} -eq 0 ]]; then
    # Every test case passed, yet the suite failed (at its exit, say).
    failed=$((failed + 1))
    echo "${suite} exited with ${rc} after its summary" >>"${summary}"
  fi
  failures "${suite}" "${log}" >>"${summary}"
  # A test case that failed runs once more on its own. Its failure stays
  # in the summary above, marked; only a second failure counts. The suites
  # start real servers, etcd and Chromium on a shared machine: a rare
  # timing failure should be seen, not block every change behind it.
  mapfile -t names < <(awk '
    /^TEST CASE:/ { tc = substr($0, 13); next }
    /^[^ ]+:[0-9]+: (FATAL )?ERROR: / && !(tc in seen) { seen[tc] = 1; print tc }' \
    "${log}")
  for name in "${names[@]}"; do
    # doctest splits filters at commas; "?" matches any one character.
    rerun=$(mktemp)
    "${suite}" --no-intro=true -tc="${name//,/?}" >"${rerun}" 2>&1
    again_rc=$?
    mapfile -t again < <(counts "${rerun}")
    if [[ ${again_rc} -eq 0 && ${#again[@]} -eq 2 && ${again[0]} -ge 1 ]]; then
      passed=$((passed + 1))
      echo "flaky: \"${name}\" failed, then passed when run again" \
        >>"${summary}"
    else
      failed=$((failed + 1))
      echo "failed again when run on its own: \"${name}\"" >>"${summary}"
      failures "${suite} (run again)" "${rerun}" >>"${summary}"
    fi
    rm -f "${rerun}"
  done
  # Failures the summary counts that no test case's name was found for
  # (doctest printed none): they stay failures.
  if [[ ${pf[1]} -gt ${#names[@]} ]]; then
    failed=$((failed + pf[1] - ${#names[@]}))
  fi
  rm -f "${log}"
done
if [[ -s "${summary}" ]]; then
  echo "== what failed"
  cat "${summary}"
fi
echo "${passed} passed, ${failed} failed"
[[ ${failed} -eq 0 ]]
