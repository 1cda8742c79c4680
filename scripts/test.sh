#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test suite,
# and ends with the plain line "N passed, N failed" (test cases).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
status=0
# What failed, repeated at the end: a CI shows only the tail of the output.
summary=$(mktemp)
for suite in build/tests/recoverd_tests build/tests/recoverd_e2e_tests; do
  echo "== ${suite}"
  log=$(mktemp)
  "${suite}" --no-intro=true 2>&1 | tee "${log}"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^\[doctest\] test cases:' "${log}" | tail -n 1)
  if [[ -z "${line}" ]]; then
    # The suite died before its summary: count it as one failure.
    failed=$((failed + 1))
    { echo "${suite} died before its summary; its last lines:"
      tail -n 20 "${log}"; } >>"${summary}"
  else
    p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"${line}")
    f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"${line}")
    passed=$((passed + p))
    failed=$((failed + f))
  fi
  [[ ${rc} -eq 0 ]] || status=1
  # Each failed check under its test case's name, with the lines doctest
  # indents below it (values, logged messages).
  awk -v suite="${suite}" '
    /^TEST CASE:/ { tc = $0; shown = 0; more = 0; next }
    /: (FATAL )?ERROR: / {
      if (!shown) { print suite ": " tc; shown = 1 }
      print; more = 4; next
    }
    more > 0 && /^  / { print; more--; next }
    { more = 0 }' "${log}" >>"${summary}"
  rm -f "${log}"
done
if [[ -s "${summary}" ]]; then
  echo "== what failed"
  cat "${summary}"
fi
rm -f "${summary}"
[[ ${failed} -eq 0 ]] || status=1
echo "${passed} passed, ${failed} failed"
exit ${status}
