"""``color_twist`` as one kernel over a batch of HWC RGB samples: per sample a 3x3 matrix and an
offset (the host path's float32 values), applied in float32 as ``r * m[j, 0] + g * m[j, 1] +
b * m[j, 2] + offset``, then converted to the output type as ``saturate_cast`` does."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda

from .convert import round_even
from .launch import Packed, allocate, launch, store_rule, to_device

_OFFSET_COEFF = 9  # coefficient rows: the 3x3 matrix row by row, then the offset


@cuda.jit
def _color_twist(src, dst, offsets, sizes, coeffs, mode, lo, hi):
    sample = cuda.blockIdx.y
    base = offsets[sample]
    total = sizes[sample]
    offset = coeffs[sample, _OFFSET_COEFF]
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < total:
        c = i % 3
        pixel = base + i - c
        value = numba.float32(src[pixel]) * coeffs[sample, 3 * c]
        value += numba.float32(src[pixel + 1]) * coeffs[sample, 3 * c + 1]
        value += numba.float32(src[pixel + 2]) * coeffs[sample, 3 * c + 2]
        value += offset
        dst[base + i] = round_even(value, mode, lo, hi)
        i += cuda.gridDim.x * cuda.blockDim.x


def color_twist_batch(xp: ModuleType, packed: Packed, coeffs: np.ndarray, dtype: np.dtype) -> Any:
    """Twist each HWC RGB sample of ``packed`` with its row of ``coeffs`` ((N, 10) float32: the
    matrix row by row, then the offset) into ``dtype``; one launch. Returns one ``(N, H, W, 3)``
    array when every shape agrees, else a :class:`Packed` batch; ``dtype`` must have a :func:`store_rule`."""
    rule = store_rule(dtype)
    if rule is None:
        raise ValueError(f"color_twist: kernels do not write {np.dtype(dtype)}")
    shapes = packed.shapes
    if shapes.shape[1] != 3 or (shapes[:, 2] != 3).any():
        raise ValueError(f"color_twist: expects HWC RGB samples, got shapes {[tuple(s) for s in shapes.tolist()]}")
    out, _, batch = allocate(xp, shapes, dtype)
    sizes = np.prod(packed.shapes, axis=1, dtype=np.int64)
    host = np.stack([packed.offsets, sizes])
    device = to_device(xp, host)
    launch(
        xp,
        _color_twist,
        len(packed),
        int(sizes.max()),
        packed.data,
        out,
        device[0],
        device[1],
        to_device(xp, np.ascontiguousarray(coeffs, dtype=np.float32)),
        *rule,
    )
    return batch
