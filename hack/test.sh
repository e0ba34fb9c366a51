#!/usr/bin/env bash
# Runs Berth's tests with the real components they need, as root on Debian 12.
#   hack/test.sh unit       shared, uploads, engine (with a throwaway PostgreSQL)
#   hack/test.sh contracts  Pact consumer tests and the provider verification (cgo + libpact_ffi)
#   hack/test.sh e2e        starts dockerd if needed, builds the images, runs the e2e module
#   hack/test.sh checks     gofmt, go vet, go mod tidy, promtool rules and unit tests, deploy/ manifest checks
#   hack/test.sh hosts      the host suite in a Debian 12 VM with systemd and cgroup v2 (hack/hostlab.sh)
#   hack/test.sh all        checks, then all of the above
# Exports BERTH_TEST_STRICT=1: a test whose component is missing fails instead of skipping.
# Environment: BERTH_TEST_VERBOSE=1 adds -v; BERTH_TEST_RUN=REGEX adds -run REGEX.
# Exits non-zero when anything failed; the output ends with go test's ok/FAIL lines.
set -uo pipefail
LOG_TAG=test
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

what=${1:-all}
case "$what" in unit | contracts | e2e | checks | hosts | all) ;; *)
  echo "usage: $0 {unit|contracts|e2e|checks|hosts|all}" >&2
  exit 2
  ;;
esac

export BERTH_TEST_STRICT=1
# Every module builds without cgo, as the shipped binaries do (make build), so the dependencies are
# compiled once for go vet, the tests and the engine binaries; only the contracts link libpact_ffi
# (cgo), and they build their engine binary without it too.
export CGO_ENABLED=0
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
export BERTH_E2E_ENGINE_IMAGE=${BERTH_E2E_ENGINE_IMAGE:-localhost/berth-engine:latest}
export BERTH_E2E_UPLOADS_IMAGE=${BERTH_E2E_UPLOADS_IMAGE:-localhost/berth-uploads:latest}
# libpact_ffi lives in /usr/local/lib (hack/deps.sh); make sure the linker and loader look there.
export LIBRARY_PATH=/usr/local/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=/usr/local/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# Per-module go test timeouts: the whole suite must stay well under 30 minutes on 2 cores.
declare -A TIMEOUT=([shared]=5m [uploads]=10m [engine]=15m [contracts]=10m [e2e]=15m)

LOGDIR=$(mktemp -d /tmp/berth-test.XXXXXX)
RESULTS=$LOGDIR/results
: >"$RESULTS"
# The summary lines and the failure mark live in files: the lanes of `all` run in subshells.
SUMMARY=$LOGDIR/summary
: >"$SUMMARY"
FAILMARK=$LOGDIR/failed
# summary LINE: adds a line to the final summary.
summary() { echo "$1" >>"$SUMMARY"; }
# failed: true once any step failed, in this shell or a lane.
failed() { [ "$FAILED" -ne 0 ] || [ -e "$FAILMARK" ]; }
FAILED=0
declare -A TOOL_PID=() # background tool builds by name (start_tool_build)
START=$(date +%s)

# cleanup: stops what this script started; keeps the logs when something failed. Runs before
# the summary (so the output ends with go test's lines) and again, as a no-op, on exit.
CLEANED=0
cleanup() {
  [ "$CLEANED" -eq 0 ] || return 0
  CLEANED=1
  stop_postgres
  stop_dockerd
  local pid
  for pid in "${TOOL_PID[@]}"; do kill "$pid" 2>/dev/null; done
  [ -z "$HOSTLAB_IMAGE_PID" ] || kill "$HOSTLAB_IMAGE_PID" 2>/dev/null
  if [ -d "$LOGDIR" ]; then
    if ! failed; then rm -rf "$LOGDIR"; else log "logs kept in $LOGDIR"; fi
  fi
}
trap 'FAILED=1; cleanup' EXIT
trap 'log "interrupted"; exit 130' INT TERM

# step NAME CMD...: runs a check, records PASS/FAIL and its duration.
step() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  log "== $name"
  "$@"
  rc=$?
  if [ $rc -eq 0 ]; then
    summary "[pass] $(printf '%-28s' "$name") $(($(date +%s) - t0))s"
  else
    summary "[FAIL] $(printf '%-28s' "$name") $(($(date +%s) - t0))s (exit $rc)"
    FAILED=1
    : >"$FAILMARK"
  fi
  return $rc
}

existing_modules() {
  local m
  for m in "${MODULES[@]}"; do module_has_go "$m" && echo "$m"; done
}

# go_mod_download: fetches the modules the packages and tests of each module need (not the whole
# module graph: `go mod download` would also ask for versions the proxy no longer serves).
go_mod_download() {
  local m
  for m in $(existing_modules); do
    (cd "$m" && "$GO" list -e -deps -test ./... >/dev/null) || return 1
  done
}

gofmt_check() {
  local out
  out=$(gofmt -l $(existing_modules) 2>&1)
  if [ -n "$out" ]; then
    echo "gofmt: these files need formatting (run gofmt -w):" >&2
    echo "$out" >&2
    return 1
  fi
}

# VETTED: 1 once go vet has passed over every module in this run; go test then skips its own vet,
# a subset of the same analyzers whose facts (cached under other flags) it would compute again
# for every dependency: 50 of the engine's 139 CPU seconds of test builds on a cold cache.
VETTED=0
go_vet() {
  local m rc=0
  for m in $(existing_modules); do
    (cd "$m" && CGO_ENABLED=$(module_cgo "$m") GOGC=$BUILD_GOGC "$GO" vet ./...) || rc=1
  done
  [ $rc -ne 0 ] || VETTED=1
  return $rc
}

# module_cgo MOD: 1 for the module that links C (the contracts: libpact_ffi), else 0.
module_cgo() { if [ "$1" = contracts ]; then echo 1; else echo 0; fi; }

# go_mod_tidy: every module's go.mod and go.sum are what `go mod tidy` would write.
go_mod_tidy() {
  local m rc=0
  for m in $(existing_modules); do
    (cd "$m" && "$GO" mod tidy -diff) || { echo "$m: go.mod/go.sum not tidy (run go mod tidy)" >&2; rc=1; }
  done
  return $rc
}

promtool_check() {
  command -v promtool >/dev/null 2>&1 || { echo "promtool not found (package prometheus)" >&2; return 1; }
  local rules=(deploy/prometheus/*.rules.yml)
  [ -e "${rules[0]}" ] || { echo "no deploy/prometheus/*.rules.yml" >&2; return 1; }
  promtool check rules "${rules[@]}" || return 1
  # check config resolves rule_files relative to the config file.
  promtool check config deploy/prometheus/prometheus.yml || return 1
  if [ -f deploy/prometheus/rules_test.yml ]; then
    (cd deploy/prometheus && promtool test rules rules_test.yml) || return 1
  fi
}

# manifest_check: every YAML file under deploy/ parses, the compose file passes docker-compose's
# schema check, the kustomization renders and its objects decode strictly into the Kubernetes API
# types (hack/kubecheck), and the dashboard is JSON whose queries are valid PromQL.
manifest_check() {
  local f rc=0
  mapfile -t yamls < <(find deploy -name '*.yml' -o -name '*.yaml' | sort)
  /usr/bin/python3 -c '
import sys, yaml
bad = 0
for f in sys.argv[1:]:
    try:
        with open(f) as fh:
            list(yaml.safe_load_all(fh))
    except Exception as e:
        print(f"{f}: {e}", file=sys.stderr)
        bad = 1
sys.exit(bad)' "${yamls[@]}" || rc=1
  if [ -f deploy/compose.yaml ]; then
    docker-compose -f deploy/compose.yaml config -q || rc=1
  fi
  if [ -f deploy/kubernetes/kustomization.yaml ]; then
    # Rendered by kustomize, then decoded strictly into the k8s.io/api types (no cluster here).
    if kubectl kustomize deploy/kubernetes >"$LOGDIR/kustomize.yaml"; then
      (cd hack/kubecheck && GOWORK=off "$GO" run . <"$LOGDIR/kustomize.yaml") || rc=1
    else
      rc=1
    fi
  fi
  for f in deploy/grafana/*.json; do
    [ -e "$f" ] || continue
    jq -e '.panels | length > 0' "$f" >/dev/null || { echo "$f: invalid JSON or no panels" >&2; rc=1; }
    # Every panel query must be valid PromQL: check them as recording rules, with the
    # dashboard variables replaced by sample values.
    {
      echo 'groups: [{name: dashboard, rules: ['
      jq -r '[.. | objects | select(has("expr")) | .expr] | map(
          gsub("\\$__rate_interval"; "5m") | gsub("\\$service"; "berth_uploads") | gsub("\\$instance"; ".*"))
        | to_entries[] | "{record: dashboard_query_\(.key), expr: \(.value | tojson)},"' "$f"
      echo ']}]'
    } >"$LOGDIR/dashboard.rules.yml"
    promtool check rules "$LOGDIR/dashboard.rules.yml" >/dev/null ||
      { promtool check rules "$LOGDIR/dashboard.rules.yml" >&2; echo "$f: invalid PromQL" >&2; rc=1; }
  done
  return $rc
}

# gotest MOD: go test of one module; its output goes to the terminal and to a log whose result
# lines are repeated in the final block.
gotest() {
  local m=$1 args
  if ! module_has_tests "$m"; then
    log "$m: no test files yet"
    summary "[----] $(printf '%-28s' "go test $m") no test files"
    return 0
  fi
  # -s -w: test binaries without a symbol table and DWARF (Go's own stack traces need neither).
  # Linking the engine's 60 here took 149 s of CPU with them and 94 s without, and wrote 1.4 GB
  # instead of 2.0 GB.
  args=(test -count=1 -timeout "${TIMEOUT[$m]}" -ldflags='-s -w')
  [ "$VETTED" = 1 ] && args+=(-vet=off)
  [ "${BERTH_TEST_VERBOSE:-}" = 1 ] && args+=(-v)
  [ -n "${BERTH_TEST_RUN:-}" ] && args+=(-run "$BERTH_TEST_RUN")
  if [ "$m" = engine ]; then
    local pkgs
    pkgs=$(engine_packages) || { summary "[FAIL] go list of the engine's packages"; : >"$FAILMARK"; return 1; }
    # shellcheck disable=SC2206 # one import path a line, no spaces
    args+=($pkgs)
  else
    args+=(./...)
  fi
  step "go test $m" run_logged "$LOGDIR/go-test-$m.log" env CGO_ENABLED="$(module_cgo "$m")" bash -c 'cd "$1" && shift && exec "$@"' _ "$m" "$GO" "${args[@]}"
  local rc=$?
  grep -E '^(ok|FAIL|--- FAIL)' "$LOGDIR/go-test-$m.log" >>"$RESULTS"
  return $rc
}

# ENGINE_SLOW: the engine's packages whose tests take longest (15 to 90 s each on 2 cores, from the
# CI logs), longest first. go test runs the packages in the order given, -p at a time: started
# first, the long ones overlap the many short ones instead of one of them running alone at the end.
# A package not in the list runs after them; a name here that no longer exists is skipped.
ENGINE_SLOW=(
  internal/integration/commandtable
  internal/backend/lifecycle/containers
  internal/integration/networksapi
  internal/integration/dockercli
  internal/backend/images/imagestore/transfertest
  internal/integration/securityapi
  internal/integration/imagesapi
  internal/integration/kubeapi
  internal/integration/podsapi
  internal/backend/execution/containerio
  internal/integration/quadletsapi
  internal/integration/buildapi
  internal/integration/hostsuite
  internal/integration/kubegenapi
  internal/integration/compatapi
  internal/integration/devicesapi
)

# engine_packages prints the engine module's packages (import paths), ENGINE_SLOW's first.
engine_packages() {
  local all p prefix
  all=$(cd engine && "$GO" list ./...) || return 1
  prefix=$(awk '$1 == "module" {print $2; exit}' engine/go.mod)/
  for p in "${ENGINE_SLOW[@]}"; do
    grep -qxF "$prefix$p" <<<"$all" && echo "$prefix$p"
  done
  for p in $all; do
    printf '%s\n' "${ENGINE_SLOW[@]/#/$prefix}" | grep -qxF "$p" || echo "$p"
  done
}

# run_logged LOG CMD...: runs CMD with its output on the terminal and in LOG; CMD's exit code.
run_logged() {
  local logf=$1
  shift
  "$@" 2>&1 | tee "$logf"
  return "${PIPESTATUS[0]}"
}

# The cached tool builds the tests need (kube-apiserver for the kube apply tests, Docker Compose
# for the docker API tests) start in the background at once, so a first build (minutes) overlaps
# the checks and the other tests. Each script prints the tool's path on its last line.
# start_tool_build NAME SCRIPT [ARGS] starts hack/SCRIPT ARGS; wait_tool_build NAME SCRIPT VAR [ARGS] waits for it
# (starting it first if need be) and exports VAR as the tool's path. TOOL_PID (declared at the
# top, for cleanup) holds the builds still running.
start_tool_build() {
  "$ROOT/hack/$2" "${@:3}" >"$LOGDIR/$1.path" 2>"$LOGDIR/$1.log" &
  TOOL_PID[$1]=$!
}
wait_tool_build() {
  local name=$1 script=$2 var=$3 rc=0
  [ -n "${TOOL_PID[$name]:-}" ] || start_tool_build "$name" "$script" "${@:4}"
  wait "${TOOL_PID[$name]}" || rc=$?
  unset "TOOL_PID[$name]"
  if [ $rc -ne 0 ]; then
    cat "$LOGDIR/$name.log" >&2
    return $rc
  fi
  export "$var=$(tail -n 1 "$LOGDIR/$name.path")"
}
start_kube_apiserver_build() { start_tool_build kube-apiserver kube-apiserver.sh; }
wait_kube_apiserver() { wait_tool_build kube-apiserver kube-apiserver.sh BERTH_KUBE_APISERVER; }
start_compose_build() { start_tool_build docker-compose docker-compose.sh; }
wait_compose() { wait_tool_build docker-compose docker-compose.sh BERTH_DOCKER_COMPOSE; }
start_docker_cli_build() { start_tool_build docker-cli docker-cli.sh; }
wait_docker_cli() { wait_tool_build docker-cli docker-cli.sh BERTH_DOCKER_CLI_CURRENT; }
# Podman 5's and 6's remote clients: the README's podman table runs with each too (BERTH_PODMAN5,
# BERTH_PODMAN6).
start_podman_remote_build() {
  start_tool_build podman-remote podman-remote.sh
  start_tool_build podman-remote-v5 podman-remote.sh v5.4.2
}
wait_podman_remote() {
  wait_tool_build podman-remote podman-remote.sh BERTH_PODMAN6 &&
    wait_tool_build podman-remote-v5 podman-remote.sh BERTH_PODMAN5 v5.4.2
}

# use_docker_cli_current makes the engine's docker CLI tests (internal/integration/dockercli) run the
# current docker CLI (hack/docker-cli.sh, v29) as `docker`, in the engine module's one pass: the
# package runs once, with the client users have now (BERTH_DOCKER_CLI; its terminal test and the
# README's docker table in commandtable keep the machine's own client).
use_docker_cli_current() {
  wait_docker_cli || return 1
  export BERTH_DOCKER_CLI="$BERTH_DOCKER_CLI_CURRENT"
  log "docker CLI tests: $BERTH_DOCKER_CLI"
}

# engine_binary builds berth-engine once for the tests and exports BERTH_ENGINE_BIN, which they then
# start as it is (enginetest.EngineBinary, the contract and uploads tests): 15 test packages start
# the binary, and each linked its own copy before (about 6.5 s of CPU a link here, 100 s in all). Built
# before the tests, not inside their deadlines, which a cold cache on 2 busy cores can exceed.
engine_binary() {
  mkdir -p "$LOGDIR/bin" &&
    (cd engine && CGO_ENABLED=0 "$GO" build -ldflags '-s -w' -o "$LOGDIR/bin/berth-engine" ./cmd/berth-engine) &&
    export BERTH_ENGINE_BIN="$LOGDIR/bin/berth-engine"
}

# find_criu exports BERTH_ENGINE_CRIU: a CRIU that passes `criu check` (the machine's own, or one
# hack/criu.sh builds from Debian 13's source package and caches) for the checkpoint tests' engines.
# The build (about a minute on a fresh machine) starts with the other tool builds (main).
find_criu() {
  wait_tool_build criu criu.sh BERTH_ENGINE_CRIU || return 1
  log "CRIU: $BERTH_ENGINE_CRIU"
}

# engine_prerequisites readies what the engine's tests need: CRIU, the cached tool builds
# (kube-apiserver, Compose, docker CLI v29, Podman 6's remote client) and a warm berth-engine build.
engine_prerequisites() {
  step "CRIU" find_criu
  step "build kube-apiserver" wait_kube_apiserver
  step "build docker compose" wait_compose
  step "build docker CLI v29" use_docker_cli_current
  step "build podman 5 and 6 remote clients" wait_podman_remote
  [ -n "${BERTH_ENGINE_BIN:-}" ] || step "build berth-engine" engine_binary
}

run_unit() {
  [ -n "$PG_DIR" ] || step "start PostgreSQL" start_postgres || return 1
  # Before the modules: the uploads tests start the binary too.
  [ -n "${BERTH_ENGINE_BIN:-}" ] || step "build berth-engine" engine_binary
  gotest shared
  gotest uploads
  engine_prerequisites
  gotest engine
}

run_contracts() {
  if [ ! -e /usr/local/lib/libpact_ffi.so ] && ! ldconfig -p | grep -q libpact_ffi; then
    echo "libpact_ffi.so not installed: run hack/deps.sh test" >&2
    summary "[FAIL] $(printf '%-28s' "go test contracts") libpact_ffi missing"
    FAILED=1
    : >"$FAILMARK"
    return 1
  fi
  gotest contracts
}

build_binaries() {
  mkdir -p "$ROOT/bin"
  (cd engine && CGO_ENABLED=0 "$GO" build -o "$ROOT/bin/berth-engine" ./cmd/berth-engine) &&
    (cd uploads && CGO_ENABLED=0 "$GO" build -o "$ROOT/bin/berth-uploads" ./cmd/berth-uploads)
}

run_e2e() {
  module_has_tests e2e || { gotest e2e; return 0; }
  step "start dockerd" start_dockerd || return 1
  step "build binaries" build_binaries || return 1
  step "build images" "$ROOT/hack/images.sh" engine uploads || return 1
  gotest e2e
}

# start_hostlab_image builds (or finds cached) the host lab's VM image in the background, so a
# first build (debootstrap, several minutes) overlaps the other tests; run_hosts waits for it.
# The build's exit code lands in hostlab-image.rc: run_hosts may wait from a lane (a subshell),
# which cannot `wait` for a process its parent started.
HOSTLAB_IMAGE_PID=""
start_hostlab_image() {
  (
    rc=0
    "$ROOT/hack/hostlab.sh" image >"$LOGDIR/hostlab-image.log" 2>&1 || rc=$?
    echo "$rc" >"$LOGDIR/hostlab-image.rc"
  ) &
  HOSTLAB_IMAGE_PID=$!
}
wait_hostlab_image() {
  [ -n "$HOSTLAB_IMAGE_PID" ] || start_hostlab_image
  local rc i
  for ((i = 0; i < 3600; i++)); do [ -s "$LOGDIR/hostlab-image.rc" ] && break; sleep 1; done
  rc=$(cat "$LOGDIR/hostlab-image.rc" 2>/dev/null) || { echo "the host lab image's build did not end within an hour" >&2; return 1; }
  [ "$rc" -eq 0 ] || cat "$LOGDIR/hostlab-image.log" >&2
  return "$rc"
}

run_hosts() {
  step "build host lab image" wait_hostlab_image || return 1
  step "host suite (VM)" run_logged "$LOGDIR/hostlab.log" "$ROOT/hack/hostlab.sh" run
  local rc=$?
  grep -E '^(ok|FAIL|--- FAIL|PASS)' "$LOGDIR/hostlab.log" | sed 's/^/hostlab: /' >>"$RESULTS"
  return $rc
}

# lane NAME FN...: runs the functions in the background with their output in a file of its own,
# printed when the lane ends (see wait_lanes), so the lanes' lines do not interleave.
LANES=()
lane() {
  local name=$1
  shift
  (
    for fn in "$@"; do "$fn" || true; done
  ) >"$LOGDIR/lane-$name.out" 2>&1 &
  LANES+=("$name:$!")
}
wait_lanes() {
  local l
  for l in "${LANES[@]}"; do
    wait "${l#*:}"
    log "== lane ${l%%:*}"
    cat "$LOGDIR/lane-${l%%:*}.out"
  done
  LANES=()
}

# run_all: the checks (go vet compiles every package once for the tests after it), then lanes at
# once: the engine's tests, the shared, uploads and contract tests (mostly PostgreSQL and I/O), the
# e2e images (apt and docker build) and the host lab's VM (qemu); the e2e tests (containers in
# dockerd, a minute) follow the engine's. The engine's integration tests spend most of their time
# waiting on containers and clients, so the VM beside them shortens the run instead of stretching
# it (CI log: user+sys CPU was 1.1 cores on average with the VM after them).
run_all() {
  run_checks
  step "start PostgreSQL" start_postgres || true
  step "start dockerd" start_dockerd || true
  # Before the lanes: the contract and uploads tests start the binary too.
  [ -n "${BERTH_ENGINE_BIN:-}" ] || step "build berth-engine" engine_binary || true
  lane modules gotest_shared gotest_uploads run_contracts
  lane e2e-images e2e_images
  engine_prerequisites
  lane hosts run_hosts
  gotest engine
  lane e2e gotest_e2e
  wait_lanes
}
# gotest_e2e runs the e2e module once its images are built (lane e2e-images, which marks its end
# with e2e-images.done: the lanes are sibling subshells and cannot wait for each other).
gotest_e2e() {
  local i
  for ((i = 0; i < 1800; i++)); do [ -e "$LOGDIR/e2e-images.done" ] && break; sleep 1; done
  if [ -e "$LOGDIR/e2e-images.ok" ]; then
    gotest e2e
  else
    summary "[FAIL] $(printf '%-28s' "go test e2e") not run: the e2e images failed"
    : >"$FAILMARK"
  fi
}
gotest_shared() { gotest shared; }
gotest_uploads() { gotest uploads; }
e2e_images() {
  e2e_images_build
  local rc=$?
  : >"$LOGDIR/e2e-images.done"
  return $rc
}
e2e_images_build() {
  module_has_tests e2e || { : >"$LOGDIR/e2e-images.ok"; return 0; }
  step "build binaries" build_binaries || return 1
  step "build images" "$ROOT/hack/images.sh" engine uploads || return 1
  : >"$LOGDIR/e2e-images.ok"
}

run_checks() {
  step "gofmt" gofmt_check
  step "go vet" go_vet
  step "go mod tidy" go_mod_tidy
  step "promtool" promtool_check
  step "manifests" manifest_check
}

# main runs the selected tests. The whole script is parsed before main starts (it is called on the
# last line), so editing this file during a run cannot change the running script.
main() {
  log "berth tests: $what (go: $("$GO" version | cut -d' ' -f3), GOFLAGS=$GOFLAGS)"
  case "$what" in unit | all) start_kube_apiserver_build && start_compose_build && start_docker_cli_build && start_podman_remote_build && start_tool_build criu criu.sh ;; esac
  case "$what" in hosts | all) start_hostlab_image ;; esac
  step "go mod download" go_mod_download
  case "$what" in
  unit) run_unit ;;
  contracts) run_contracts ;;
  e2e) run_e2e ;;
  checks) run_checks ;;
  hosts) run_hosts ;;
  all) run_all ;;
  esac

  # Read before cleanup, which removes the log directory when nothing failed.
  results=$(cat "$RESULTS")
  summary_lines=$(cat "$SUMMARY")
  if failed; then FAILED=1; fi
  cleanup
  echo
  echo "==================== berth test summary ($what, $(($(date +%s) - START))s) ===================="
  echo "$summary_lines"
  echo "==================== go test results ===================="
  [ -z "$results" ] || echo "$results"
  if [ "$FAILED" -ne 0 ]; then
    FAILED=1
    echo "FAIL"
    exit 1
  fi
}

main "$@"; exit $?
