#!/usr/bin/env bash
# Prints the path of a CRIU that works on this machine (`criu check` passes), building one when the
# machine's own does not.
#   hack/criu.sh            the machine's criu when `criu check` passes; else the cached build
#                           (built first when missing); prints its path on the last line
# Debian 12's CRIU 3.17 cannot start on newer kernels ("Failed to fill self vdso symtable"); CRIU
# 4.1.1 works. It is built from Debian 13 (trixie)'s source package, fetched through a temporary
# apt configuration whose deb-src URI is the machine's own Debian mirror, read at run time from its
# apt sources; build dependencies come from the machine's own release. The binary is cached in
# ${BERTH_CACHE:-$HOME/.cache/berth}/criu-4.1.1-berthN/criu (about a minute to build on 2 cores) and
# reused when it passes `criu check`. Concurrent callers wait for one build (flock).
# Environment: BERTH_CACHE; BERTH_CRIU_BUILD=1 builds even where the machine's criu works.
set -euo pipefail
LOG_TAG=criu
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

version=4.1.1
# patch: the revision of the engine's own fixes to CRIU's source (below); a new one rebuilds.
patch=1
cache=${BERTH_CACHE:-$HOME/.cache/berth}
dir=$cache/criu-$version-berth$patch
bin=$dir/criu

works() { "$1" check >/dev/null 2>&1; }

# keep_kdat BIN has CRIU keep its probe of the kernel's features where /run is no tmpfs. CRIU probes
# the kernel (running iptables among others) at the start of every dump and restore, 70-120 ms each
# on these machines, unless it finds the result in /run/criu.kdat; it writes that file only to a
# tmpfs, so that it cannot outlive a reboot into another kernel, and these machines' /run is none.
# Here CRIU writes it into a tmpfs of its own (a private mount namespace) and it is moved into
# /run: made by this binary on this kernel at every call of this script, which the tests and
# benchmarks run before they use CRIU. Hosts with a tmpfs /run (the host lab's) need nothing.
keep_kdat() {
  [ "$(id -u)" = 0 ] || return 0
  [ "$(stat -f -c %T /run 2>/dev/null)" != tmpfs ] || return 0
  command -v unshare >/dev/null 2>&1 || return 0
  local kdat
  kdat=$(mktemp /run/.criu.kdat.XXXXXX 2>/dev/null) || return 0
  # shellcheck disable=SC2016 # $1 is the inner shell's
  if unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run && "$1" check >/dev/null 2>&1 &&
    cat /run/criu.kdat' sh "$1" >"$kdat" 2>/dev/null && [ -s "$kdat" ]; then
    mv -f "$kdat" /run/criu.kdat
  else
    rm -f "$kdat"
  fi
}

if [ "${BERTH_CRIU_BUILD:-0}" != 1 ] && own=$(command -v criu 2>/dev/null) && works "$own"; then
  keep_kdat "$own"
  echo "$own"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/criu.lock"
flock 9
if [ -x "$bin" ] && works "$bin"; then
  keep_kdat "$bin"
  echo "$bin"
  exit 0
fi

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
build_deps=(gcc make pkgconf xz-utils libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev protobuf-compiler
  libnl-3-dev libnet1-dev libcap-dev libbsd-dev libgnutls28-dev libnftables-dev python3-protobuf uuid-dev
  libdrm-dev)
missing=()
for p in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing CRIU's build dependencies: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# mirror: the first Debian archive URI of the machine's apt sources (deb822 or one-line format),
# never the security archive.
mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk 'tolower($1) == "uris:" {for (i = 2; i <= NF; i++) print $i}' "$f" | grep -v -- '-security' | head -n 1)
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f" |
      grep -v -- '-security' | head -n 1)
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  return 1
}
uri=$(mirror) || die "no Debian archive URI found in the machine's apt sources"

tmp=$(mktemp -d /tmp/berth-criu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/src"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'deb-src [signed-by=%s] %s trixie main\n' "$keyring" "$uri" >"$tmp/sources.list"
aptopts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
log "fetching criu $version's source package (trixie) from $uri"
apt-get "${aptopts[@]}" update -qq
(cd "$tmp/src" && apt-get "${aptopts[@]}" source --download-only "criu=$version*" >/dev/null 2>&1) ||
  (cd "$tmp/src" && apt-get "${aptopts[@]}" source --download-only criu >/dev/null 2>&1) || true
orig=$(ls "$tmp"/src/criu_"$version".orig.tar.* 2>/dev/null | head -n 1)
[ -n "$orig" ] || die "criu_$version.orig.tar.* was not fetched (trixie's criu is $(cd "$tmp/src" && ls))"
tar -C "$tmp/src" -xf "$orig"
src=$(find "$tmp/src" -mindepth 1 -maxdepth 1 -type d -name 'criu*' | head -n 1)
[ -n "$src" ] || die "no source tree in $orig"
# The fix: CRIU (up to 4.1.1 and beyond) crashes (SIGSEGV) when a configuration file given over
# its RPC interface, runc's way, names network-lock at all: parse_options reads the command after
# the options from argv, which is NULL there. The engine skips CRIU's network lock for dumps
# without --tcp-established (docs/engine/checkpoint.md) through that file, after asking CRIU
# whether it can (runtime.SkipsNetworkLock), so an unfixed CRIU is only slower, never broken.
sed -i 's/if (has_network_lock_opt && !strcmp(argv\[optind\], "restore"))/if (has_network_lock_opt \&\& optind < argc \&\& !strcmp(argv[optind], "restore"))/' \
  "$src/criu/config.c"
grep -qF 'if (has_network_lock_opt && optind < argc && !strcmp(argv[optind], "restore"))' "$src/criu/config.c" ||
  die "criu/config.c: the network-lock fix does not apply"
log "building criu $version in $src"
make -C "$src" -j"$(nproc)" criu >"$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log" >&2; die "criu build failed"; }
mkdir -p "$dir"
install -m 0755 "$src/criu/criu" "$bin.tmp"
mv "$bin.tmp" "$bin"
if ! out=$("$bin" check 2>&1); then
  printf '%s\n' "$out" >&2
  die "the built criu fails 'criu check'"
fi
log "built $bin"
keep_kdat "$bin"
echo "$bin"
