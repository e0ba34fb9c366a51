#!/usr/bin/env bash
# Runs berth-engine and berth-uploads in the foreground (the `make run` target).
# Usage: hack/run.sh BIN STATE ENGINE_LISTEN UPLOADS_LISTEN
#   BIN      directory holding berth-engine and berth-uploads (make build)
#   STATE    state directory: STATE/engine/{root,run}, STATE/uploads, STATE/logs
#   *_LISTEN tcp://HOST:PORT or unix:///PATH
# Ctrl-C (SIGINT) or SIGTERM is forwarded to both services; the script waits until both exited
# and fails if either exited with an error.
set -uo pipefail
LOG_TAG=run
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -eq 4 ] || { echo "usage: $0 BIN STATE ENGINE_LISTEN UPLOADS_LISTEN" >&2; exit 2; }
bin=$1 state=$2 engine_listen=$3 uploads_listen=$4
for b in berth-engine berth-uploads; do
  [ -x "$bin/$b" ] || die "$bin/$b not found: run make build"
done
mkdir -p "$state/engine/root" "$state/engine/run" "$state/uploads"
state=$(cd "$state" && pwd)

# http_url LISTEN: the URL a client uses for a listen address (0.0.0.0 and [::] become loopback).
http_url() {
  case $1 in
  tcp://0.0.0.0:*) echo "http://127.0.0.1:${1##*:}" ;;
  tcp://\[::\]:*) echo "http://[::1]:${1##*:}" ;;
  tcp://*) echo "http://${1#tcp://}" ;;
  *) echo "$1" ;;
  esac
}

# probe URL PATH: true when GET PATH answers 2xx (tcp:// and unix:// listeners).
probe() {
  case $1 in
  unix://*) curl -fsS -o /dev/null --max-time 2 --unix-socket "${1#unix://}" "http://localhost$2" 2>/dev/null ;;
  *) curl -fsS -o /dev/null --max-time 2 "$1$2" 2>/dev/null ;;
  esac
}

engine_url=$(http_url "$engine_listen")
uploads_url=$(http_url "$uploads_listen")
engine_pid="" uploads_pid=""

stop_all() {
  local sig=${1:-TERM}
  for p in $uploads_pid $engine_pid; do
    kill -"$sig" "$p" 2>/dev/null || true
  done
}
trap 'log "stopping..."; stop_all TERM' INT TERM

# Both stay in this script's process group, so a terminal's Ctrl-C reaches them directly; the
# trap above forwards a SIGTERM sent to this script alone.
"$bin/berth-engine" --listen "$engine_listen" --root "$state/engine/root" --runroot "$state/engine/run" &
engine_pid=$!
for i in $(seq 1 100); do
  probe "$engine_url" /healthz && break
  kill -0 "$engine_pid" 2>/dev/null || { wait "$engine_pid"; die "berth-engine exited (status $?)"; }
  sleep 0.1
done
probe "$engine_url" /healthz || { stop_all TERM; wait; die "berth-engine did not answer /healthz within 10s"; }

"$bin/berth-uploads" --listen "$uploads_listen" --data-dir "$state/uploads" --engine-url "$engine_url" &
uploads_pid=$!
for i in $(seq 1 100); do
  probe "$uploads_url" /healthz && break
  kill -0 "$uploads_pid" 2>/dev/null || break
  sleep 0.1
done
if ! probe "$uploads_url" /healthz; then
  log "berth-uploads did not come up"
  stop_all TERM
  wait
  exit 1
fi

# metrics_hint URL: how to fetch /metrics from a listener.
metrics_hint() {
  case $1 in
  unix://*) echo "curl --unix-socket ${1#unix://} http://localhost/metrics" ;;
  *) echo "$1/metrics" ;;
  esac
}

cat <<EOF

  berth-engine   $engine_url   (podman --remote --url ${engine_listen/0.0.0.0/127.0.0.1} info)
  berth-uploads  $uploads_url/v1/uploads
  metrics        $(metrics_hint "$engine_url")
                 $(metrics_hint "$uploads_url")
  state          $state
  Ctrl-C stops both.

EOF

# Wait until either exits (or a signal arrives), then stop the other and collect both.
status=0
wait -n "$engine_pid" "$uploads_pid"
first=$?
stop_all TERM
for p in $uploads_pid $engine_pid; do
  for i in $(seq 1 300); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$p" 2>/dev/null; then
    log "pid $p did not exit within 30s, killing it"
    kill -KILL "$p" 2>/dev/null || true
    status=1
  fi
done
wait "$engine_pid"
engine_rc=$?
wait "$uploads_pid"
uploads_rc=$?
log "berth-engine exited with $engine_rc, berth-uploads with $uploads_rc"
# 130/143: the exit a Ctrl-C or SIGTERM itself causes is a clean stop.
for rc in $engine_rc $uploads_rc $first; do
  case $rc in 0 | 130 | 143) ;; *) status=1 ;; esac
done
exit $status
