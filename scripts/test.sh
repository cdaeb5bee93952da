#!/usr/bin/env bash
# npm test: set up what is missing, type-check, run every test (tap), and end with one
# plain line "N passed, N failed" (tap's exit code is passed through).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh all || { echo "0 passed, 1 failed"; exit 1; }
set +e
npx tsc --noEmit -p tsconfig.json
typecheck=$?
log="$REPLCAST_STATE/last-test.log"
# The plain TAP stream when output is not a terminal (CI): the interactive reporter can lose its
# last lines when piped.
reporter=()
[ -t 1 ] || reporter=(--reporter=tap)
npx tap "${reporter[@]}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
summary=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -1)
pass=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary")
fail=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
skip=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary")
pass=${pass:-0}; fail=${fail:-0}
if [ "$typecheck" -ne 0 ]; then echo "type-check failed"; fail=$((fail + 1)); rc=1; fi
if [ -z "$summary" ] && [ "$rc" -ne 0 ]; then fail=$((fail + 1)); fi
echo "${pass} passed, ${fail} failed${skip:+, ${skip} skipped}"
exit "$rc"
