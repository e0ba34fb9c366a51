#!/usr/bin/env bash
# Builds Berth's container images without any registry:
#   1. once: a Debian base image, localhost/berth-debian:bookworm, made with debootstrap from the
#      Debian mirror this machine's apt already uses, then `docker import`ed;
#   2. the service images from deploy/*.Containerfile, FROM that base, with the binaries that
#      `make build` left in bin/ (CGO_ENABLED=0) copied in: no Go toolchain inside the build.
# Usage: hack/images.sh [IMAGE...]   IMAGE is engine, uploads or prometheus (default: all three).
# Environment: BIN (default ./bin), DOCKER (default Debian's /usr/bin/docker),
#   BERTH_IMAGE_PREFIX (default localhost/berth-), BERTH_IMAGE_TAG (default latest),
#   BERTH_REBUILD_BASE=1 to rebuild the base image.
# Starts dockerd when /var/run/docker.sock does not answer, and stops it again afterwards.
set -euo pipefail
LOG_TAG=images
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

BIN=${BIN:-$ROOT/bin}
PREFIX=${BERTH_IMAGE_PREFIX:-localhost/berth-}
TAG=${BERTH_IMAGE_TAG:-latest}
BASE=localhost/berth-debian:bookworm
SUITE=bookworm
images=("$@")
[ ${#images[@]} -gt 0 ] || images=(engine uploads prometheus)

trap stop_dockerd EXIT
start_dockerd

# apt_entries: prints "URI SUITE" for every enabled deb entry of this machine's apt sources whose
# suite is Debian's $SUITE, $SUITE-updates or $SUITE-security (one-line and deb822 formats).
apt_entries() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      print $i, $(i+1)
    }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no") {
          nu = split(uris, u, " "); ns = split(suites, s, " ")
          for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) print u[a], s[b]
        }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
        if (key == "types") types = $0
        else if (key == "uris") uris = $0
        else if (key == "suites") suites = $0
        else if (key == "enabled") enabled = tolower($0) }
      END { flush() }' "$f"
  done | awk -v suite="$SUITE" '$2 == suite || $2 == suite "-updates" || $2 == suite "-security"' |
    sed 's|/* | |' | sort -u
}

build_base() {
  if [ "${BERTH_REBUILD_BASE:-}" != 1 ] && "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    log "base image $BASE exists"
    return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (hack/deps.sh test installs it)"
  local entries mirror rootfs t0
  entries=$(apt_entries)
  mirror=$(awk -v suite="$SUITE" '$2 == suite {print $1; exit}' <<<"$entries")
  [ -n "$mirror" ] || die "no Debian $SUITE entry in this machine's apt sources"
  t0=$(date +%s)
  rootfs=$(mktemp -d /tmp/berth-rootfs.XXXXXX)
  log "debootstrap --variant=minbase $SUITE from $mirror"
  if ! debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1; then
    tail -n 20 "$rootfs.log" >&2
    rm -rf "$rootfs" "$rootfs.log"
    die "debootstrap failed"
  fi
  # The image's apt uses the same Debian entries as this machine (main only), updates included.
  awk '{print "deb", $1, $2, "main"}' <<<"$entries" >"$rootfs/etc/apt/sources.list"
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    >"$rootfs/etc/apt/apt.conf.d/90berth-no-recommends"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
  tar -C "$rootfs" --numeric-owner -c . |
    "$DOCKER" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
  rm -rf "$rootfs" "$rootfs.log"
  log "base image $BASE built in $(($(date +%s) - t0))s"
}

# fill_context: deploy/.build/ gets the binaries and the engine's OpenAPI document.
fill_context() {
  local ctx=$ROOT/deploy/.build
  mkdir -p "$ctx"
  local need=()
  for i in "${images[@]}"; do
    case $i in
    engine) need+=(berth-engine) ;;
    uploads) need+=(berth-uploads) ;;
    esac
  done
  for b in "${need[@]}"; do
    [ -x "$BIN/$b" ] || die "$BIN/$b not found: run make build first"
    cp -p "$BIN/$b" "$ctx/$b"
  done
  if [[ " ${images[*]} " == *" engine "* ]]; then
    [ -f engine/api/swagger.yaml ] || die "engine/api/swagger.yaml not found"
    cp -p engine/api/swagger.yaml "$ctx/swagger.yaml"
  fi
  cp -p deploy/prometheus/prometheus.yml deploy/prometheus/berth.rules.yml "$ctx/"
}

build_image() {
  local name=$1 t0
  t0=$(date +%s)
  log "building $PREFIX$name:$TAG"
  local blog
  blog=$(mktemp /tmp/berth-build-$name.XXXXXX.log)
  if ! DOCKER_BUILDKIT=0 "$DOCKER" build --network host \
    -f "deploy/$name.Containerfile" -t "$PREFIX$name:$TAG" deploy/.build >"$blog" 2>&1; then
    tail -n 40 "$blog" >&2
    rm -f "$blog"
    die "build of $PREFIX$name:$TAG failed"
  fi
  rm -f "$blog"
  log "built $PREFIX$name:$TAG in $(($(date +%s) - t0))s"
}

build_base
fill_context
for i in "${images[@]}"; do
  build_image "$i"
done
