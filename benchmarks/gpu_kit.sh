#!/usr/bin/env bash
# Builds .gpu_kit/: what the lent GPU machine lacks, for one `run(..., carry=[".gpu_kit"])` of
# benchmarks/gpu_session.sh (see ../shared/FACTS.md). That machine has Python 3.12, torch, cupy,
# numba and numba-cuda, msgpack, protobuf, grpcio, aiohttp, pyyaml, psutil, tqdm, numpy, pillow and
# pytest, but no Ray, nvImageCodec, nvJPEG, lmdb, crc32c or turbojpeg, and no network; a run carries
# at most 64 MiB, the working tree included, so the kit stays within 56 MiB (KIT_LIMIT_MIB).
#
# Ray's cp312 wheel (79 MB) does not fit: it is unzipped without the parts a local Ray with
# include_dashboard=False never loads (Java, RLlib, Serve, Tune, Data, LLM, the dashboard's web
# client) and packed as tar.xz, for gpu_session.sh to unpack into a folder on PYTHONPATH. The other
# packages come as cp312 / pure-Python manylinux x86_64 wheels, installed there with
# `pip install --no-index --no-deps` (only those missing there, or older there). The kit also holds
# segv_trace.so, benchmarks/segv_trace.c compiled here ($CC, default gcc; built against this
# machine's glibc 2.36, it runs on the GPU machine's newer one): gpu_session.sh preloads it into its
# pytest runs so that a native crash shows its native frames (without a compiler the kit goes
# without it, and the check says so).
#
#   bash benchmarks/gpu_kit.sh                # build or complete .gpu_kit/ (skips what is done)
#   bash benchmarks/gpu_kit.sh --rebuild      # rebuild the Ray archive and segv_trace.so, download the wheels again
#   bash benchmarks/gpu_kit.sh --check DIR    # verify a built kit: its files, the archive, the size
#
# Downloads go through pip (PyPI); the full Ray wheel is kept in a cache outside the kit
# (RAYPIPE_KIT_CACHE, default ~/.cache/raypipe/gpu_kit) so that a rebuild needs no download.
set -euo pipefail

RAY_VERSION=2.60.0
KIT_LIMIT_MIB=56
# Folders of the Ray wheel that a local Ray without the dashboard never loads (the big ones).
STRIPPED=(ray/jars ray/rllib ray/serve ray/tune ray/data ray/llm ray/dashboard/client)
# Files the archive must hold for Ray to start: its package, its core library, its two servers.
RAY_NEEDED=(ray/__init__.py ray/_raylet.so ray/core/src/ray/raylet/raylet ray/core/src/ray/gcs/gcs_server
    "ray-$RAY_VERSION.dist-info/METADATA")
# Wheels the kit must hold, as file-name patterns (wheel names use underscores):
# GPU decode (CUDA 13), raypipe's own dependencies, Ray's that the GPU machine may lack, and py-spy.
WHEELS_NEEDED=(nvidia_nvimgcodec_cu13-0.9 nvidia_nvjpeg-13. lmdb- crc32c- turbojpeg- jsonschema-
    jsonschema_specifications- referencing- rpds_py- click- requests- py_spy-)
# What pip downloads for them: requirement, one per wheel (no dependencies are resolved).
REQUIREMENTS=("nvidia-nvimgcodec-cu13>=0.9,<0.10" "nvidia-nvjpeg>=13,<14" lmdb crc32c turbojpeg jsonschema
    jsonschema-specifications referencing rpds-py click requests
    # the sampling profiler of gpu_session.sh's profile step
    py-spy
    # small, and present there in all likelihood (aiohttp, torch or pytest need them); the session
    # installs each only where it is missing
    attrs filelock packaging urllib3 certifi charset-normalizer idna)
PIP_TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --no-deps)

say() { printf 'gpu_kit: %s\n' "$*"; }
# pip's output less its notes on unreachable extra indexes (a failed download is caught after).
quiet_pip() { grep -v "^WARNING: Location .* is ignored" || true; }
die() { printf 'gpu_kit: %s\n' "$*" >&2; exit 1; }

# Apparent size in bytes of every file under $1 (sparse files count in full).
kit_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }

mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }

# Verify the kit in $1; print its files and size; exit status 1 with every problem named.
check_kit() {
    local dir=$1 problems=() tars listing pattern matches wheel bytes name
    [[ -d $dir ]] || die "check: no kit folder $dir"
    shopt -s nullglob
    tars=("$dir"/ray-*.tar.xz)
    if ((${#tars[@]} != 1)); then
        problems+=("expected one Ray archive $dir/ray-*.tar.xz, found ${#tars[@]}")
    elif ! listing=$(tar -tJf "${tars[0]}" 2>/dev/null); then
        problems+=("$(basename "${tars[0]}") is not a readable tar.xz")
    else
        for pattern in "${STRIPPED[@]}"; do
            if grep -q "^$pattern/" <<<"$listing"; then
                problems+=("$(basename "${tars[0]}") still holds $pattern/ (it must be stripped)")
            fi
        done
        for pattern in "${RAY_NEEDED[@]}"; do
            if ! grep -qxF "$pattern" <<<"$listing"; then
                problems+=("$(basename "${tars[0]}") lacks $pattern")
            fi
        done
    fi
    for pattern in "${WHEELS_NEEDED[@]}"; do
        matches=("$dir"/wheels/"$pattern"*.whl)
        ((${#matches[@]})) || problems+=("no wheel $pattern*.whl in $dir/wheels")
    done
    for wheel in "$dir"/wheels/*.whl; do
        name=$(basename "$wheel")
        # name-version(-build)?-python-abi-platform.whl: Python 3.12 on Linux x86_64, or pure Python
        if ! [[ $name =~ -(cp312|py3|py2\.py3)-[^-]+-([^-]+)\.whl$ ]]; then
            problems+=("$name is not a wheel for CPython 3.12")
        elif [[ ${BASH_REMATCH[2]} != any && ${BASH_REMATCH[2]} != *linux*x86_64* ]]; then
            problems+=("$name is not for Linux x86_64")
        fi
    done
    shopt -u nullglob
    if [[ ! -f $dir/segv_trace.so ]]; then
        problems+=("no native crash tracer $dir/segv_trace.so (a C compiler builds it from benchmarks/segv_trace.c)")
    elif [[ $(od -An -tx1 -N4 "$dir/segv_trace.so" | tr -d ' ') != 7f454c46 ]]; then
        problems+=("segv_trace.so is not an ELF shared library")
    fi
    bytes=$(kit_bytes "$dir")
    say "kit $dir:"
    find "$dir" -type f -printf '%s %P\n' | sort -k2 | awk '{printf "  %8.2f MiB  %s\n", $1 / 1048576, $2}'
    say "total $(mib "$bytes") MiB of at most $KIT_LIMIT_MIB MiB"
    if ((bytes > KIT_LIMIT_MIB * 1048576)); then
        problems+=("the kit is $(mib "$bytes") MiB, over the limit of $KIT_LIMIT_MIB MiB")
    fi
    if ((${#problems[@]})); then
        printf 'gpu_kit: check failed: %s\n' "${problems[@]}" >&2
        return 1
    fi
    say "check passed"
}

# The full Ray wheel in the cache (downloaded once).
ray_wheel() {
    local cache=$1 found
    found=$(find "$cache" -maxdepth 1 -name "ray-$RAY_VERSION-cp312-cp312-manylinux*_x86_64.whl" | head -1)
    if [[ -z $found ]]; then
        say "downloading Ray $RAY_VERSION (cp312, about 80 MB) into $cache" >&2
        "$PYTHON" -m pip download -q "${PIP_TARGET[@]}" -d "$cache" "ray==$RAY_VERSION" 2>&1 | quiet_pip >&2
        found=$(find "$cache" -maxdepth 1 -name "ray-$RAY_VERSION-cp312-cp312-manylinux*_x86_64.whl" | head -1)
        [[ -n $found ]] || die "pip downloaded no Ray $RAY_VERSION cp312 wheel"
    fi
    printf '%s\n' "$found"
}

# $2/ray-$RAY_VERSION-cp312-stripped.tar.xz from the wheel (skipped when present unless rebuilding).
build_ray_archive() {
    local cache=$1 dir=$2 archive stage wheel began
    archive="$dir/ray-$RAY_VERSION-cp312-stripped.tar.xz"
    if [[ -f $archive && $REBUILD == 0 ]]; then
        say "Ray archive present, kept: $archive ($(mib "$(stat -c %s "$archive")") MiB; --rebuild makes it again)"
        return
    fi
    wheel=$(ray_wheel "$cache")
    stage="$cache/ray-stage"
    rm -rf "$stage" && mkdir -p "$stage"
    say "unzipping $(basename "$wheel") without ${STRIPPED[*]}"
    unzip -q "$wheel" -d "$stage"
    for pattern in "${STRIPPED[@]}"; do
        rm -rf "${stage:?}/$pattern"
    done
    began=$SECONDS
    say "packing $(du -sm "$stage" | cut -f1) MB as tar.xz (xz -9, about 1.5 min on 2 cores)"
    rm -f "$archive"
    tar -C "$stage" -cf - ray "ray-$RAY_VERSION.dist-info" | xz -9 -T0 >"$archive.part"
    mv "$archive.part" "$archive"
    rm -rf "$stage"
    say "Ray archive: $(mib "$(stat -c %s "$archive")") MiB in $((SECONDS - began)) s"
}

# Every wheel of REQUIREMENTS in $1/wheels (a requirement whose wheel is there is skipped).
download_wheels() {
    local dir=$1 req name present
    mkdir -p "$dir/wheels"
    for req in "${REQUIREMENTS[@]}"; do
        name=${req%%[<>=]*}
        name=${name//-/_}
        present=$(find "$dir/wheels" -maxdepth 1 -iname "$name-*.whl" | head -1)
        if [[ -n $present ]]; then
            say "present: $(basename "$present")"
            continue
        fi
        say "downloading $req"
        "$PYTHON" -m pip download -q "${PIP_TARGET[@]}" -d "$dir/wheels" "$req" 2>&1 | quiet_pip
        [[ -n $(find "$dir/wheels" -maxdepth 1 -iname "$name-*.whl") ]] || die "no cp312 wheel for $req"
    done
}

# $2/segv_trace.so compiled from $1/benchmarks/segv_trace.c (kept when newer than its source, unless
# rebuilding); without a compiler, or when it fails, the kit goes on without it.
build_tracer() {
    local source=$1/benchmarks/segv_trace.c library=$2/segv_trace.so
    if [[ -f $library && $library -nt $source && $REBUILD == 0 ]]; then
        say "native crash tracer present, kept: $library"
        return
    fi
    rm -f "$library"
    if ! command -v "$CC" >/dev/null; then
        say "no C compiler ($CC): the kit goes without segv_trace.so, the native crash tracer"
        return
    fi
    if ! "$CC" -shared -fPIC -O1 -g -Wall -o "$library" "$source"; then
        say "$CC failed on $source: the kit goes without segv_trace.so"
        rm -f "$library"
        return
    fi
    say "native crash tracer: $library ($(stat -c %s "$library") bytes)"
}

main() {
    local root dir cache mode=build
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    dir="$root/.gpu_kit"
    cache=${RAYPIPE_KIT_CACHE:-$HOME/.cache/raypipe/gpu_kit}
    REBUILD=0
    PYTHON=${PYTHON:-python3}
    CC=${CC:-gcc}
    while (($#)); do
        case $1 in
            --check)
                mode=check
                dir=${2:?--check needs a folder}
                shift
                ;;
            --dir)
                dir=${2:?--dir needs a folder}
                shift
                ;;
            --rebuild) REBUILD=1 ;;
            -h | --help)
                sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
                return 0
                ;;
            *) die "unknown argument $1 (see --help)" ;;
        esac
        shift
    done
    if [[ $mode == check ]]; then
        check_kit "$dir"
        return
    fi
    command -v unzip >/dev/null || die "needs unzip (apt-get install unzip)"
    mkdir -p "$dir" "$cache"
    if ((REBUILD)); then
        rm -rf "$dir/wheels"
    fi
    build_ray_archive "$cache" "$dir"
    download_wheels "$dir"
    build_tracer "$root" "$dir"
    check_kit "$dir"
    say "carry it with: run(command=\"bash benchmarks/gpu_session.sh\", carry=[\"$(basename "$dir")\"])"
}

main "$@"
