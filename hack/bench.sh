#!/usr/bin/env bash
# The `make bench` harness: starts a reference Podman 4.3.1 API service on loopback, with its own
# store under a temporary directory, then runs the Go benchmarks of shared, uploads and engine,
# which compare Berth with it (and with dd for the uploads PUT throughput).
# Usage: hack/bench.sh [BENCH_REGEX]   (default: all benchmarks)
# Environment: BENCHTIME (go test -benchtime, default 1s), BENCHCOUNT (-count, default 1),
#   BERTH_BENCH_MODULES (default "shared uploads engine"), BERTH_BENCH_PACKAGES (default ./...;
#   e.g. ./internal/integration/dockercli with BERTH_BENCH_MODULES=engine to build one package).
# Exports to the benchmarks:
#   BERTH_BENCH=1
#   BERTH_BENCH_PODMAN_URL=tcp://127.0.0.1:PORT   the Podman service
#   BERTH_BENCH_RLIMIT_NOFILE, BERTH_BENCH_RLIMIT_NPROC   the highest rlimits a container created
#     on that service may ask for (see below)
#   BERTH_BENCH_DOCKER_HOST=tcp://127.0.0.1:PORT   Debian's dockerd 20.10 (when installed), the
#     peer of the Docker API benchmarks, on a private data/exec root with its own containerd,
#     --iptables=false --bridge=none (it touches no host networking; containers run --network none)
#   BERTH_ENGINE_CRIU   a CRIU that passes `criu check` (hack/criu.sh); its directory also goes first
#     in the PATH the Podman service runs with, so both engines checkpoint with the same CRIU
#
# Settings the Podman service needs on these machines (found by trying them):
# - runtime runc and cgroup manager cgroupfs: crun fails on the hybrid cgroup v1 hierarchy;
#   events to a file: there is no systemd journal.
# - --root/--runroot and every other path in the containers.conf below point into the temporary
#   directory, so the machine's default store (/var/lib/containers/storage) is never touched.
#   (containers/image still keeps its blob-info cache in /var/lib/containers/cache.)
# - rlimits: rootful Podman 4.3.1 gives every container nofile=1048576 unless the create request
#   carries r_limits, and the containers.conf default_ulimits are applied by the *client*, not by
#   the service. This machine's hard nofile is 20000 and the service's own hard nproc is lower
#   than the shell's, so runc fails ("error setting rlimit type 7/6: operation not permitted").
#   Benchmarks must send r_limits within BERTH_BENCH_RLIMIT_NOFILE / _NPROC (read from the running
#   service's /proc/PID/limits); `podman --remote run --ulimit nofile=N:N --ulimit nproc=M:M`
#   does the same by hand.
set -uo pipefail
LOG_TAG=bench
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# main is parsed whole before it runs (called on the last line): editing this file during a
# run cannot change the running script.
# criu_breakpoints_or_not dumps a throwaway sleep with CRIU: where it does not end within 10 s the
# machine's CPU ignores the hardware breakpoints CRIU sets (docs/engine/checkpoint.md), the engine
# tells its CRIU to trace system calls instead (CRIU_FAULT=130), and so must the Podman service,
# whose checkpoints would hang; exported here, both engines' CRIU run alike.
criu_breakpoints_or_not() {
  local dir pid rc=0
  dir=$(mktemp -d /tmp/berth-bench-criu.XXXXXX)
  setsid sleep 60 </dev/null >/dev/null 2>&1 &
  pid=$!
  timeout -s KILL 10 "$BERTH_ENGINE_CRIU" dump -t "$pid" -D "$dir" >/dev/null 2>&1 || rc=$?
  kill -9 "$pid" 2>/dev/null || true
  rm -rf "$dir"
  if [ "$rc" -eq 137 ]; then
    log "CRIU's dump hung (hardware breakpoints ignored here): both engines' CRIU trace system calls (CRIU_FAULT=130)"
    export CRIU_FAULT=130
  fi
}

main() {
  bench=${1:-.}
  benchtime=${BENCHTIME:-1s}
  benchcount=${BENCHCOUNT:-1}
  read -r -a bench_modules <<<"${BERTH_BENCH_MODULES:-shared uploads engine}"

  command -v podman >/dev/null 2>&1 || die "podman not found (hack/deps.sh test installs it)"
  command -v runc >/dev/null 2>&1 || die "runc not found (hack/deps.sh runtime installs it)"

  BERTH_ENGINE_CRIU=$("$ROOT/hack/criu.sh" | tail -n 1) || die "no working CRIU (hack/criu.sh)"
  export BERTH_ENGINE_CRIU
  export PATH="$(dirname "$BERTH_ENGINE_CRIU"):$PATH"
  criu_breakpoints_or_not

  PODMAN_DIR=$(mktemp -d /tmp/berth-bench-podman.XXXXXX)
  PODMAN_PID=""
  stop_podman() {
    if [ -n "$PODMAN_PID" ]; then
      # Containers a benchmark left behind go first, while the service still answers.
      timeout 60 podman --remote --url "$BERTH_BENCH_PODMAN_URL" rm -af -t 0 >/dev/null 2>&1 || true
      stop_process "$PODMAN_PID" 10 "podman service"
    fi
    # Overlay mounts of containers still mounted under the temporary store must go before rm.
    remove_mounted_dir "$PODMAN_DIR"
  }
  DOCKERD_DIR=""
  BENCH_DOCKERD_PID=""
  stop_dockerd_peer() {
    [ -n "$DOCKERD_DIR" ] || return 0
    if [ -n "$BENCH_DOCKERD_PID" ]; then
      stop_process "$BENCH_DOCKERD_PID" 30 dockerd
    fi
    remove_mounted_dir "$DOCKERD_DIR"
  }
  trap 'stop_dockerd_peer; stop_podman' EXIT
  trap 'log "interrupted"; exit 130' INT TERM

  cat >"$PODMAN_DIR/containers.conf" <<EOF
  [containers]
  # The service applies these to the infra containers of pods (their create
  # requests carry no r_limits); within this machine's hard limits.
  default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

  [engine]
  cgroup_manager = "cgroupfs"
  events_logger = "file"
  events_logfile_path = "$PODMAN_DIR/events.log"
  runtime = "runc"
  tmp_dir = "$PODMAN_DIR/tmp"
  volume_path = "$PODMAN_DIR/volumes"
  static_dir = "$PODMAN_DIR/root/libpod"

  [network]
  network_backend = "netavark"
  network_config_dir = "$PODMAN_DIR/networks"
EOF

  port=$(free_port)
  export BERTH_BENCH=1
  export BERTH_BENCH_PODMAN_URL=tcp://127.0.0.1:$port
  CONTAINERS_CONF=$PODMAN_DIR/containers.conf podman --root "$PODMAN_DIR/root" --runroot "$PODMAN_DIR/run" \
    --storage-driver overlay system service --time=0 "tcp:127.0.0.1:$port" >"$PODMAN_DIR/service.log" 2>&1 &
  PODMAN_PID=$!
  for _ in $(seq 1 100); do
    podman --remote --url "$BERTH_BENCH_PODMAN_URL" version >/dev/null 2>&1 && break
    kill -0 "$PODMAN_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! podman --remote --url "$BERTH_BENCH_PODMAN_URL" version >/dev/null 2>&1; then
    cat "$PODMAN_DIR/service.log" >&2
    die "podman system service did not answer on 127.0.0.1:$port"
  fi
  BERTH_BENCH_RLIMIT_NOFILE=$(awk '/^Max open files/ {print $5}' "/proc/$PODMAN_PID/limits")
  BERTH_BENCH_RLIMIT_NPROC=$(awk '/^Max processes/ {print $4}' "/proc/$PODMAN_PID/limits")
  export BERTH_BENCH_RLIMIT_NOFILE BERTH_BENCH_RLIMIT_NPROC
  log "podman $(podman --remote --url "$BERTH_BENCH_PODMAN_URL" version --format '{{.Server.Version}}') serving on $BERTH_BENCH_PODMAN_URL (store $PODMAN_DIR; rlimits nofile<=$BERTH_BENCH_RLIMIT_NOFILE nproc<=$BERTH_BENCH_RLIMIT_NPROC)"

  if command -v dockerd >/dev/null 2>&1; then
    start_dockerd_peer || die "dockerd did not answer (log: $DOCKERD_DIR/dockerd.log)"
  else
    log "dockerd not installed: the Docker API benchmarks are skipped"
  fi

  export CGO_ENABLED=${CGO_ENABLED:-1}
  out=$(mktemp /tmp/berth-bench.XXXXXX.txt)
  rc=0
  # -p 1: the packages' benchmarks run one after another; two at once would measure each other.
  for m in "${bench_modules[@]}"; do
    module_has_tests "$m" || { log "$m: no tests"; continue; }
    log "== go test -bench '$bench' in $m (benchtime $benchtime, count $benchcount)"
    (cd "$m" && "$GO" test -p 1 -run '^$' -bench "$bench" -benchtime "$benchtime" -count "$benchcount" \
      -benchmem -timeout 60m ${BERTH_BENCH_PACKAGES:-./...}) 2>&1 | tee -a "$out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  done

  echo
  echo "==================== benchmark results ===================="
  grep -E '^(Benchmark|ok|FAIL|---)' "$out" || true
  log "full output: $out"
  exit $rc
}

# start_dockerd_peer starts Debian's dockerd for the Docker API benchmarks: everything under a
# temporary directory (an empty daemon.json, so the machine's /etc/docker is not read), its own
# containerd (none runs on the machine's default socket), no iptables rules and no docker0 bridge,
# listening on loopback TCP only.
start_dockerd_peer() {
  DOCKERD_DIR=$(mktemp -d /tmp/berth-bench-dockerd.XXXXXX)
  echo '{}' >"$DOCKERD_DIR/daemon.json"
  local dport
  dport=$(free_port)
  export BERTH_BENCH_DOCKER_HOST=tcp://127.0.0.1:$dport
  dockerd --config-file "$DOCKERD_DIR/daemon.json" --data-root "$DOCKERD_DIR/data" --exec-root "$DOCKERD_DIR/exec" \
    --pidfile "$DOCKERD_DIR/dockerd.pid" -H "$BERTH_BENCH_DOCKER_HOST" --iptables=false --ip-masq=false \
    --bridge=none --storage-driver overlay2 >"$DOCKERD_DIR/dockerd.log" 2>&1 &
  BENCH_DOCKERD_PID=$!
  for _ in $(seq 1 120); do
    DOCKER_HOST=$BERTH_BENCH_DOCKER_HOST timeout 10 "$DOCKER" version >/dev/null 2>&1 && break
    kill -0 "$BENCH_DOCKERD_PID" 2>/dev/null || break
    sleep 0.5
  done
  if ! DOCKER_HOST=$BERTH_BENCH_DOCKER_HOST timeout 10 "$DOCKER" version >/dev/null 2>&1; then
    tail -n 30 "$DOCKERD_DIR/dockerd.log" >&2
    return 1
  fi
  log "dockerd $(DOCKER_HOST=$BERTH_BENCH_DOCKER_HOST "$DOCKER" version --format '{{.Server.Version}}') serving on $BERTH_BENCH_DOCKER_HOST (root $DOCKERD_DIR)"
}

main "$@"; exit $?
