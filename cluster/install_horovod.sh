#!/usr/bin/env bash
# Install Horovod 0.28.1 (PyTorch + Gloo, no MPI/TensorFlow/MXNet) into the active Python
# environment (whatever `python` is: the system one or an activated venv).
#
# Horovod 0.28.1 is the last release and ships only as an sdist. It does not build as-is
# against torch 2.13: CMAKE_CXX_STANDARD 14 is pinned in its top-level CMakeLists.txt and in
# horovod/torch/CMakeLists.txt (torch's headers need C++17), and CXXFLAGS cannot override it.
# This script patches both to 17, builds a wheel once (a few minutes on 2 cores) and keeps it
# in a cache, so later installs (other venvs, CI) take seconds.
#
# Environment:
#   PYTHON               interpreter to install into (default: python)
#   RAYPIPE_WHEEL_CACHE  wheel cache directory (default: $HOME/.cache/raypipe/wheels)
#   HOROVOD_BUILD_JOBS   parallel compile jobs (default: number of cores, at most 4)
#
# Usage: bash cluster/install_horovod.sh
set -euo pipefail

HOROVOD_VERSION=0.28.1
TORCH_VERSION=2.13.0
PYTHON=${PYTHON:-python}
CACHE_DIR=${RAYPIPE_WHEEL_CACHE:-$HOME/.cache/raypipe/wheels}

log() { echo "[install_horovod] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
pip_() { "$PYTHON" -m pip "$@"; }

command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH"

# 1. Nothing to do if Horovod's torch binding already imports here.
if "$PYTHON" -c "import horovod.torch" >/dev/null 2>&1; then
    log "horovod.torch already imports in $("$PYTHON" -c 'import sys; print(sys.prefix)'); nothing to do"
    exit 0
fi

log "installing horovod==$HOROVOD_VERSION into $("$PYTHON" -c 'import sys; print(sys.prefix)')"

# 2. torch first: Horovod's torch extension compiles against it, and Horovod itself does not
#    pin torch, so installing the pinned version up front keeps pip from pulling another one.
have_torch=$("$PYTHON" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)
if [[ "$have_torch" == "$TORCH_VERSION" ]]; then
    log "torch $TORCH_VERSION already installed"
else
    log "torch ${have_torch:-missing}, need $TORCH_VERSION (pinned: an open range pulls GBs of CUDA packages); installing it"
    pip_ install "torch==$TORCH_VERSION" >&2
fi

py_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel_glob="horovod-${HOROVOD_VERSION}-${py_tag}-${py_tag}-linux_$(uname -m).whl"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/install_horovod.XXXXXX")
BUILD_LOG="$WORK/build.log"
cleanup() {
    local rc=$?
    if [[ $rc -eq 0 ]]; then
        rm -rf "$WORK"
    else
        log "failed (exit $rc); work directory kept: $WORK"
    fi
}
trap cleanup EXIT

verify() {
    "$PYTHON" -c "import horovod.torch as hvd; hvd.init(); print(hvd.size())"
}

install_wheel() {
    # Without --no-deps: pip resolves Horovod's runtime deps (cloudpickle, psutil, pyyaml,
    # packaging); torch is not among them, so the pinned torch stays as it is.
    # Naming the pinned torch too is a guard: already satisfied, so pip leaves it alone.
    pip_ install --no-cache-dir "$1" "torch==$TORCH_VERSION" >&2 || die "pip install $1 failed"
}

BUILT_WHEEL=""
build_wheel() {  # sets BUILT_WHEEL to the cached wheel's path
    log "building horovod $HOROVOD_VERSION from source (takes a few minutes; log: $BUILD_LOG)"

    # Build prerequisites. With --no-build-isolation they come from this environment:
    # setup.py imports packaging, older setuptools needs wheel for bdist_wheel.
    if ! command -v cmake >/dev/null 2>&1; then
        log "cmake missing; installing it with apt-get"
        command -v apt-get >/dev/null 2>&1 || die "cmake (>= 3.13) is required and apt-get is not available"
        local sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq cmake >&2
    fi
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
        die "no C++ compiler (g++) found; install it (apt-get install g++)"
    command -v make >/dev/null 2>&1 || die "make not found; install it (apt-get install make)"
    # (setuptools >= 70.1 has bdist_wheel built in; older ones need the wheel package.)
    "$PYTHON" -c "import importlib.util as u, packaging, setuptools
assert u.find_spec('setuptools.command.bdist_wheel') or u.find_spec('wheel')" >/dev/null 2>&1 || {
        log "installing build prerequisites (setuptools, wheel, packaging)"
        pip_ install setuptools wheel packaging >&2
    }

    log "downloading the horovod $HOROVOD_VERSION sdist"
    pip_ download --no-deps --no-binary :all: --dest "$WORK/sdist" "horovod==$HOROVOD_VERSION" \
        >>"$BUILD_LOG" 2>&1 || { tail -n 50 "$BUILD_LOG" >&2; die "pip download failed"; }
    local sdist
    sdist=$(ls "$WORK"/sdist/horovod-"$HOROVOD_VERSION".tar.gz 2>/dev/null) ||
        die "sdist horovod-$HOROVOD_VERSION.tar.gz not found after download"
    tar -xzf "$sdist" -C "$WORK"
    local src="$WORK/horovod-$HOROVOD_VERSION"
    [[ -d "$src" ]] || die "unexpected sdist layout: $src missing"

    log "patching CMAKE_CXX_STANDARD 14 -> 17 (torch $TORCH_VERSION headers need C++17)"
    local f
    for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
        [[ -f "$f" ]] || die "$f not found in the sdist"
        grep -Eq 'set\(CMAKE_CXX_STANDARD 14\)' "$f" ||
            die "pattern 'set(CMAKE_CXX_STANDARD 14)' not found in $f; the sdist changed, review the patch"
        sed -i -E 's/set\(CMAKE_CXX_STANDARD 14\)/set(CMAKE_CXX_STANDARD 17)/' "$f"
        grep -Eq 'set\(CMAKE_CXX_STANDARD 17\)' "$f" || die "patching $f failed"
    done

    local jobs=${HOROVOD_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
    if [[ -z "${HOROVOD_BUILD_JOBS:-}" ]] && ((jobs > 4)); then jobs=4; fi
    log "compiling (make -j$jobs; Horovod's default -j8 is too many for a small machine)"
    local start=$SECONDS
    HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$jobs" \
        pip_ wheel --no-build-isolation --no-deps --no-cache-dir --verbose --wheel-dir "$WORK/dist" "$src" \
        >>"$BUILD_LOG" 2>&1 || {
        log "build failed; last 50 lines of $BUILD_LOG:"
        tail -n 50 "$BUILD_LOG" >&2
        die "pip wheel horovod==$HOROVOD_VERSION failed"
    }
    log "built in $((SECONDS - start))s"

    local built
    built=$(ls "$WORK"/dist/$wheel_glob 2>/dev/null | head -n 1) ||
        die "no $wheel_glob produced in $WORK/dist"
    mkdir -p "$CACHE_DIR"
    # Copy then rename, so a concurrent run never sees a half-written wheel.
    cp "$built" "$CACHE_DIR/.$(basename "$built").tmp.$$"
    mv -f "$CACHE_DIR/.$(basename "$built").tmp.$$" "$CACHE_DIR/$(basename "$built")"
    BUILT_WHEEL="$CACHE_DIR/$(basename "$built")"
    log "cached $BUILT_WHEEL"
}

# 3. Cached wheel (built against torch $TORCH_VERSION) if there is one, else build and cache.
cached=$(ls "$CACHE_DIR"/$wheel_glob 2>/dev/null | head -n 1 || true)
if [[ -n "$cached" ]]; then
    log "using cached wheel $cached"
    install_wheel "$cached"
    if ! "$PYTHON" -c "import horovod.torch" >/dev/null 2>&1; then
        log "cached wheel does not import here (stale or built against another torch); rebuilding"
        rm -f "$cached"
        pip_ uninstall -y horovod >&2
        build_wheel
        install_wheel "$BUILT_WHEEL"
    fi
else
    log "no cached $wheel_glob in $CACHE_DIR"
    build_wheel
    install_wheel "$BUILT_WHEEL"
fi

# 4. Verify: load the native library and start a one-process Gloo context.
log "verifying: import horovod.torch; hvd.init()"
size=$(verify 2>>"$WORK/verify.log" | tail -n 1) || {
    cat "$WORK/verify.log" >&2
    die "horovod.torch installed but hvd.init() failed"
}
log "OK: horovod $HOROVOD_VERSION with torch $TORCH_VERSION works (hvd.init() size=$size)"
echo "horovod $HOROVOD_VERSION installed and verified (torch $TORCH_VERSION, Gloo, size=$size)"
