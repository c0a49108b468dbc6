"""Device functions that turn a kernel's float32 result into the value stored in the output type.

``mode``, ``lo`` and ``hi`` come from :func:`raypipe.kernels.launch.store_rule`. The two
rounding rules are the host paths' own: :func:`round_even` is ``saturate_cast``'s (ties to
even, as CUDA's ``__float2int_rn``), :func:`round_half_up` is the resampler's ``cast_to``
(``floor(x + 0.5)`` in float32). Storing the returned float64 into the output array is exact for
integer results and rounds once (to nearest even) for float16 or float32 outputs.
"""

from __future__ import annotations

import math

import numba
from numba import cuda

from .launch import FLOAT_STORE


@cuda.jit(device=True)
def round_even(value, mode, lo, hi):
    """``value`` unchanged for float outputs; else rounded to nearest (ties to even) and
    clamped to ``[lo, hi]`` (NaN gives ``lo``)."""
    if mode == FLOAT_STORE:
        return value
    if not value > lo:
        return lo
    if value >= hi:
        return hi
    return round(value)


@cuda.jit(device=True)
def round_half_up(value, mode, lo, hi):
    """``value`` unchanged for float outputs; else ``floor(value + 0.5)`` computed in float32 and
    clamped to ``[lo, hi]`` (NaN gives ``lo``)."""
    if mode == FLOAT_STORE:
        return value
    rounded = math.floor(value + numba.float32(0.5))
    if not rounded > lo:
        return lo
    if rounded >= hi:
        return hi
    return rounded
