#!/usr/bin/env bash
# npm run soak: the contract fuzzer's soak, 20,000 requests derived from openapi.yaml with a random seed
# (printed) against a real server process; prints statuses, seconds, API RSS and every fault.
# Replay or resize: npm run soak -- --seed N [--requests N] [--only i,j] [--concurrency N]
# npm run soak -- chaos: the seeded chaos soak instead (test/chaos/run.ts: several instances on one Redis,
# faults under stateful load; knobs CHAOS_SEED, CHAOS_SECONDS, ... as environment variables).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh node deps docker redis
# Transpiled only, as tap runs tests: type errors are tsc's to report, not a reason for the soak not to start.
export TS_NODE_TRANSPILE_ONLY=1
if [ "${1:-}" = chaos ]; then
  shift
  exec node --import=@tapjs/typescript/import test/chaos/run.ts "$@"
fi
exec node --import=@tapjs/typescript/import test/fuzz/soak.ts "$@"
