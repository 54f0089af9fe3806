#!/usr/bin/env bash
# One entry point for a fresh machine (Debian 12, Python 3.11):
#
#   ./dev.sh demo    set everything up, then run the demo
#   ./dev.sh test    set everything up, then run every test (C++ and Python)
#   ./dev.sh setup   only set up (Debian packages, .venv, C++ build)
#   ./dev.sh fmt     format C++ (clang-format) and Python (ruff)
#   ./dev.sh fuzz [S]  build the libFuzzer targets (clang) and run each for S seconds (60)
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
#   clang                the ThreadSanitizer build, which also checks the thread-safety
#                        annotations (-Wthread-safety); the libFuzzer targets (ICEFLOE_FUZZ)
#   libclang-rt-14-dev   clang's sanitizer and libFuzzer runtimes
#   iperf3               loopback baseline for the wire benchmark
#   debootstrap, umoci   container image without Docker (deploy/image/build.sh)
#   iproute2             ip netns / veth / bridge for the image test (tests/test_image.py)
#   openssl              its TLS certificate
#   prometheus-cpp-dev   /metrics: the servers' Prometheus registry and text format
#   libsentencepiece-dev tokenize transforms on the data nodes (SentencePiece C++)
#   libutf8proc-dev      tokenizer.json transforms: Unicode categories and normalization
#   libonig-dev          tokenizer.json transforms: the files' regexes (Oniguruma, as `tokenizers`)
#   chromium             the status page test renders the page headless (tests/test_status_page.py)
APT_PACKAGES=(g++ pkgconf libgtest-dev nlohmann-json3-dev libssl-dev libcpp-httplib-dev
              clang-format clang libclang-rt-14-dev iperf3 debootstrap umoci iproute2 openssl
              prometheus-cpp-dev libsentencepiece-dev libutf8proc-dev libonig-dev chromium)

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

# The two wheels, built from one CMake tree (a persistent build dir, shared by
# both pyproject files, makes rebuilds incremental): icefloe, the client (Python
# and its Arrow-free native library), and icefloe-server, the executables with
# the Arrow libraries they link. Kept in build/wheels for tests that install
# them elsewhere (tests/test_client_venv.py), then installed into .venv.
build() {
  log "building icefloe and icefloe-server (C++ and Python packages)"
  mkdir -p build
  rm -rf build/wheels
  if ! { "$PY" -m pip wheel --no-build-isolation --no-deps -w build/wheels . ./server &&
         "$PY" -m pip install --no-deps --force-reinstall build/wheels/*.whl; } \
       >build/pip-install.log 2>&1; then
    tail -n 60 build/pip-install.log >&2
    echo "build failed; full log: build/pip-install.log" >&2
    exit 1
  fi
}

build_dir() { dirname "$(ls -d "$ROOT"/build/py3-*/CTestTestfile.cmake | head -n 1)"; }

# The threaded unit tests (marked TSAN in CMake) under ThreadSanitizer, built
# with clang so the thread-safety annotations are checked as errors too. Its
# own build dir, incremental; only what those tests need is compiled.
tsan_tests() {
  log "ThreadSanitizer build and clang thread-safety analysis (build/tsan)"
  local dir="$ROOT/build/tsan"
  if [ ! -f "$dir/build.ninja" ]; then
    "$VENV/bin/cmake" -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DICEFLOE_TSAN=ON \
      -DICEFLOE_BUILD_BENCHMARKS=OFF -DPython_EXECUTABLE="$PY" >"$ROOT/build/tsan-configure.log" 2>&1 ||
      { tail -n 40 "$ROOT/build/tsan-configure.log" >&2; exit 1; }
  fi
  "$VENV/bin/cmake" --build "$dir" --target icefloe_tsan
  # Arrow's default pool is the wheel's bundled mimalloc, which ThreadSanitizer
  # does not instrument: its per-thread heaps, reused across threads, read as
  # races in any test whose threads allocate. The system pool (malloc) is
  # instrumented, so reports are about our code.
  ARROW_DEFAULT_MEMORY_POOL=system \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/cpp/tsan.supp" \
    "$VENV/bin/ctest" --test-dir "$dir" --output-on-failure -j2
}

setup() {
  install_debian_packages
  setup_venv
  build
}

run_tests() {
  log "lint: clang-format, ruff"
  find cpp -name '*.h' -o -name '*.cc' | xargs clang-format --dry-run -Werror
  "$VENV/bin/ruff" check python server tests benchmarks
  log "C++ unit tests (ctest)"
  "$VENV/bin/ctest" --test-dir "$(build_dir)" --output-on-failure -j2
  tsan_tests
  log "Python tests (pytest)"
  (cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider "$@")
}

# libFuzzer targets (protocol_fuzz: every message parser; transform_fuzz: the
# transforms' value expressions; avro_fuzz: the Avro reader; assemble_fuzz:
# the client's assembly of pieces; merge_fuzz: its merge of streams), each seeded with its corpus and run for
# $1 seconds.
fuzz() {
  local seconds=${1:-60} dir="$ROOT/build/fuzz"
  if [ ! -f "$dir/build.ninja" ]; then
    "$VENV/bin/cmake" -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" \
      -DCMAKE_CXX_COMPILER=clang++ -DICEFLOE_FUZZ=ON -DICEFLOE_BUILD_TESTS=OFF \
      -DICEFLOE_BUILD_BENCHMARKS=OFF -DPython_EXECUTABLE="$PY" >/dev/null
  fi
  "$VENV/bin/cmake" --build "$dir" --target protocol_fuzz avro_fuzz transform_fuzz assemble_fuzz \
    merge_fuzz
  mkdir -p "$dir/corpus/protocol" "$dir/corpus/avro" "$dir/corpus/transform" "$dir/corpus/assemble" \
    "$dir/corpus/merge"
  log "protocol_fuzz for ${seconds}s"
  "$dir/cpp/icefloe/protocol/protocol_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    "$dir/corpus/protocol" cpp/icefloe/protocol/testdata/corpus
  log "transform_fuzz for ${seconds}s"
  "$dir/cpp/icefloe/transform/transform_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    "$dir/corpus/transform" cpp/icefloe/transform/testdata/corpus
  log "avro_fuzz for ${seconds}s"
  "$dir/cpp/icefloe/iceberg/avro_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    "$dir/corpus/avro" cpp/icefloe/iceberg/testdata/avro
  log "assemble_fuzz for ${seconds}s"
  "$dir/cpp/icefloe/client/assemble_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    "$dir/corpus/assemble"
  log "merge_fuzz for ${seconds}s"
  "$dir/cpp/icefloe/client/merge_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    "$dir/corpus/merge"
}

cmd=${1:-}
shift || true
case "$cmd" in
  setup) setup ;;
  fmt) find cpp -name '*.h' -o -name '*.cc' | xargs clang-format -i; "$VENV/bin/ruff" format python server tests benchmarks ;;
  demo) setup; log "demo"; "$PY" -m icefloe_demo "$@" ;;
  test) setup; run_tests "$@" ;;
  fuzz) setup; fuzz "$@" ;;
  *) sed -n '2,11p' "$0"; exit 2 ;;
esac
