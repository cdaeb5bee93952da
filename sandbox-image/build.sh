#!/usr/bin/env bash
# Builds the replcast sandbox image without needing an image registry:
# a debootstrapped Debian base is imported locally once, then `docker build`
# runs on top of it. Idempotent and fast when the image for the current
# sources already exists (label replcast.source-hash).
#
# Environment:
#   SANDBOX_IMAGE  tag to build (default replcast-sandbox:latest)
#   BASE_IMAGE     base image to build FROM, used if present locally
#   DEBIAN_MIRROR  mirror for debootstrap (default http://deb.debian.org/debian)
#   FORCE=1        rebuild even when the hash matches
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SANDBOX_IMAGE="${SANDBOX_IMAGE:-replcast-sandbox:latest}"
LOCAL_BASE="replcast-base:bookworm"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { printf '[sandbox-image] %s\n' "$*" >&2; }

# Hash of everything that goes into the image: every file under sandbox-image/
# except caches; README/build.sh included on purpose (cheap: a rebuild after a
# docs-only change is all Docker cache hits).
source_hash() {
  (cd "$HERE" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
    | LC_ALL=C sort -z \
    | xargs -0 sha256sum) | sha256sum | cut -c1-32
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

HASH="$(source_hash)"
if [ "${FORCE:-0}" != "1" ] && image_exists "$SANDBOX_IMAGE"; then
  current="$(docker image inspect -f '{{ index .Config.Labels "replcast.source-hash" }}' "$SANDBOX_IMAGE" 2>/dev/null || true)"
  if [ "$current" = "$HASH" ]; then
    log "$SANDBOX_IMAGE is up to date (source hash $HASH)"
    exit 0
  fi
  log "$SANDBOX_IMAGE has source hash '${current:-none}', sources are $HASH: rebuilding"
fi

build_local_base() {
  command -v debootstrap >/dev/null 2>&1 || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
  local dir
  dir="$(mktemp -d /tmp/replcast-base.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '$dir'" EXIT
  log "debootstrapping Debian bookworm (minbase) into $dir from $DEBIAN_MIRROR ..."
  if ! debootstrap --variant=minbase bookworm "$dir" "$DEBIAN_MIRROR" >"$dir.log" 2>&1; then
    log "debootstrap failed; last lines of $dir.log:"
    tail -n 30 "$dir.log" >&2
    exit 1
  fi
  rm -f "$dir.log"
  # Keep the image small and apt usable inside docker build.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  log "importing the base as $LOCAL_BASE ..."
  tar -C "$dir" -c . | docker import \
    --change 'CMD ["/bin/bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$LOCAL_BASE" >/dev/null
  rm -rf "$dir"
  trap - EXIT
}

if [ -n "${BASE_IMAGE:-}" ] && image_exists "$BASE_IMAGE"; then
  base="$BASE_IMAGE"
else
  if [ -n "${BASE_IMAGE:-}" ]; then
    log "BASE_IMAGE=$BASE_IMAGE is not present locally (no registry is used); using $LOCAL_BASE"
  fi
  base="$LOCAL_BASE"
  if ! image_exists "$LOCAL_BASE"; then
    build_local_base
  fi
fi

log "building $SANDBOX_IMAGE from $base (source hash $HASH) ..."
start=$(date +%s)
# --pull=false: the base is local; never contact a registry.
if ! docker build --pull=false \
    --build-arg "BASE_IMAGE=$base" \
    --label "replcast.source-hash=$HASH" \
    -t "$SANDBOX_IMAGE" \
    "$HERE" >&2; then
  log "docker build failed"
  exit 1
fi
log "built $SANDBOX_IMAGE in $(( $(date +%s) - start ))s"
