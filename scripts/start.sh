#!/usr/bin/env bash
# npm start: set up what is missing (Node 22, packages, Docker + gVisor, Redis, sandbox image),
# then run the service in the foreground with sensible defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh all
if [ -z "${REPLCAST_API_KEYS:-}" ] && [ -z "${REPLCAST_API_KEYS_FILE:-}" ]; then
  keyfile="$REPLCAST_STATE/api-keys"
  if [ ! -s "$keyfile" ]; then
    (umask 077; echo "default=rk_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$keyfile")
    say "created an API key for tenant 'default' in $keyfile"
  fi
  export REPLCAST_API_KEYS_FILE="$keyfile"
  say "API key (tenant=key): $(cat "$keyfile")"
fi
npx tsc -p tsconfig.json
say "starting replcast on ${HOST:-127.0.0.1}:${PORT:-8080}"
exec node dist/server.js
