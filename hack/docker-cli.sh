#!/usr/bin/env bash
# Builds a current docker CLI (github.com/docker/cli, cmd/docker) from the Go module proxy for the
# docker CLI tests and prints its path.
#   hack/docker-cli.sh            builds (or reuses) the cached binary, prints its path
# The binary is cached by version in ${BERTH_CACHE:-$HOME/.cache/berth}/docker-cli-VERSION and
# reused when present; concurrent callers wait for one build (flock).
# docker/cli has no go.mod (it versions by calendar, as +incompatible): its vendor.mod is the
# module file, and the module zip carries no vendor/ tree, so the build copies the downloaded module,
# makes go.mod/go.sum of vendor.mod/vendor.sum and builds with -mod=mod. The proxy refuses
# github.com/moby/swarmkit/v2@v2.1.3 (403, the version vendor.mod pins); v2.1.2 is served and
# replaces it (swarm commands are not served by the engine anyway).
# Environment: BERTH_DOCKER_CLI_VERSION (default v29.9.3), BERTH_CACHE.
set -euo pipefail
LOG_TAG=docker-cli
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

version=${BERTH_DOCKER_CLI_VERSION:-v29.9.3}
module=github.com/docker/cli
cached_build docker-cli "$version"

log "building docker CLI $version into $bin"
module_workdir docker-cli "$module@$version+incompatible"
cp vendor.mod go.mod
cp vendor.sum go.sum
"$GO" mod edit -replace github.com/moby/swarmkit/v2@v2.1.3=github.com/moby/swarmkit/v2@v2.1.2
# A test fixture, built like kube-apiserver (hack/kube-apiserver.sh): no optimisation, inlining or
# DWARF. Measured from an empty build cache: 128 CPU seconds optimised, 96 without optimisation
# and inlining (2026-11-27).
GOGC=$BUILD_GOGC "$GO" build -trimpath -gcflags="all=-N -l -dwarf=false" -ldflags="-s -w -X $module/cli/version.Version=${version#v}" -o "$bin.tmp" ./cmd/docker
mv "$bin.tmp" "$bin"
log "built $bin"
echo "$bin"
