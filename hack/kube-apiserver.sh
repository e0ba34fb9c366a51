#!/usr/bin/env bash
# Builds kube-apiserver from the Go module proxy for the kube apply tests and prints its path.
#   hack/kube-apiserver.sh            builds (or reuses) the cached binary, prints its path
# The binary is cached by version in ${BERTH_CACHE:-$HOME/.cache/berth}/kube-apiserver-VERSION and
# reused when present. The build is a throwaway module that requires k8s.io/kubernetes and replaces
# each staging module its go.mod points at ./staging/... with the same module's v0.MINOR.PATCH
# release (375 s on 2 idle cores, built without optimisation; 437 s optimised). Concurrent callers
# wait for one build (flock).
# Environment: BERTH_KUBE_VERSION (default v1.31.4), BERTH_CACHE.
set -euo pipefail
LOG_TAG=kube-apiserver
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

version=${BERTH_KUBE_VERSION:-v1.31.4}
cached_build kube-apiserver "$version"

tmp=$(mktemp -d /tmp/berth-kube-apiserver.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
log "building kube-apiserver $version into $bin"
"$GO" mod init berth.local/kube-apiserver >/dev/null 2>&1
gomod=$("$GO" mod download -json "k8s.io/kubernetes@$version" | jq -r .GoMod)
[ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$version"
staging_version=v0.${version#v1.}
replaces=0
while read -r mod; do
  "$GO" mod edit -replace "$mod=$mod@$staging_version"
  replaces=$((replaces + 1))
done < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod")
[ "$replaces" -gt 0 ] || die "no staging modules found in $gomod"
"$GO" mod edit -require "k8s.io/kubernetes@$version"
cat >tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
"$GO" mod tidy -e >/dev/null 2>&1 || true
"$GO" mod tidy
# A test fixture: built without optimisation, inlining or DWARF (the binary keeps none: -s -w),
# which cuts its compile time by about a quarter (its requests in the tests are few).
GOGC=$BUILD_GOGC "$GO" build -trimpath -gcflags="all=-N -l -dwarf=false" -ldflags="-s -w" -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$bin.tmp" "$bin"
log "built $bin ($((replaces)) staging modules replaced)"
echo "$bin"
