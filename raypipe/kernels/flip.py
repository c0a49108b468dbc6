"""``flip`` as one kernel over a batch: each sample mirrored horizontally and/or vertically by
its own flags, any element type, any of the operator's layouts (HWC, CHW, HW)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
from numba import cuda

from .launch import Packed, allocate, launch, to_device

# Columns of the per-sample parameter rows: a sample is viewed as (outer, height, width, inner).
_OFFSET, _OUTER, _HEIGHT, _WIDTH, _INNER, _HORIZONTAL, _VERTICAL = range(7)


@cuda.jit
def _flip(src, dst, params):
    sample = cuda.blockIdx.y
    offset = params[sample, _OFFSET]
    height = params[sample, _HEIGHT]
    width = params[sample, _WIDTH]
    inner = params[sample, _INNER]
    horizontal = params[sample, _HORIZONTAL]
    vertical = params[sample, _VERTICAL]
    total = params[sample, _OUTER] * height * width * inner
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < total:
        q = i % inner
        x = (i // inner) % width
        y = (i // (inner * width)) % height
        o = i // (inner * width * height)
        if horizontal:
            x = width - 1 - x
        if vertical:
            y = height - 1 - y
        dst[offset + i] = src[offset + ((o * height + y) * width + x) * inner + q]
        i += cuda.gridDim.x * cuda.blockDim.x


def flip_batch(
    xp: ModuleType,
    packed: Packed,
    axes: tuple[int, int],
    horizontal: np.ndarray,
    vertical: np.ndarray,
) -> Any:
    """Flip each sample of ``packed`` whose height and width are dimensions ``axes`` = (vertical
    axis, horizontal axis), consecutive, along each direction whose flag (``horizontal`` and
    ``vertical``: one per sample) is set; one launch. Returns one ``(N, ...)`` array when every
    shape agrees, else a :class:`Packed` batch."""
    vertical_axis, horizontal_axis = axes
    if horizontal_axis != vertical_axis + 1:
        raise ValueError(f"flip: the height and width axes must be consecutive, got {axes}")
    n = len(packed)
    shapes = packed.shapes
    out, _, batch = allocate(xp, shapes, packed.dtype)
    params = np.zeros((n, 7), dtype=np.int64)
    params[:, _OFFSET] = packed.offsets
    params[:, _OUTER] = np.prod(shapes[:, :vertical_axis], axis=1, dtype=np.int64)
    params[:, _HEIGHT] = shapes[:, vertical_axis]
    params[:, _WIDTH] = shapes[:, horizontal_axis]
    params[:, _INNER] = np.prod(shapes[:, horizontal_axis + 1 :], axis=1, dtype=np.int64)
    params[:, _HORIZONTAL] = np.asarray(horizontal, dtype=bool)
    params[:, _VERTICAL] = np.asarray(vertical, dtype=bool)
    max_elements = int(np.prod(shapes, axis=1, dtype=np.int64).max())
    launch(xp, _flip, n, max_elements, packed.data, out, to_device(xp, params))
    return batch
