#!/usr/bin/env bash
# npm run bench: every benchmark under bench/, each printing median, p99 and a same-run baseline ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh all
for f in bench/*.ts; do
  case "$f" in bench/stats.ts|bench/harness.ts) continue ;; esac
  echo "== $f"
  node --import=@tapjs/typescript/import "$f"
done
