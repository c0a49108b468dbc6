"""A running pipeline puts the host's BLAS on one thread (its CPU-stage threads are the parallelism),
unless RAYPIPE_BLAS_THREADS says otherwise; checked in fresh processes (the limit is per process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from raypipe.blas_threads import BLAS_THREADS_ENV, host_blas_libraries

SCRIPT = """
import numpy as np
import raypipe as rp
from raypipe import fn
from raypipe.blas_threads import host_blas_libraries

before = [lib.num_threads for lib in host_blas_libraries()]

@rp.pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=0)
def pipe():
    return fn.random.uniform(range=[0, 1], shape=[4])

with pipe() as p:
    p.build()
    p.run()
    print(before, [lib.num_threads for lib in host_blas_libraries()])
"""


def _threads(env: dict[str, str]) -> tuple[list[int], list[int]]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, env={**os.environ, **env}
    ).stdout
    before, after = out.strip().splitlines()[-1].split("] [")
    parse = lambda text: [int(x) for x in text.strip("[]").split(",") if x.strip()]  # noqa: E731
    return parse(before), parse(after)


needs_blas = pytest.mark.skipif(not host_blas_libraries(), reason="numpy without a BLAS threadpoolctl sees")


@needs_blas
def test_a_running_pipeline_puts_the_host_blas_on_one_thread():
    before, after = _threads({"OPENBLAS_NUM_THREADS": "2", BLAS_THREADS_ENV: "1"})
    assert before and all(n == 2 for n in before)
    assert after == [1] * len(before)


@needs_blas
def test_the_environment_keeps_another_count_or_leaves_blas_alone():
    # the child's own libraries: this process may have loaded more (a module bundling its own BLAS)
    before, after = _threads({"OPENBLAS_NUM_THREADS": "2", BLAS_THREADS_ENV: "0"})
    assert before and after == [2] * len(before)
    before, after = _threads({"OPENBLAS_NUM_THREADS": "2", BLAS_THREADS_ENV: "3"})
    assert before and after == [3] * len(before)
