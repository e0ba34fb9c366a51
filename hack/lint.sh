#!/usr/bin/env bash
# Static checks of every module (the `make lint` target): gofmt -l, go vet, and
# `go mod tidy -e -diff` (the module files must already be tidy; Go >= 1.23; -e so that a test
# dependency of a dependency that the module proxy no longer serves does not hide the diff).
set -uo pipefail
LOG_TAG=lint
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

rc=0
mods=()
for m in "${MODULES[@]}"; do module_has_go "$m" && mods+=("$m"); done
[ ${#mods[@]} -gt 0 ] || { log "no Go code yet"; exit 0; }

log "gofmt"
out=$(gofmt -l "${mods[@]}")
if [ -n "$out" ]; then
  echo "gofmt: needs formatting (gofmt -w):" >&2
  echo "$out" >&2
  rc=1
fi
for m in "${mods[@]}"; do
  log "go vet $m"
  (cd "$m" && "$GO" vet ./...) || rc=1
  log "go mod tidy -diff $m"
  (cd "$m" && GOWORK=off "$GO" mod tidy -e -diff) || { echo "$m: go.mod/go.sum not tidy (make tidy)" >&2; rc=1; }
done
if command -v staticcheck >/dev/null 2>&1; then
  for m in "${mods[@]}"; do
    log "staticcheck $m"
    (cd "$m" && staticcheck ./...) || rc=1
  done
fi
[ $rc -eq 0 ] && log "ok"
exit $rc
