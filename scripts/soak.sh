#!/usr/bin/env bash
# npm run soak: the contract fuzzer's soak, 20,000 requests derived from openapi.yaml with a random seed
# (printed) against a real server process; prints statuses, seconds, API RSS and every fault.
# Replay or resize: npm run soak -- --seed N [--requests N] [--only i,j] [--concurrency N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh node deps docker redis
# Transpiled only, as tap runs tests: type errors are tsc's to report, not a reason for the soak not to start.
export TS_NODE_TRANSPILE_ONLY=1
exec node --import=@tapjs/typescript/import test/fuzz/soak.ts "$@"
