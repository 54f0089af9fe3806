#!/usr/bin/env bash
# Builds icefloe's container image as an OCI image layout, without a Docker
# engine:
#
#   layer 1  Debian 12 minbase (debootstrap) + the runtime packages the binaries
#            need (found with ldd + dpkg -S) + ca-certificates + user icefloe
#            (uid/gid 1000), trimmed; cached as <out>/rootfs-base.tar
#   layer 2  /usr/local/bin/icefloe-head, icefloe-node (stripped), the `head`
#            and `worker` symlinks Kubeflow runs, and the Arrow libraries of the
#            pyarrow wheel they load in /usr/local/lib/icefloe (their RPATH)
#
# assembled and configured with umoci (user 1000:1000, ports 50051 and 8080,
# no ENTRYPOINT: Kubeflow sets `command: [head]`). deploy/image/Dockerfile
# makes the same image with a Docker engine.
#
# Usage: deploy/image/build.sh [--bin-dir DIR] [--out DIR] [--tag TAG]
#   --bin-dir DIR  take icefloe-head and icefloe-node from DIR, e.g. an installed
#                  icefloe-server wheel's site-packages/icefloe_server/bin, whose
#                  Arrow libraries (../lib) and their licenses (../licenses) go in
#                  too (default: build them with CMake in <out>/cmake,
#                  -j${ICEFLOE_JOBS:-2}, and take Arrow from $PYTHON's pyarrow)
#   --out DIR      output directory (default: build/image)
#   --tag TAG      image tag (default: the version in pyproject.toml)
#   --no-cache     rebuild the Debian base (e.g. for new security updates) and the image
# Environment:
#   PYTHON                  interpreter with pyarrow==26.0.1 (default .venv/bin/python),
#                           for a CMake build or binaries without Arrow beside them
#   DEBIAN_MIRROR           Debian mirror (default: the one this machine's apt uses)
#   DEBIAN_SECURITY_MIRROR  security mirror (default: likewise; "none" to skip)
#
# Output: <out>/icefloe, an OCI layout holding the tag (reference
# <out>/icefloe:<tag>). Push it with e.g.
#   skopeo copy oci:build/image/icefloe:0.1.0 docker://ghcr.io/icefloe/icefloe:0.1.0
# A second run with unchanged inputs (binaries, libraries, packages, this
# script) reuses the image; changed binaries reuse the cached Debian layer
# (<out>/rootfs-base.tar; --no-cache refreshes it).
# Needs root (debootstrap, chroot), debootstrap and umoci.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT="$ROOT/deploy/image/build.sh"
SUITE=bookworm
OUT="$ROOT/build/image"
BIN_DIR=""
TAG=""
NO_CACHE=0
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
# Bump when the base layer's recipe changes (invalidates rootfs-base.tar).
BASE_RECIPE=2

while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$(cd "$2" && pwd); shift 2 ;;
    --out) mkdir -p "$2"; OUT=$(cd "$2" && pwd); shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --no-cache) NO_CACHE=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "build.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap and chroot)"
for tool in debootstrap umoci chroot unshare flock strip readelf ldd dpkg sha256sum tar; do
  command -v "$tool" >/dev/null || die "'$tool' is missing (./dev.sh setup installs it)"
done
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
[ -n "$TAG" ] || TAG=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)
mkdir -p "$OUT"
# One build at a time per output directory.
exec 9>"$OUT/.lock"
flock 9
WORK="$OUT/work"
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

# --- The binaries ------------------------------------------------------------
if [ -z "$BIN_DIR" ]; then
  log "building icefloe-head and icefloe-node (CMake, -j${ICEFLOE_JOBS:-2})"
  CMAKE=cmake
  [ -x "$ROOT/.venv/bin/cmake" ] && CMAKE="$ROOT/.venv/bin/cmake"
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  [ -f "$OUT/cmake/CMakeCache.txt" ] && GEN=()
  "$CMAKE" -S "$ROOT" -B "$OUT/cmake" "${GEN[@]}" -DPython_EXECUTABLE="$PYTHON" \
    -DICEFLOE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/cmake.log"
  "$CMAKE" --build "$OUT/cmake" -j "${ICEFLOE_JOBS:-2}" --target icefloe-head icefloe-node \
    >>"$OUT/cmake.log" || { tail -n 40 "$OUT/cmake.log" >&2; die "build failed"; }
  # Installing applies the install RPATH ($ORIGIN/../lib/icefloe, no build paths).
  "$CMAKE" --install "$OUT/cmake" --prefix "$WORK/install" >>"$OUT/cmake.log"
  BIN_DIR="$WORK/install/bin"
fi
for b in icefloe-head icefloe-node; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b is missing"
  dynamic=$(readelf -d "$BIN_DIR/$b")
  grep -q 'PATH.*\$ORIGIN/\.\./lib/icefloe' <<<"$dynamic" ||
    die "$BIN_DIR/$b has no RUNPATH \$ORIGIN/../lib/icefloe (a build-tree binary? cmake --install it)"
done
# The Arrow the binaries were built with: bundled beside them (the icefloe-server
# wheel) or the build's pyarrow.
if compgen -G "$BIN_DIR/../lib/libarrow.so.*" >/dev/null; then
  ARROW_DIR=$(realpath "$BIN_DIR/../lib")
  ARROW_LICENSES=("$BIN_DIR"/../licenses/arrow-*)
else
  ARROW_DIR=$("$PYTHON" -c 'import pyarrow; print(pyarrow.get_library_dirs()[0])') ||
    die "$PYTHON cannot import pyarrow"
  ARROW_DIR=$(realpath "$ARROW_DIR")
  ARROW_LICENSES=("$ARROW_DIR"/../pyarrow-*.dist-info/licenses/*)
fi

# Shared libraries: Arrow's from the wheel go into the image as files, every
# other one is satisfied by the Debian package that owns it on this machine.
ARROW_LIBS=()
PACKAGES=(ca-certificates)
owner_package() {  # usrmerge: dpkg may know /lib/x or /usr/lib/x
  local lib=$1 p out
  for p in "$lib" "$(realpath "$lib")" "/usr${lib#/usr}" "${lib#/usr}"; do
    out=$(dpkg -S "$p" 2>/dev/null) && { echo "${out%%:*}"; return 0; }
  done
  return 1
}
while read -r name path; do
  [ "$path" = "not" ] && die "$name is not found (ldd); is the package installed here?"
  if [ "$(dirname "$(realpath "$path")")" = "$ARROW_DIR" ]; then
    ARROW_LIBS+=("$name")
  else
    pkg=$(owner_package "$path") || die "no Debian package owns $path"
    PACKAGES+=("$pkg")
  fi
done < <(LD_LIBRARY_PATH="$ARROW_DIR" ldd "$BIN_DIR/icefloe-head" "$BIN_DIR/icefloe-node" |
  awk '$2 == "=>" && $3 != "" { print $1, $3 }' | sort -u)
mapfile -t ARROW_LIBS < <(printf '%s\n' "${ARROW_LIBS[@]}" | sort -u)
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | sort -u)

# --- Layer 1: Debian base (cached) --------------------------------------------
# The mirrors this machine's apt uses (deb822 .sources or one-line .list).
apt_uris() {
  { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }'
  } | grep -v '^$'
}
MIRROR=${DEBIAN_MIRROR:-$(apt_uris | grep -E '/debian/?$' | head -n 1 || true)}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-$(apt_uris | grep -E '/debian-security/?$' | head -n 1 || true)}
[ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt; set DEBIAN_MIRROR"
[ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR=none

BASE_TAR="$OUT/rootfs-base.tar"
base_key=$(printf '%s\n' "$BASE_RECIPE" "$SUITE" "$MIRROR" "$SECURITY_MIRROR" "$(dpkg --print-architecture)" \
  "${PACKAGES[@]}" | sha256sum | cut -c1-16)
if [ "$NO_CACHE" = 0 ] && [ -f "$BASE_TAR" ] && [ "$(cat "$BASE_TAR.key" 2>/dev/null)" = "$base_key" ]; then
  log "Debian base: cached $BASE_TAR"
else
  log "Debian base: debootstrap --variant=minbase $SUITE from $MIRROR + ${PACKAGES[*]}"
  base="$WORK/base"
  include=$(IFS=,; echo "${PACKAGES[*]}")
  # In a private mount namespace: whatever it mounts in the target (/proc, /sys,
  # /dev binds) goes away with it, even when it fails.
  unshare --mount --propagation private \
    debootstrap --variant=minbase --include="$include" "$SUITE" "$base" "$MIRROR" \
    >"$OUT/debootstrap.log" 2>&1 || { tail -n 30 "$OUT/debootstrap.log" >&2; die "debootstrap failed"; }
  {
    echo "Types: deb"
    echo "URIs: $MIRROR"
    echo "Suites: $SUITE $SUITE-updates"
    echo "Components: main"
    echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    if [ "$SECURITY_MIRROR" != none ]; then
      echo
      echo "Types: deb"
      echo "URIs: $SECURITY_MIRROR"
      echo "Suites: $SUITE-security"
      echo "Components: main"
      echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    fi
  } >"$base/etc/apt/sources.list.d/debian.sources"
  rm -f "$base/etc/apt/sources.list"
  # Security and point-release updates; /proc only in a private mount namespace.
  cp /etc/resolv.conf "$base/etc/resolv.conf"
  unshare --mount --propagation private sh -c '
    mount -t proc proc "$1/proc" &&
    chroot "$1" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get -y -qq -o Dpkg::Options::=--force-confold upgrade && apt-get clean"' sh "$base" \
    >>"$OUT/debootstrap.log" 2>&1 || { tail -n 30 "$OUT/debootstrap.log" >&2; die "apt-get upgrade failed"; }
  chroot "$base" groupadd --gid 1000 icefloe
  chroot "$base" useradd --uid 1000 --gid 1000 --home-dir /home/icefloe --create-home \
    --shell /usr/sbin/nologin icefloe
  # Like debian:bookworm-slim: no docs (but copyrights), man pages or locales,
  # now or from packages installed later in derived images.
  cat >"$base/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  find "$base/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$base/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$base/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$base"/usr/share/{man,info,lintian,linda}/* "$base"/var/lib/apt/lists/* \
    "$base"/var/cache/apt/* "$base"/var/cache/debconf/*-old "$base"/var/lib/dpkg/*-old \
    "$base"/tmp/* "$base"/var/tmp/* "$base"/dev/* "$base"/run/* "$base"/etc/*-
  find "$base/var/log" -type f -delete
  # Filled in by the container runtime.
  : >"$base/etc/resolv.conf"
  : >"$base/etc/hostname"
  chmod 644 "$base/etc/resolv.conf" "$base/etc/hostname"
  tar --numeric-owner --xattrs -C "$base" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  echo "$base_key" >"$BASE_TAR.key"
  rm -rf "$base"
fi

# --- Layer 2: icefloe ------------------------------------------------------------
app="$WORK/app"
install -d -m 755 "$app/usr/local/bin" "$app/usr/local/lib/icefloe" \
  "$app/usr/local/share/doc/icefloe"
for b in icefloe-head icefloe-node; do
  install -m 755 "$BIN_DIR/$b" "$app/usr/local/bin/$b"
  strip --strip-unneeded "$app/usr/local/bin/$b"
done
ln -s icefloe-head "$app/usr/local/bin/head"
ln -s icefloe-node "$app/usr/local/bin/worker"
for lib in "${ARROW_LIBS[@]}"; do
  install -m 644 "$ARROW_DIR/$lib" "$app/usr/local/lib/icefloe/$lib"
  strip --strip-unneeded "$app/usr/local/lib/icefloe/$lib"
done
for f in "${ARROW_LICENSES[@]}"; do
  name=$(basename "$f")
  [ -f "$f" ] && install -m 644 "$f" "$app/usr/local/share/doc/icefloe/arrow-${name#arrow-}"
done

image_inputs() {
  (cd "$app" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  (cd "$app" && find . -type l -printf '%p -> %l\n' | sort)
  echo "$TAG $base_key"
  sha256sum <"$SCRIPT"
}
key=$(image_inputs | sha256sum | cut -c1-16)
IMAGE="$OUT/icefloe"
if [ "$NO_CACHE" = 0 ] && [ -f "$IMAGE/index.json" ] &&
  [ "$(cat "$OUT/icefloe.key" 2>/dev/null)" = "$key" ]; then
  log "image up to date: $IMAGE:$TAG (inputs $key)"
else
  # The assembled root filesystem must run the binaries as uid 1000.
  log "checking the binaries in the image's root filesystem"
  rootfs="$WORK/rootfs"
  mkdir -p "$rootfs"
  tar --numeric-owner -xpf "$BASE_TAR" -C "$rootfs"
  cp -a "$app/." "$rootfs/"
  # With /proc, as in any container: the loader resolves $ORIGIN through it.
  unshare --mount --propagation private sh -euc '
    mount -t proc proc "$1/proc"
    if chroot "$1" ldd /usr/local/bin/icefloe-head /usr/local/bin/icefloe-node | grep "not found"; then
      exit 1
    fi
    for b in head worker icefloe-head icefloe-node; do
      chroot --userspec=1000:1000 "$1" "/usr/local/bin/$b" --help >/dev/null
    done' sh "$rootfs" || die "the binaries do not run in the image (see above)"
  rm -rf "$rootfs"

  log "assembling $IMAGE:$TAG with umoci"
  tmp="$OUT/icefloe.tmp"
  rm -rf "$tmp"
  umoci init --layout "$tmp"
  umoci new --image "$tmp:$TAG"
  # Layers are diffs of a bundle's rootfs (unpack, change, repack).
  bundle="$WORK/bundle"
  umoci unpack --image "$tmp:$TAG" "$bundle"
  tar --numeric-owner --xattrs -xpf "$BASE_TAR" -C "$bundle/rootfs"
  umoci repack --image "$tmp:$TAG" --refresh-bundle --history.created_by \
    "debootstrap --variant=minbase $SUITE; apt-get install ${PACKAGES[*]}; useradd icefloe (1000)" \
    "$bundle"
  cp -a "$app/." "$bundle/rootfs/"
  umoci repack --image "$tmp:$TAG" --history.created_by \
    "icefloe-head, icefloe-node, head, worker; Arrow ${ARROW_LIBS[*]}" "$bundle"
  umoci config --image "$tmp:$TAG" --history.created_by "icefloe image configuration" \
    --os linux --architecture "$(dpkg --print-architecture)" --author "icefloe" \
    --config.user 1000:1000 --config.workingdir /home/icefloe \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.exposedports 50051/tcp --config.exposedports 8080/tcp \
    --config.stopsignal SIGTERM --config.cmd icefloe-head --config.cmd --help \
    --config.label org.opencontainers.image.title=icefloe \
    --config.label org.opencontainers.image.version="$TAG" \
    --config.label org.opencontainers.image.licenses=Apache-2.0 \
    --config.label org.opencontainers.image.description="icefloe head and data node (Kubeflow: head, worker)" \
    --manifest.annotation org.opencontainers.image.version="$TAG"
  umoci gc --layout "$tmp"
  rm -rf "$IMAGE"
  mv "$tmp" "$IMAGE"
  echo "$key" >"$OUT/icefloe.key"
fi

# --- Size ----------------------------------------------------------------------
# Compressed: the layer blobs; unpacked: the files in them (computed once per image).
"$PYTHON" - "$IMAGE" "$TAG" "$OUT/icefloe.json" <<'EOF'
import json, sys, tarfile
from pathlib import Path

layout, tag, info_path = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
blob = lambda d: layout / "blobs" / d["digest"].replace(":", "/")
index = json.loads((layout / "index.json").read_text())
desc = next(m for m in index["manifests"]
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
info = json.loads(info_path.read_text()) if info_path.exists() else {}
if info.get("manifest") != desc["digest"]:
    layers = json.loads(blob(desc).read_bytes())["layers"]
    unpacked = []
    for layer in layers:
        with tarfile.open(blob(layer), "r:*") as tar:
            unpacked.append(sum(m.size for m in tar if m.isreg()))
    info = {"image": f"{layout}:{tag}", "manifest": desc["digest"],
            "layers_compressed_bytes": [layer["size"] for layer in layers],
            "layers_unpacked_bytes": unpacked,
            "compressed_bytes": sum(layer["size"] for layer in layers),
            "unpacked_bytes": sum(unpacked)}
    info_path.write_text(json.dumps(info, indent=2) + "\n")
mib = lambda n: f"{n / 2**20:.1f} MiB"
print(f"image {info['image']}  manifest {info['manifest'][:19]}")
rows = zip(["debian base", "icefloe"], info["layers_compressed_bytes"],
           info["layers_unpacked_bytes"])
for name, size, unpacked in rows:
    print(f"  layer {name:12s} {mib(size):>10s} compressed  {mib(unpacked):>10s} unpacked")
print(f"  total              {mib(info['compressed_bytes']):>10s} compressed  "
      f"{mib(info['unpacked_bytes']):>10s} unpacked")
EOF
