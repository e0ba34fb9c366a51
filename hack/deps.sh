#!/usr/bin/env bash
# Installs what Berth needs on a Debian 12 machine. Idempotent: only missing pieces are installed.
#   hack/deps.sh runtime   packages the engine needs to run containers
#   hack/deps.sh test      runtime + everything the test suite needs (podman, dockerd, registry,
#                          PostgreSQL, Prometheus, libpact_ffi)
set -euo pipefail
what=${1:-test}

runtime_pkgs=(runc conmon netavark aardvark-dns catatonit criu iptables containernetworking-plugins procps
  busybox-static uidmap git)
test_pkgs=(podman skopeo docker.io docker-registry prometheus postgresql wrk hyperfine jq sqlite3
  debootstrap curl ca-certificates gcc libc6-dev python3-yaml docker-compose systemd socat etcd-server
  qemu-system-x86 e2fsprogs)

pkgs=("${runtime_pkgs[@]}")
if [ "$what" = test ]; then
  pkgs+=("${test_pkgs[@]}")
  # `kubectl kustomize` checks deploy/kubernetes; any kubectl does, Debian's only where none is.
  command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
  # npm comes with the machine's Node.js where there is one; Debian's npm only where none is.
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$what" = test ]; then
  # pact-go v2.4.2 links libpact_ffi 0.4.x; the npm package below ships a compatible build.
  # A libpact_ffi without the symbols pact-go links (FFI 0.5 from pact-core 19+) is replaced.
  if [ ! -e /usr/local/lib/libpact_ffi.so ] ||
    ! nm -D --defined-only /usr/local/lib/libpact_ffi.so 2>/dev/null | grep -q ' pactffi_create_mock_server$'; then
    echo "deps: installing libpact_ffi from @pact-foundation/pact-core-linux-x64-glibc@18.1.0"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @pact-foundation/pact-core-linux-x64-glibc@18.1.0 >/dev/null && tar xzf ./*.tgz)
    $sudo install -m 0755 "$tmp/package/prebuilds/linux-x64/libpact_ffi.so" /usr/local/lib/libpact_ffi.so
    $sudo ldconfig
    rm -rf "$tmp"
  fi
fi
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] ||
  { echo "deps: Go is not installed (expected in PATH or /usr/local/go)" >&2; exit 1; }
echo "deps: ok ($what)"
