#!/usr/bin/env bash
# npm run bench: issue 11's figures first (bench/run.ts: each with its same-run baseline, ratio and target,
# written to bench/results/<time>.json and bench/results/latest.json), then the other benchmarks under bench/.
# npm run bench -- GROUP...   runs only those groups of bench/run.ts (latency, first-output, throughput,
# redis-bytes, memory, density, bulk, cold-create, soak, fair-share, runtimes, hibernate; hibernate needs an
# engine that can checkpoint: the local one once setup has turned experimental mode on, or DOCKER_HOST).
# BENCH_DENSITY=1000 and BENCH_SOAK=1 run the issue's full density and soak (longer); BENCH_HIBERNATED=1000 the
# issue's hibernated count.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh all
# The Jupyter kernel baseline: Debian's packages, for Debian's python3 (the one on PATH may be another).
if ! /usr/bin/python3 -c 'import ipykernel, jupyter_client' 2>/dev/null; then
  ensure_apt python3-ipykernel python3-jupyter-client
fi
# Transpiled only, as tap runs tests: type errors are tsc's to report, not a reason for a benchmark not to start.
export TS_NODE_TRANSPILE_ONLY=1
run() { echo "== $1"; node --import=@tapjs/typescript/import "$@"; }
status=0
run bench/run.ts "$@" || status=$?
if [ $# -eq 0 ]; then
  for f in bench/pool.ts bench/pool-trace.ts bench/exec-trace.ts bench/files.ts bench/replicas.ts bench/llm-first-output.ts bench/python-client.ts bench/process-first-output.ts bench/pty.ts; do
    run "$f" || { echo "$f failed"; status=1; }
  done
fi
exit $status
