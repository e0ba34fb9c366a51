#!/usr/bin/env bash
# Builds Docker Compose (a docker CLI plugin) from the Go module proxy for the compose tests and
# prints its path.
#   hack/docker-compose.sh            builds (or reuses) the cached binary, prints its path
# The binary is cached by version in ${BERTH_CACHE:-$HOME/.cache/berth}/docker-compose-VERSION and
# reused when present. The build is a throwaway module requiring github.com/docker/compose/v2;
# concurrent callers wait for one build (flock). Install it as a CLI plugin by linking it as
# $DOCKER_CONFIG/cli-plugins/docker-compose.
# Compose v5 (github.com/docker/compose/v5@v5.7.0) does not build here: its registry package needs
# github.com/docker/secrets-engine/{x,client}, which the module proxy refuses (403, every
# version). v2.40.3, the last v2 release, has no such dependency and builds.
# Environment: BERTH_COMPOSE_VERSION (default v2.40.3), BERTH_CACHE.
set -euo pipefail
LOG_TAG=docker-compose
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

version=${BERTH_COMPOSE_VERSION:-v2.40.3}
module=github.com/docker/compose/v2
cached_build docker-compose "$version"

tmp=$(mktemp -d /tmp/berth-docker-compose.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# Compose needs a newer Go than the machine may have: the go command fetches the toolchain its
# go.mod names from the module proxy (GOTOOLCHAIN=auto).
export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOTOOLCHAIN=auto
log "building docker compose $version into $bin"
"$GO" mod init berth.local/docker-compose >/dev/null 2>&1
"$GO" mod edit -require "$module@$version"
cat >tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/docker/compose/v2/cmd"
GO
"$GO" mod tidy
# A test fixture, built like kube-apiserver (hack/kube-apiserver.sh): no optimisation, inlining or
# DWARF. Measured from an empty build cache: 283 CPU seconds optimised, 196 without optimisation
# and inlining, 182 without DWARF as well (2026-11-27).
GOGC=$BUILD_GOGC "$GO" build -trimpath -gcflags="all=-N -l -dwarf=false" -ldflags="-s -w -X $module/internal.Version=$version" -o "$bin.tmp" "$module/cmd"
mv "$bin.tmp" "$bin"
log "built $bin"
echo "$bin"
