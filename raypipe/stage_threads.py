"""How many threads run a pipeline's CPU stage.

Where the GPU decodes (a mixed decoder on nvImageCodec), the CPU stage only reads each file, walks
its JPEG header and draws its crop window: Python work that holds the GIL, about 30 us a sample,
which one thread does at over 20,000 samples a second. More threads then only take the GIL from
the Mixed stage's thread, which gives it up at every nvImageCodec call and then waits to get it
back: on an H200 the ResNet-50 recipe ran at 10,877 img/s with one CPU-stage thread against 6,885
with four. So with GPU decode the CPU stage runs on :data:`GPU_DECODE_THREADS` thread (never more
than ``num_threads``), while nvImageCodec keeps ``num_threads`` host threads of its own, which run
without the GIL. ``RAYPIPE_CPU_STAGE_THREADS`` sets the number for any pipeline.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .errors import ArgumentError

THREADS_ENV = "RAYPIPE_CPU_STAGE_THREADS"
#: CPU-stage threads where the GPU decodes (see the module's docstring).
GPU_DECODE_THREADS = 1


class StageThreads(NamedTuple):
    """The CPU stage's thread count and why it is that."""

    threads: int
    detail: str


def cpu_stage_threads(num_threads: int, gpu_decode: bool) -> StageThreads:
    """The CPU stage's threads for a pipeline of ``num_threads`` whose mixed decoders decode on the
    GPU (``gpu_decode``) or not; ``RAYPIPE_CPU_STAGE_THREADS`` overrides. Raises ArgumentError for
    a setting that is not a positive integer."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ArgumentError(f"{THREADS_ENV} must be a positive integer, got {value!r}")
        return StageThreads(int(value), f"{THREADS_ENV}={value}")
    if gpu_decode and num_threads > GPU_DECODE_THREADS:
        return StageThreads(
            GPU_DECODE_THREADS,
            f"the GPU decodes: the CPU stage reads files and headers on {GPU_DECODE_THREADS} thread (more would "
            f"contend for the GIL with the Mixed stage); nvImageCodec uses num_threads={num_threads}",
        )
    return StageThreads(num_threads, f"num_threads={num_threads}")
