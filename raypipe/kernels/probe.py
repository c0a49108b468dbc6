"""The one-element kernel the start-up check compiles and runs (:mod:`raypipe.device_check`)."""

from __future__ import annotations

from numba import cuda


@cuda.jit
def probe(values):
    """``values[0] = 2 * values[0] + 1``: proves that a kernel compiled, launched and wrote."""
    if cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0 and cuda.threadIdx.x == 0:
        values[0] = values[0] * 2 + 1
