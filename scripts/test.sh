#!/usr/bin/env bash
# npm test: set up what is missing, run the static checks (type-check, format, lint, dead code, layers,
# Python lint and types), then the unit tests (test/unit/: no Docker or Redis) and after them the integration
# tests (the rest of test/), and end with one plain line "N passed, N failed" (", N skipped" when tap
# skipped any).
#
# How it counts: the tap tests as tap reports them, the two runs added up; each static check that
# fails adds one to "failed", and so does a tap run that fails without printing its summary. The exit
# code is non-zero when anything failed.
# `npm test -- ARGS...` runs the same checks, then one tap run with ARGS instead (e.g. a single file).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh all || { echo "0 passed, 1 failed"; exit 1; }
set +e

pass=0 fail=0 skip=0 rc=0
failed_checks=() logs=()

check() { # check NAME COMMAND...: one static check
  echo "== $1"
  "${@:2}" || { failed_checks+=("$1"); fail=$((fail + 1)); rc=1; }
}

# The plain TAP stream when output is not a terminal (CI): the interactive reporter can lose its
# last lines when piped.
reporter=()
[ -t 1 ] || reporter=(--reporter=tap)

tap_run() { # tap_run LOG TAP-ARGS...: one tap run, its counts added to the totals
  local log=$1 code summary n
  shift
  logs+=("$log")
  npx tap "${reporter[@]}" "$@" 2>&1 | tee "$log"
  code=${PIPESTATUS[0]}
  summary=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -1)
  n=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); pass=$((pass + ${n:-0}))
  n=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary"); fail=$((fail + ${n:-0}))
  n=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); skip=$((skip + ${n:-0}))
  if [ "$code" -ne 0 ]; then
    rc=1
    [ -n "$summary" ] || fail=$((fail + 1))
  fi
}

check type-check npm run --silent typecheck
check format npm run --silent format:check
check lint npm run --silent lint
check deadcode npm run --silent deadcode
check python-lint flake8 sandbox-image bench clients/python # the REPL, bench's Python, the Python client (.flake8)
check python-types env -C clients/python mypy # --strict on the Python client, its example and tests (its pyproject.toml)
check layers npm run --silent layers

if [ $# -gt 0 ]; then
  tap_run "$REPLCAST_STATE/last-test.log" "$@"
else
  if [ -n "$(find test/unit -name '*.test.ts' 2>/dev/null | head -1)" ]; then
    tap_run "$REPLCAST_STATE/last-test-unit.log" test/unit
  fi
  tap_run "$REPLCAST_STATE/last-test.log" --exclude='test/unit/**'
fi

failures() { # failures LOG...: each failed test again, with tap's account of it, so that the end of the
  # output (all some CI consoles keep) names what failed
  awk '/^ *not ok /{ print; indent = match($0, /[^ ]/); block = 1; n = 0; next }
       block && n < 40 { if (match($0, /[^ ]/) > indent || $0 ~ /^ *\.\.\.$/) { print; n++ } else block = 0 }' "$@"
}
if [ "$fail" -gt 0 ]; then
  echo "== what failed"
  [ ${#logs[@]} -eq 0 ] || failures "${logs[@]}"
fi
[ ${#failed_checks[@]} -eq 0 ] || echo "failed checks: ${failed_checks[*]}"
echo "${pass} passed, ${fail} failed$([ "$skip" -gt 0 ] && echo ", ${skip} skipped")"
exit "$rc"
