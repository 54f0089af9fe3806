#!/usr/bin/env bash
# One entry point for a fresh machine (Debian 12, Python 3.11):
#
#   ./dev.sh demo    set everything up, then run the demo
#   ./dev.sh test    set everything up, then run every test (C++ and Python)
#   ./dev.sh setup   only set up (Debian packages, .venv, C++ build)
#   ./dev.sh fmt     format C++ (clang-format) and Python (ruff)
#
# Idempotent: a second run skips what is already installed or built.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

# Debian packages, each needed by the C++ build or the tests:
#   g++, pkgconf         compiler and pkg-config
#   libgtest-dev         C++ unit tests
#   nlohmann-json3-dev   JSON (Iceberg metadata, action bodies)
#   libssl-dev           HMAC-SHA256 for signed tickets (libcrypto)
#   libcpp-httplib-dev   the HTTP side port (/ready, /healthz, /metrics)
#   clang-format         formatting check
#   iperf3               loopback baseline for the wire benchmark
#   debootstrap, umoci   container image without Docker (deploy/image/build.sh)
#   iproute2             ip netns / veth / bridge for the image test (tests/test_image.py)
#   openssl              its TLS certificate
APT_PACKAGES=(g++ pkgconf libgtest-dev nlohmann-json3-dev libssl-dev libcpp-httplib-dev
              clang-format iperf3 debootstrap umoci iproute2 openssl)

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

install_debian_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

setup_venv() {
  if [ ! -x "$PY" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.requirements.sha"
  local want
  want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing Python dependencies"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r requirements-dev.txt
    echo "$want" >"$stamp"
  fi
}

build() {
  log "building icefloe (C++ and Python package)"
  # A persistent build dir (pyproject: build-dir) makes rebuilds incremental.
  mkdir -p build
  if ! "$PY" -m pip install --no-build-isolation --no-deps . >build/pip-install.log 2>&1; then
    tail -n 60 build/pip-install.log >&2
    echo "build failed; full log: build/pip-install.log" >&2
    exit 1
  fi
}

build_dir() { dirname "$(ls -d "$ROOT"/build/*/CTestTestfile.cmake | head -n 1)"; }

setup() {
  install_debian_packages
  setup_venv
  build
}

run_tests() {
  log "lint: clang-format, ruff"
  find cpp -name '*.h' -o -name '*.cc' | xargs clang-format --dry-run -Werror
  "$VENV/bin/ruff" check python tests benchmarks
  log "C++ unit tests (ctest)"
  ctest --test-dir "$(build_dir)" --output-on-failure -j2
  log "Python tests (pytest)"
  (cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider "$@")
}

cmd=${1:-}
shift || true
case "$cmd" in
  setup) setup ;;
  fmt) find cpp -name '*.h' -o -name '*.cc' | xargs clang-format -i; "$VENV/bin/ruff" format python tests benchmarks ;;
  demo) setup; log "demo"; "$PY" -m icefloe.demo "$@" ;;
  test) setup; run_tests "$@" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
