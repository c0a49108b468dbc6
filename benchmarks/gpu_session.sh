#!/usr/bin/env bash
# Everything to verify on a lent GPU machine in one remote run of at most 10 minutes.
#
# That machine (see ../shared/FACTS.md) has torch, cupy, numba and numba-cuda but no Ray,
# nvImageCodec, nvJPEG, lmdb, crc32c or turbojpeg, and no network: build the kit here first with
# `bash benchmarks/gpu_kit.sh`, then run, from the repository root there:
#   run(command="bash benchmarks/gpu_session.sh", carry=[".gpu_kit"])
# Copy what it reports into benchmarks/RESULTS.md with the machine.
#
# Steps, each with its own time limit inside an overall budget (GPU_SESSION_BUDGET_S, default
# 540 s), a failed or timed-out step not stopping the next: setup (unpack the kit), machine (GPU,
# driver, package versions, whether numba-cuda compiles a kernel), pytest_gpu (`pytest -m gpu`),
# pytest_kernels (the kernel and actor tests, compiled on the GPU instead of the simulator),
# service (benchmarks/gpu_service_check.py: a Ray service to a torch rank through CUDA IPC against
# the host path, memory flat over 6 epochs after 2 to fill the pools), bench (examples/bench_gpu.py, the GPU stage in the rank's
# process and in a pipeline actor; GPU_SESSION_SOURCE=caffe, tfrecord, webdataset or recordio reads the
# JPEGs converted into that container instead of a folder of files), cpu_costs (the CPU stage per sample, benchmarks/cpu_helpers.py),
# cpu_stage (the GPU path's CPU stage per sample on this host, benchmarks/cpu_stage_cost.py),
# ops_gpu (the operators' device variants against their host results),
# decode_rate (benchmarks/gpu_decode_rate.py: nvImageCodec alone on the recipe's crops, one to
# three decoders at once, and a decode split into its host and library parts), nvimgcodec_gil
# (benchmarks/nvimgcodec_gil.py: which per-image nvImageCodec calls give up the GIL, and their cost
# beside busy Python threads), nvimgcodec_backends (benchmarks/nvimgcodec_backends.py: which backend
# decodes a batch through nvImageCodec's Python binding and through its C API, then the C API under
# the Mixed stage's conditions and the Mixed stage's decoder with each API, `--conditions`). One step runs only
# when named, profile: the recipe in this process under py-spy (GPU_SESSION_PROFILE_RATE samples a
# second, default 50: more slows the recipe itself), and where each thread's samples went
# (benchmarks/profile_summary.py).
# The pytest steps preload the kit's native crash tracer (segv_trace.so, from benchmarks/segv_trace.c)
# when the kit has it: a process that dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT writes its
# native frames (library+offset, symbols where exported) after Python's faulthandler traceback, to
# stderr and to native/segv-<pid>.txt in the logs (Ray workers' stderr goes to Ray's logs).
# One step runs only when named, crash_trace: the tests that crashed natively
# (tests/operators/test_decoders.py -m gpu, tests/test_gpu_decode.py; GPU_SESSION_CRASH_TESTS, runs
# separated by ';', names others), each 3 times under the tracer with `python -X faulthandler`,
# then the first once under gdb (`thread apply all bt`) when the machine has gdb, each run within
# GPU_SESSION_CRASH_RUN_S (45) or GPU_SESSION_CRASH_GDB_S (90) and what is left of the step's 120 s;
# it passes when no run died of a signal: GPU_SESSION_STEPS="setup crash_trace".
# Each step's whole output goes to <step>.log in a folder of logs (LOGS, default a new folder under
# /tmp), its last lines show here, and summary.tsv (step, status, exit code, seconds) ends the run.
# After every step the logs are packed into $OUT/logs.tgz and the summary copied to $OUT (two
# files: the device tool brings back at most eight). The exit status is 0 only when every step
# passed. GPU_SESSION_STEPS="setup service" runs only those steps; GPU_SESSION_LIMIT_<STEP>=seconds
# (GPU_SESSION_LIMIT_BENCH=240) changes a step's time limit.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$ROOT/benchmarks/gpu_session.sh"
KIT=${RAYPIPE_GPU_KIT:-$ROOT/.gpu_kit}
SITE=${RAYPIPE_GPU_SITE:-${TMPDIR:-/tmp}/raypipe-gpu-site}
PY=${PYTHON:-python}
command -v "$PY" >/dev/null || PY=python3
export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

# Unpack Ray into $SITE (on PYTHONPATH) and install the kit's wheels that are missing or older here.
setup() {
    shopt -s nullglob
    local tars=("$KIT"/ray-*.tar.xz) wheels
    if ((${#tars[@]} != 1)); then
        echo "no Ray archive in $KIT: build the kit with 'bash benchmarks/gpu_kit.sh' and carry .gpu_kit" >&2
        return 1
    fi
    rm -rf "$SITE" && mkdir -p "$SITE"
    tar -xJf "${tars[0]}" -C "$SITE" || return 1
    echo "unpacked $(basename "${tars[0]}") into $SITE"
    mapfile -t wheels < <("$PY" - "$KIT"/wheels/*.whl <<'EOF'
"""Print the wheels whose distribution is not installed, or installed in an older version."""
import sys
from importlib.metadata import PackageNotFoundError, version

try:
    from packaging.version import Version
except ImportError:
    Version = None
for path in sys.argv[1:]:
    name, kit = path.rsplit("/", 1)[-1].split("-")[:2]
    try:
        have = version(name)
    except PackageNotFoundError:
        print(path)
        continue
    if Version is not None and Version(have) < Version(kit):
        print(path)
    else:
        print(f"kept {name} {have} (kit: {kit})", file=sys.stderr)
EOF
    )
    if ((${#wheels[@]})); then
        echo "installing ${#wheels[@]} wheels: ${wheels[*]##*/}"
        "$PY" -m pip install -q --no-index --no-deps "${wheels[@]}" \
            || "$PY" -m pip install -q --no-index --no-deps --break-system-packages "${wheels[@]}" || return 1
    fi
    "$PY" -c "import ray, lmdb, crc32c, turbojpeg, jsonschema; print('ray', ray.__version__, 'from', ray.__file__)"
}

# The machine and the versions that matter, and whether each GPU component works.
machine() {
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
    nvidia-smi
    echo "cores $(nproc); $(free -g | awk '/Mem:/ {print $2 " GiB memory"}')"
    "$PY" --version
    "$PY" -m pip list 2>/dev/null | grep -i -E '^(torch|cupy|numba|cuda|nvidia|ray|numpy|pillow|lmdb|turbojpeg|pytest)'
    "$PY" benchmarks/gpu_probe.py
}

# The test files that hold GPU tests (collecting only those: every other module is slower to
# collect and may need packages that machine lacks).
gpu_test_files() { grep -rl --include='test_*.py' -E 'mark\.gpu|pytestmark.*gpu' "$ROOT/tests" | sort; }

pytest_args() {
    # one process on the GPU machine (the project's addopts spread the suite over pytest-xdist workers)
    local args=(-q -p no:cacheprovider -o addopts= -p no:xdist)
    "$PY" -c "import pytest_timeout" 2>/dev/null && args+=(--timeout=90)
    printf '%s\n' "${args[@]}"
}

# The environment that preloads the kit's native crash tracer, when the kit has it (one VAR=value a line).
tracer_env() {
    [[ -f $KIT/segv_trace.so ]] || return 0
    mkdir -p "$LOGS/native"
    printf '%s\n' "LD_PRELOAD=$(realpath "$KIT/segv_trace.so")${LD_PRELOAD:+:$LD_PRELOAD}" \
        "SEGV_TRACE_DIR=$(realpath "$LOGS/native")"
}

pytest_gpu() {
    local args files traced
    mapfile -t args < <(pytest_args)
    mapfile -t files < <(gpu_test_files)
    mapfile -t traced < <(tracer_env)
    env "${traced[@]}" "$PY" -m pytest "${args[@]}" -m gpu --junitxml="$LOGS/pytest_gpu.xml" "${files[@]}"
}

pytest_kernels() {
    local args traced
    mapfile -t args < <(pytest_args)
    mapfile -t traced < <(tracer_env)
    env "${traced[@]}" "$PY" -m pytest "${args[@]}" -m "not gpu" --junitxml="$LOGS/pytest_kernels.xml" \
        tests/kernels tests/actors tests/test_backend.py tests/test_gpu_decode.py
}

service() { "$PY" benchmarks/gpu_service_check.py --json "$LOGS/service_check.json"; }

# GPU_SESSION_WHERE=process skips the pipeline-actor rows; GPU_SESSION_HW_LOADS the hardware decoder's
# shares, GPU_SESSION_DECODERS the numbers of nvImageCodec decoders sharing each batch,
# GPU_SESSION_THREADS the CPU-stage threads (default: the pipeline's choice) and
# GPU_SESSION_SWITCH_MS Python's GIL switch intervals (default: Python's), GPU_SESSION_DECODE_INTO
# ("1 0": a batch into one buffer, and images nvImageCodec allocates) and GPU_SESSION_CODE_STREAMS
# ("cpu mixed": the stage that makes nvImageCodec's code streams) of the in-process rows;
# GPU_SESSION_API ("c python": nvImageCodec's C API and its Python binding) of every mixed row.
bench() {
    local loads decoders extra=() more=()
    read -ra loads <<<"${GPU_SESSION_HW_LOADS:-0.65 1}"
    read -ra decoders <<<"${GPU_SESSION_DECODERS:-1}"
    [[ -n ${GPU_SESSION_THREADS:-} ]] && read -ra extra <<<"--mixed-threads $GPU_SESSION_THREADS"
    [[ -n ${GPU_SESSION_SWITCH_MS:-} ]] && read -ra more <<<"--switch-ms $GPU_SESSION_SWITCH_MS"
    [[ -n ${GPU_SESSION_DECODE_INTO:-} ]] && read -ra more <<<"${more[*]} --decode-into $GPU_SESSION_DECODE_INTO"
    [[ -n ${GPU_SESSION_CODE_STREAMS:-} ]] && read -ra more <<<"${more[*]} --code-streams $GPU_SESSION_CODE_STREAMS"
    [[ -n ${GPU_SESSION_API:-} ]] && read -ra more <<<"${more[*]} --api $GPU_SESSION_API"
    "$PY" examples/bench_gpu.py --images 2560 --epochs 2 --batch-size 256 --threads 4 \
        --where "${GPU_SESSION_WHERE:-both}" --hw-load "${loads[@]}" --decoders "${decoders[@]}" \
        --source "${GPU_SESSION_SOURCE:-files}" "${extra[@]}" "${more[@]}"
}

# The operators' device variants on the GPU against their host results (test_gpu_variants.py: every
# operator whose only other check is against DALI, which the GPU machine lacks).
ops_gpu() {
    local args traced
    mapfile -t args < <(pytest_args)
    mapfile -t traced < <(tracer_env)
    env "${traced[@]}" "$PY" -m pytest "${args[@]}" tests/operators/test_gpu_variants.py \
        tests/operators/test_noise.py tests/operators/test_lookup_table.py tests/operators/test_batch_permutation.py \
        tests/operators/test_audio_features.py tests/operators/test_random.py tests/operators/test_volume_ops.py \
        tests/operators/test_reductions.py
}

# Run "$@" within $1 seconds and what is left of the step's time, its command line first; print how
# it ended; status 1 when it died of a signal.
crash_run() {
    local limit=$1 left rc
    shift
    left=$((STEP_DEADLINE - SECONDS))
    ((limit > left)) && limit=$left
    if ((limit < 5)); then
        printf '\n== skipped, no time left in the step:'
        printf ' %q' "$@"
        printf '\n'
        return 0
    fi
    printf '\n== run:'
    printf ' %q' "$@"
    printf '\n'
    timeout -k 5 "$limit" "$@"
    rc=$?
    if ((rc == 124)); then
        echo "== timed out after $limit s"
    elif ((rc > 128)); then
        echo "== died of signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
        return 1
    else
        echo "== exit $rc"
    fi
}

# The tests that crashed natively, 3 times each under the tracer, then the first once under gdb.
crash_trace() {
    local args traced targets target words run crashed=0 gdb gdb_log
    mapfile -t args < <(pytest_args)
    mapfile -t traced < <(tracer_env)
    IFS=';' read -ra targets <<<"${GPU_SESSION_CRASH_TESTS:-tests/operators/test_decoders.py -m gpu;tests/test_gpu_decode.py}"
    if ((${#traced[@]})); then
        echo "native crash tracer: ${traced[*]}"
    else
        echo "no $KIT/segv_trace.so (bash benchmarks/gpu_kit.sh builds it): Python's frames only"
    fi
    for run in 1 2 3; do
        for target in "${targets[@]}"; do
            read -ra words <<<"$target"
            echo "== run $run of 3: $target"
            crash_run "${GPU_SESSION_CRASH_RUN_S:-45}" env "${traced[@]}" "$PY" -X faulthandler -m pytest \
                "${args[@]}" "${words[@]}" || crashed=$((crashed + 1))
        done
    done
    gdb=$(command -v gdb)
    echo "command -v gdb: ${gdb:-none}"
    if [[ -n $gdb ]]; then
        read -ra words <<<"${targets[0]}"
        gdb_log=$(mktemp)
        crash_run "${GPU_SESSION_CRASH_GDB_S:-90}" "$gdb" -batch -iex 'set debuginfod enabled off' \
            -ex 'set print thread-events off' -ex run -ex 'thread apply all bt' \
            --args "$PY" -X faulthandler -m pytest "${args[@]}" "${words[@]}" 2>&1 | tee "$gdb_log"
        grep -q -E 'received signal SIG(SEGV|BUS|ILL|FPE|ABRT)' "$gdb_log" && crashed=$((crashed + 1))
        rm -f "$gdb_log"
    fi
    echo "== crash_trace: $crashed runs died of a signal"
    ((crashed == 0))
}

cpu_costs() { "$PY" benchmarks/cpu_helpers.py --part costs; }

# The CPU stage of the GPU path per sample on this machine's host (the issue's 20 us target).
cpu_stage() { "$PY" benchmarks/cpu_stage_cost.py --rounds 20; }

# GPU_SESSION_DECODE_RATE_ARGS replaces the rows' arguments (words split on blanks).
decode_rate() {
    local args=(--decoders 1 2 3 --hw-load 1 0.65 --options '' 'nvjpeg_cuda_decoder:hybrid_huffman_threshold=0')
    [[ -n ${GPU_SESSION_DECODE_RATE_ARGS:-} ]] && read -ra args <<<"$GPU_SESSION_DECODE_RATE_ARGS"
    "$PY" benchmarks/gpu_decode_rate.py --seconds 2 "${args[@]}"
}

nvimgcodec_gil() { "$PY" benchmarks/nvimgcodec_gil.py; }

# Which backend decodes a batch through nvImageCodec's Python binding and through its C API; at
# verbosity 3 each nvImageCodec instance (the binding's, raypipe's C API's) logs the decoders it
# registers, the hardware decoder among them or why not.
nvimgcodec_backends() {
    PYNVIMGCODEC_VERBOSITY=${PYNVIMGCODEC_VERBOSITY:-3} "$PY" benchmarks/nvimgcodec_backends.py || return 1
    "$PY" benchmarks/nvimgcodec_backends.py --conditions --seconds 2
}

# The recipe in this process under the kit's py-spy (native frames where it can unwind them, else
# Python's alone), then where each thread's samples went (benchmarks/profile_summary.py); the raw
# profile stays in the logs.
profile() {
    local spy bench=(examples/bench_gpu.py --images 2560 --epochs 2 --batch-size 256 --threads 4 --where process
        --cpu-images 256)
    spy="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/py-spy"
    if [[ ! -x $spy ]]; then
        echo "no py-spy at $spy: build the kit again (bash benchmarks/gpu_kit.sh) and rerun setup" >&2
        return 1
    fi
    "$spy" record --idle --threads --native --rate "${GPU_SESSION_PROFILE_RATE:-50}" --format raw -o "$LOGS/profile.txt" -- "$PY" "${bench[@]}" \
        || "$spy" record --idle --threads --rate "${GPU_SESSION_PROFILE_RATE:-50}" --format raw -o "$LOGS/profile.txt" -- "$PY" "${bench[@]}" \
        || return 1
    "$PY" benchmarks/profile_summary.py "$LOGS/profile.txt" --top 10
}

# Ray processes a killed step may have left behind.
# Kill what is left of the Ray clusters this run's steps started: the processes whose command lines
# name its own Ray folder (RAY_TMPDIR) and their children (Ray's workers rename themselves). Never
# `ray stop`, which kills every Ray process on the machine, a developer's or a test session's too.
ray_stop() {
    local pids=() children=() pid
    [[ -n ${RAY_TMPDIR:-} ]] || return 0
    mapfile -t pids < <(pgrep -f -- "$RAY_TMPDIR/")
    ((${#pids[@]})) || return 0
    for pid in "${pids[@]}"; do
        mapfile -t -O "${#children[@]}" children < <(pgrep -P "$pid")
    done
    kill -KILL "${pids[@]}" "${children[@]}" 2>/dev/null || true
}

# step NAME LIMIT: run this script's function NAME in a child, within LIMIT seconds and what is
# left of the budget; record its status, exit code and seconds in summary.tsv.
step() {
    local name=$1 limit=$2 left began rc status
    left=$((BUDGET_S - (SECONDS - START) - 10))
    if ((left < 15)); then
        printf '%s\tskipped\t-\t0\n' "$name" >>"$SUMMARY"
        echo "== $name: skipped, the budget is spent"
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name (at most ${limit} s)"
    began=$SECONDS
    STEP_LIMIT_S=$limit timeout -k 10 "$limit" bash "$SELF" --step "$name" >"$LOGS/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=passed ;;
        124 | 137) status=timeout ;;
        *) status=failed ;;
    esac
    tail -n "$TAIL" "$LOGS/$name.log"
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$((SECONDS - began))" >>"$SUMMARY"
    echo "== $name: $status (exit $rc) in $((SECONDS - began)) s"
}

# What comes back from the device machine: the summary and every log, packed.
bring_back() {
    [[ -n ${OUT:-} ]] || return 0
    cp "$SUMMARY" "$OUT/summary.tsv"
    tar -czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null || true
}

if [[ ${1:-} == --step ]]; then
    cd "$ROOT" || exit 1
    LOGS=${LOGS:?} && STEP_DEADLINE=$((SECONDS + ${STEP_LIMIT_S:-600} - 5)) && "$2"
    exit
fi

cd "$ROOT" || exit 1
LOGS=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/raypipe-gpu-XXXXXX")}
export LOGS
# The steps' Ray clusters keep their sessions here, which is how ray_stop finds them (a short path:
# Ray's socket paths must fit in 107 bytes).
RAY_TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/raypipe-ray-XXXXXX")
export RAY_TMPDIR
trap 'ray_stop; rm -rf "$RAY_TMPDIR"' EXIT
mkdir -p "$LOGS"
BUDGET_S=${GPU_SESSION_BUDGET_S:-540}
TAIL=${GPU_SESSION_TAIL:-12}
SUMMARY="$LOGS/summary.tsv"
START=$SECONDS
printf 'step\tstatus\texit\tseconds\n' >"$SUMMARY"
echo "raypipe GPU session: logs in $LOGS${OUT:+ (packed into $OUT/logs.tgz)}, budget ${BUDGET_S} s"

declare -A LIMIT_S=([setup]=120 [machine]=60 [pytest_gpu]=150 [pytest_kernels]=100 [service]=120 [bench]=150
    [cpu_costs]=60 [cpu_stage]=60 [ops_gpu]=90 [crash_trace]=120 [decode_rate]=90 [nvimgcodec_gil]=60 [nvimgcodec_backends]=100
    [profile]=120)
read -ra STEPS <<<"${GPU_SESSION_STEPS:-setup machine pytest_gpu ops_gpu pytest_kernels service bench nvimgcodec_backends decode_rate nvimgcodec_gil cpu_costs cpu_stage}"
for name in "${STEPS[@]}"; do
    if [[ -z ${LIMIT_S[$name]:-} ]]; then
        echo "unknown step $name (steps: ${!LIMIT_S[*]})" >&2
        exit 2
    fi
done
for name in "${STEPS[@]}"; do
    override="GPU_SESSION_LIMIT_${name^^}"
    step "$name" "${!override:-${LIMIT_S[$name]}}"
    bring_back
    [[ $name == setup || $name == machine ]] || ray_stop
done

echo "== summary ($((SECONDS - START)) s in all; logs in $LOGS)"
column -t -s $'\t' "$SUMMARY" 2>/dev/null || cat "$SUMMARY"
! grep -q -v -E $'\tpassed\t|^step\t' "$SUMMARY"
