#!/usr/bin/env bash
# Runs every Go fuzz target of the workspace (the `make fuzz` target).
# Usage: hack/fuzz.sh [FUZZTIME]   FUZZTIME per target, default 20s (go test -fuzztime syntax).
# Finds each `func FuzzName(f *testing.F)` in a _test.go file and runs it alone in its package:
#   go test -run '^$' -fuzz '^FuzzName$' -fuzztime FUZZTIME
# New crashers land in the package's testdata/fuzz/FuzzName/ (commit them as seeds once fixed).
set -uo pipefail
LOG_TAG=fuzz
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
fuzztime=${1:-20s}

export CGO_ENABLED=${CGO_ENABLED:-1}
targets=()
while IFS=: read -r file _ line; do
  name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  targets+=("$(dirname "$file") $name")
done < <(grep -rnE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\([a-zA-Z_]+ \*testing\.F\)' \
  "${MODULES[@]}" 2>/dev/null | sort)

if [ ${#targets[@]} -eq 0 ]; then
  log "no fuzz targets found"
  exit 0
fi
log "${#targets[@]} fuzz targets, $fuzztime each"
failed=()
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  log "== $dir $name"
  if ! (cd "$dir" && "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" .); then
    failed+=("$dir $name")
  fi
done
echo
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAIL %s\n' "${failed[@]}"
  echo "$((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
  exit 1
fi
echo "${#targets[@]} passed, 0 failed"
