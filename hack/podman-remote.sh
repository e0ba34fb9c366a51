#!/usr/bin/env bash
# Builds a Podman remote client (cmd/podman with the `remote` tag) from the Go module proxy for the
# tests that run the README's podman table with it, and prints its path: Podman 6
# (go.podman.io/podman/v6) by default, or Podman 5 (github.com/containers/podman/v5).
#   hack/podman-remote.sh [VERSION]  builds (or reuses) the cached binary, prints its path
# The binary is cached by version in ${BERTH_CACHE:-$HOME/.cache/berth}/podman-remote-VERSION and
# reused when present; concurrent callers wait for one build (flock). A remote-only client needs no
# cgo (no libgpgme with the openpgp tag, no storage drivers) and runs on any host: only Podman's
# service refuses these machines' cgroup v1 (../shared/ENVIRONMENT.md).
# VERSION: v6.0.2 (the default; BERTH_PODMAN_REMOTE_VERSION) or v5.4.2 (Debian 13's). Environment:
# BERTH_CACHE.
set -euo pipefail
LOG_TAG=podman-remote
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

version=${1:-${BERTH_PODMAN_REMOTE_VERSION:-v6.0.2}}
case "$version" in
v5.*) module=github.com/containers/podman/v5 ;;
v6.*) module=go.podman.io/podman/v6 ;;
*) die "podman remote client $version: only v5.x and v6.x are known" ;;
esac
cached_build podman-remote "$version"

log "building podman remote client $version into $bin"
module_workdir podman-remote "$module@$version"
# A test fixture, built like kube-apiserver (hack/kube-apiserver.sh): no optimisation, inlining or
# DWARF.
GOGC=$BUILD_GOGC "$GO" build -trimpath -tags 'remote containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper' \
  -gcflags="all=-N -l -dwarf=false" -ldflags="-s -w" -o "$bin.tmp" ./cmd/podman
mv "$bin.tmp" "$bin"
log "built $bin ($("$bin" --version))"
echo "$bin"
