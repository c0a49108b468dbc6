"""The store rules' device functions against the host conversions they reproduce."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from raypipe.backend import to_host
from raypipe.kernels import launch
from raypipe.kernels.convert import round_even, round_half_up
from raypipe.operators.cast import saturate_cast
from raypipe.operators.resample import cast_to

VALUES = np.array(
    [0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, 127.5, 254.5, 255.49, 255.5, 300.0, -3.0, -128.5, 1e9, -1e9, 7.25],
    dtype=np.float32,
)


@cuda.jit
def _store_even(values, out, mode, lo, hi):
    i = cuda.grid(1)
    if i < values.size:
        out[i] = round_even(values[i], mode, lo, hi)


@cuda.jit
def _store_half_up(values, out, mode, lo, hi):
    i = cuda.grid(1)
    if i < values.size:
        out[i] = round_half_up(values[i], mode, lo, hi)


def _run(xp, kernel, dtype) -> np.ndarray:
    out = xp.zeros(VALUES.size, dtype=dtype)
    kernel[1, 32](xp.asarray(VALUES), out, *launch.store_rule(dtype))
    return to_host(out)


# +-1e9 overflows float16 to +-inf on both sides.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float16, np.float32])
def test_round_even_is_saturate_cast(xp, dtype):
    np.testing.assert_array_equal(_run(xp, _store_even, dtype), saturate_cast(np, VALUES.copy(), np.dtype(dtype)))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.float16, np.float32])
def test_round_half_up_is_the_resamplers_cast(xp, dtype):
    np.testing.assert_array_equal(_run(xp, _store_half_up, dtype), cast_to(np, VALUES.copy(), np.dtype(dtype)))
