#!/usr/bin/env bash
# Installs and starts what replcast needs on a Debian machine (Node 22, npm packages,
# docker.io + gVisor, redis-server, the sandbox image, Chromium for the playground's browser test,
# tmux for the terminal CLI's test, flake8 and mypy for the Python checks, and what the Python
# client's tests install it with); quick when all of it is there.
# Usage: source scripts/setup.sh [node|deps|docker|redis|image|browser|terminal|lint|python|all]...  (sourcing exports PATH for Node 22)
set -euo pipefail

REPLCAST_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPLCAST_STATE="${REPLCAST_STATE:-$REPLCAST_ROOT/.replcast}"
mkdir -p "$REPLCAST_STATE"

say() { echo "[setup] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=""
ensure_apt() { # ensure_apt PKG... installs the Debian packages that are missing
  local missing=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

node_major() { "${1:-node}" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

ensure_node() { # Node >= 22 on PATH: the machine's, or the npm package node@22 under .replcast/node22
  if [ "$(node_major)" -ge 22 ]; then return 0; fi
  local dir="$REPLCAST_STATE/node22"
  if [ "$(node_major "$dir/node_modules/.bin/node")" -lt 22 ]; then
    say "the machine's Node is $(node --version 2>/dev/null || echo missing); installing Node 22 from npm into $dir"
    command -v npm >/dev/null || ensure_apt nodejs npm
    npm install --silent --no-save --no-audit --no-fund --prefix "$dir" node@22 >&2
  fi
  export PATH="$dir/node_modules/.bin:$PATH"
}

ensure_deps() { # npm packages, reinstalled when package-lock.json changed
  local stamp="$REPLCAST_ROOT/node_modules/.replcast-lock-hash" want
  want="$(sha256sum "$REPLCAST_ROOT/package-lock.json" | cut -c1-64)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  say "installing npm packages"
  (cd "$REPLCAST_ROOT" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$stamp"
}

configure_dockerd() { # /etc/docker/daemon.json: gVisor as the runtime "runsc" (network off inside the sandbox kernel),
  # experimental mode (Docker's checkpoint API, for hibernate, snapshots and fork) and live-restore (a restart
  # of dockerd leaves running sandboxes running). Prints what changed: "reload" (SIGHUP applies it), "restart", or nothing.
  local conf=/etc/docker/daemon.json
  as_root mkdir -p /etc/docker
  node -e '
    const fs = require("fs"); const [f, runsc] = process.argv.slice(1);
    let c = {}; try { c = JSON.parse(fs.readFileSync(f, "utf8")); } catch {}
    const before = JSON.stringify(c);
    let restart = false;
    if (runsc) c.runtimes = { ...(c.runtimes || {}), runsc: { path: runsc, runtimeArgs: ["--network=none"] } };
    c["live-restore"] = true;
    if (c.experimental !== true) { c.experimental = true; restart = true; }
    if (JSON.stringify(c) === before) process.exit(0);
    fs.writeFileSync(f, JSON.stringify(c, null, 2) + "\n");
    console.log(restart ? "restart" : "reload");' "$conf" "$(command -v runsc || true)"
}

# Replcast's sandboxes running on this dockerd (a restart of dockerd with live-restore keeps them, but
# their API instances lose their attach streams for a moment).
running_sandboxes() { docker ps -q --filter label=replcast.session 2>/dev/null | wc -l; }

start_dockerd() {
  say "starting dockerd (log: $REPLCAST_STATE/dockerd.log)"
  as_root rm -f /var/run/docker.pid
  as_root setsid nohup dockerd >"$REPLCAST_STATE/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  say "dockerd did not come up; last lines of its log:"; tail -20 "$REPLCAST_STATE/dockerd.log" >&2; return 1
}

ensure_docker() {
  ensure_apt docker.io runsc
  local change
  change="$(configure_dockerd)"
  if ! docker info >/dev/null 2>&1; then start_dockerd; return; fi
  [ -n "$change" ] && { say "dockerd: runsc, live-restore and experimental mode in /etc/docker/daemon.json"; as_root pkill -HUP -x dockerd || true; }
  [ "$(docker info --format '{{.ExperimentalBuild}}')" = true ] && return 0
  # Experimental mode is read only at start. Live-restore (just reloaded) keeps sandboxes running
  # across the restart, but their API instances would lose their attach streams: with sandboxes
  # running, that is for the operator to choose (REPLCAST_RESTART_DOCKERD=1). Until then, hibernate,
  # snapshots and fork answer 409 not_supported.
  local n
  n="$(running_sandboxes)"
  if [ "$n" -gt 0 ] && [ "${REPLCAST_RESTART_DOCKERD:-}" != 1 ]; then
    say "warning: dockerd runs without experimental mode, so hibernate, snapshots and fork answer 409 not_supported; $n sandboxes run, so it is not restarted now (REPLCAST_RESTART_DOCKERD=1 restarts it; live-restore keeps them running)"
    return 0
  fi
  say "restarting dockerd for experimental mode (checkpoints)"
  local pid
  pid="$(pgrep -x dockerd | head -1)"
  as_root kill -TERM "$pid"
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  start_dockerd
}

# The Redis replcast starts also listens on a unix socket, owner only (mode 700), which the service,
# the tests and the benchmarks then use (REDIS_URL, unless already set): a command costs Redis and the
# API less CPU than over loopback TCP. Skipped where the path is too long for a socket address.
redis_socket() { local s="$REPLCAST_STATE/redis/redis.sock"; [ ${#s} -le 100 ] && echo "$s"; return 0; }

use_redis_socket() { # exports REDIS_URL as the socket's path when neither it nor REDIS_SENTINELS is set and the socket answers
  local sock
  sock="$(redis_socket)"
  [ -z "${REDIS_URL:-}" ] && [ -z "${REDIS_SENTINELS:-}" ] && [ -n "$sock" ] && [ -S "$sock" ] && redis-cli -s "$sock" ping >/dev/null 2>&1 && export REDIS_URL="$sock"
  return 0
}

ensure_redis() { # Redis with persistence (scripts/redis.conf: append-only file, fsync every second), files under .replcast/redis
  ensure_apt redis-server redis-sentinel # redis-sentinel: test/redis-sentinel.test.ts fails Redis over through it
  local port="${REDIS_PORT:-6379}" dir="$REPLCAST_STATE/redis" sock
  sock="$(redis_socket)"
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    # One replcast started earlier (its files in the state folder) may predate persistence: switch it on.
    local running_dir
    running_dir="$(redis-cli -p "$port" config get dir | sed -n 2p)"
    if [ "$(redis-cli -p "$port" config get appendonly | sed -n 2p)" != yes ]; then
      if [ "$running_dir" = "$REPLCAST_STATE" ] || [ "$running_dir" = "$dir" ]; then
        say "switching on persistence (appendonly, fsync every second) in the running redis-server on port $port"
        redis-cli -p "$port" config set appendfsync everysec >/dev/null
        redis-cli -p "$port" config set appendonly yes >/dev/null
      else
        say "warning: the Redis on port $port was not started by replcast and keeps nothing on disk (appendonly no): a restart of it loses every session"
      fi
    fi
    # Only the Redis whose files are in the state folder may be ours to reach through its socket.
    [ "$running_dir" = "$dir" ] && use_redis_socket
    return 0
  fi
  say "starting redis-server on 127.0.0.1:$port${sock:+ and $sock} (files in $dir)"
  mkdir -p "$dir"
  redis-server "$REPLCAST_ROOT/scripts/redis.conf" --port "$port" --bind 127.0.0.1 --daemonize yes \
    ${sock:+--unixsocket "$sock" --unixsocketperm 700} \
    --dir "$dir" --logfile "$REPLCAST_STATE/redis.log" --pidfile "$dir/redis.pid" >&2
  for _ in $(seq 1 60); do redis-cli -p "$port" ping >/dev/null 2>&1 && { use_redis_socket; return 0; }; sleep 0.25; done
  say "redis-server did not come up"; return 1
}

# test/python-client.test.ts: a virtualenv seeing Debian's httpx and pytest, the client installed into it
# offline (setuptools and wheel build it), and its generated types checked against openapi.yaml (PyYAML).
PYTHON_CLIENT_PKGS=(python3-venv python3-httpx python3-pytest python3-setuptools python3-wheel python3-yaml)

ensure_image() { ensure_apt debootstrap; bash "$REPLCAST_ROOT/sandbox-image/build.sh"; }

for what in "${@:-all}"; do
  case "$what" in
    node) ensure_node ;;
    deps) ensure_node; ensure_deps ;;
    docker) ensure_node; ensure_docker ;;
    redis) ensure_redis ;;
    image) ensure_docker; ensure_image ;;
    browser) ensure_apt chromium ;; # test/playground.test.ts drives it with playwright-core
    terminal) ensure_apt tmux ;; # test/cli-shell.test.ts runs `replcast shell` in a tmux pane
    lint) ensure_apt flake8 mypy ;; # npm test's python-lint and python-types checks
    python) ensure_apt "${PYTHON_CLIENT_PKGS[@]}" ;;
    all) ensure_node; ensure_deps; ensure_docker; ensure_redis; ensure_image; ensure_apt chromium tmux flake8 mypy "${PYTHON_CLIENT_PKGS[@]}" ;;
    *) say "unknown step: $what"; exit 2 ;;
  esac
done
