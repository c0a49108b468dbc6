#!/usr/bin/env bash
# Everything to verify on a lent GPU machine in one `run` call (see ../shared/FACTS.md: torch,
# cupy-cuda13x, numba and numba-cuda are there; Ray, nvImageCodec and lmdb are not).
#
# Prepare here, once per session (the wheels travel as the ignored folder .whl/, `carry`):
#   pip download --no-deps -d .whl nvidia-nvimgcodec-cu13 "nvidia-nvjpeg==13.*"
# then:  run(command="bash benchmarks/gpu_session.sh", carry=[".whl"])
# and copy what it prints into benchmarks/RESULTS.md with the machine.
set -uo pipefail
OUT=${OUT:-/tmp/raypipe-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" > /dev/null; then
    pip install --no-deps --no-index .whl/*.whl 2>&1 | tail -1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python -c "import raypipe.backend as b, raypipe.gpu_decode as g; print('gpu', b.gpu_available(), b.gpu_unavailable_reason(), 'nvimgcodec', g.nvimgcodec_available())"
# GPU tests everywhere but the Ray cluster tests (no Ray there); modules needing absent packages are skipped.
python -m pytest -q -m gpu tests --ignore=tests/cluster --continue-on-collection-errors -p no:cacheprovider 2>&1 \
    | tail -40 | tee "$OUT/pytest_gpu.txt"
# The kernel tests again, now compiled on the GPU instead of the simulator.
python -m pytest -q tests/kernels tests/actors tests/test_backend.py tests/test_gpu_decode.py -p no:cacheprovider 2>&1 \
    | tail -30 | tee "$OUT/pytest_kernels.txt"
cp tests/cluster/test_rank_normalize.py "$OUT/" && python -m pytest -q "$OUT/test_rank_normalize.py" -p no:cacheprovider 2>&1 | tail -5
python examples/bench_gpu.py --images 5120 --batch-size 256 --threads 4 2>&1 | tee "$OUT/bench_gpu.txt"
# The CPU-stage cost per image where the CPU stage ends on a real GPU node (host decode, and nvImageCodec):
# the inputs of the CPU-helper sizing model in README.md (needs no Ray).
python benchmarks/cpu_helpers.py --part costs 2>&1 | tee "$OUT/cpu_stage_costs.txt"
