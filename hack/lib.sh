# Shared helpers for the hack/ scripts. Source it; it defines functions and a few variables only.
#   ROOT      the repository root
#   MODULES   the workspace modules, in test order
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULES=(shared uploads engine contracts e2e)

# The build tags containers/image and containers/storage need, and -trimpath (the build cache is
# shared by every checkout, wherever it lies); the Makefile exports the same.
: "${GOFLAGS:=-buildvcs=false -trimpath -tags=containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper}"
export GOFLAGS
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go
fi
# BUILD_GOGC is the GOGC of the compilers in the cold start's big builds (the tools' and go vet's,
# never a test's): measured on 2 cores, a cold build of berth-engine took 172.7 s wall and 247 s
# user with 400 against 187.6 s and 279 s with Go's default 100, for 8% more peak memory.
BUILD_GOGC=${BERTH_BUILD_GOGC:-400}

# Debian's docker client talks to Debian's dockerd (API 1.41) without a buildx plugin.
DOCKER=${DOCKER:-}
if [ -z "$DOCKER" ]; then
  if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
fi

# stop_process PID SECONDS WHAT: SIGTERM to PID (a child of this shell), up to SECONDS for it to
# end, then SIGKILL; logs "WHAT stopped".
stop_process() {
  local pid=$1 deadline=$((SECONDS + $2))
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  log "$3 stopped"
}

# remove_mounted_dir DIR: unmounts what is still mounted under DIR (deepest first), then removes it.
remove_mounted_dir() {
  { grep -o " $1/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$1"
}

# cached_build NAME VERSION sets cache (${BERTH_CACHE:-$HOME/.cache/berth}) and bin (the cached
# build NAME-VERSION in it) and takes NAME's build lock (fd 9, held until the script ends, so that
# concurrent callers wait for one build); when bin is already built it prints bin and ends the
# script.
cached_build() {
  cache=${BERTH_CACHE:-$HOME/.cache/berth}
  bin=$cache/$1-$2
  mkdir -p "$cache"
  exec 9>"$cache/$1.lock"
  flock 9
  if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
  fi
}

# module_workdir NAME MODULE@VERSION makes a writable copy of a module's source from the Go module
# proxy for a tool build (a fixture the tests run), in a temporary directory removed when the
# script ends, without its vendor tree, and makes it the current directory. The build itself runs
# outside any workspace, without cgo, as a fixture with its own go.mod (GOFLAGS -mod=mod).
module_workdir() {
  tmp=$(mktemp -d "/tmp/berth-$1.XXXXXX")
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  export GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=auto GOFLAGS="-buildvcs=false -mod=mod"
  local dir
  dir=$("$GO" mod download -json "$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || die "go mod download $2 gave no directory"
  cp -r "$dir" "$tmp/src"
  chmod -R u+w "$tmp/src"
  cd "$tmp/src" || die "cd $tmp/src"
  rm -rf vendor
}

log() { printf '%s [%s] %s\n' "$(date -u +%H:%M:%S)" "${LOG_TAG:-hack}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# module_has_go MOD: true when the module holds at least one .go file.
module_has_go() {
  [ -n "$(find "$ROOT/$1" -name '*.go' -not -path '*/testdata/*' -print -quit 2>/dev/null)" ]
}

# module_has_tests MOD: true when the module holds at least one _test.go file.
module_has_tests() {
  [ -n "$(find "$ROOT/$1" -name '*_test.go' -not -path '*/testdata/*' -print -quit 2>/dev/null)" ]
}

# port_in_use PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on (random in 20000-59999).
free_port() {
  local p i
  for i in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    if ! port_in_use "$p"; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found"
}

# pg_bin NAME: path of a PostgreSQL server program (PATH first, then /usr/lib/postgresql/*/bin).
pg_bin() {
  local b
  if b=$(command -v "$1" 2>/dev/null); then echo "$b"; return 0; fi
  for b in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$b/$1" ]; then echo "$b/$1"; return 0; fi
  done
  return 1
}

PG_DIR=""
# start_postgres: starts a throwaway PostgreSQL cluster on a free loopback port and exports
# BERTH_TEST_POSTGRES_URL. The server refuses to run as root, so it runs as user postgres.
start_postgres() {
  local initdb pg_ctl port try
  initdb=$(pg_bin initdb) || die "initdb not found (install the postgresql package: hack/deps.sh test)"
  pg_ctl=$(pg_bin pg_ctl) || die "pg_ctl not found"
  id postgres >/dev/null 2>&1 || die "user postgres does not exist (install the postgresql package)"
  PG_DIR=$(mktemp -d /tmp/berth-pg.XXXXXX)
  chmod 0755 "$PG_DIR"
  chown postgres:postgres "$PG_DIR"
  runuser -u postgres -- "$initdb" -D "$PG_DIR/data" -A trust -U postgres --no-sync >"$PG_DIR/initdb.log" 2>&1 ||
    { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
  for try in 1 2 3 4 5; do
    port=$(free_port)
    if runuser -u postgres -- "$pg_ctl" -D "$PG_DIR/data" -w -t 30 -l "$PG_DIR/server.log" \
      -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
      start >/dev/null 2>&1; then
      export BERTH_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      log "PostgreSQL on 127.0.0.1:$port (data $PG_DIR/data)"
      return 0
    fi
    log "PostgreSQL did not start on port $port (try $try)"
  done
  cat "$PG_DIR/server.log" >&2 || true
  die "PostgreSQL did not start"
}

# stop_postgres: stops the throwaway cluster and removes its files.
stop_postgres() {
  [ -n "$PG_DIR" ] || return 0
  local pg_ctl
  if pg_ctl=$(pg_bin pg_ctl) && [ -f "$PG_DIR/data/postmaster.pid" ]; then
    runuser -u postgres -- "$pg_ctl" -D "$PG_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PG_DIR"
  PG_DIR=""
  unset BERTH_TEST_POSTGRES_URL
}

DOCKERD_PID=""
DOCKERD_LOG=""
docker_answers() { timeout 10 "$DOCKER" info >/dev/null 2>&1; }

# start_dockerd: starts Debian's dockerd unless /var/run/docker.sock already answers.
start_dockerd() {
  if docker_answers; then
    log "dockerd already running"
    return 0
  fi
  command -v dockerd >/dev/null 2>&1 || die "dockerd not found (install docker.io: hack/deps.sh test)"
  DOCKERD_LOG=${LOGDIR:-/tmp}/berth-dockerd.log
  dockerd >"$DOCKERD_LOG" 2>&1 &
  DOCKERD_PID=$!
  local i
  for i in $(seq 1 60); do
    if docker_answers; then
      log "dockerd started (pid $DOCKERD_PID, log $DOCKERD_LOG)"
      return 0
    fi
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 1
  done
  tail -n 30 "$DOCKERD_LOG" >&2 || true
  die "dockerd did not start"
}

# stop_dockerd: stops dockerd if start_dockerd started it.
stop_dockerd() {
  [ -n "$DOCKERD_PID" ] || return 0
  stop_process "$DOCKERD_PID" 30 dockerd
  DOCKERD_PID=""
}
