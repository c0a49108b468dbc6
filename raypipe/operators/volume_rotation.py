"""Rotation of ``DHWC`` volumes about an axis, as DALI's ``rotate`` of 3-D data computes it.

The axis is ``(x, y, z)`` (width, height, depth), need not be unit length, and the angle turns
counter-clockwise about it seen from its tip (Rodrigues' formula). Without a size given the output
holds the whole rotated volume: along each output axis the ceiling of the rotated extent, one larger
where its parity differs from that of the input axis it mostly comes from, so the centres stay on a
voxel grid. Each output voxel's centre maps back to the input, centres aligned; linear sampling
weighs the 8 nearest voxels (nearest: the voxel under the mapped centre). Neighbours outside the
volume take ``fill_value``, or, left out, the nearest border voxel's value; integer results are
rounded and saturated as DALI's conversions (:func:`~.cast.saturate_cast`). These are DALI 2.4's
shapes and values (floats within float32 rounding). Pure functions over ``xp`` (numpy or cupy),
sampling a slab of output slices at a time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..kernels.filters import NEAREST
from .cast import saturate_cast

#: output depth slices sampled at once: bounds the coordinate arrays of a large volume
_SLAB_VOXELS = 1 << 21


def rotation_matrix(axis: Sequence[float], angle: float) -> np.ndarray:
    """The 3x3 matrix turning ``(x, y, z)`` points by ``angle`` degrees about ``axis``; ValueError
    for an axis that is not three finite numbers of non-zero length."""
    vector = np.asarray(axis, dtype=np.float64).reshape(-1)
    norm = float(np.linalg.norm(vector)) if vector.size == 3 else 0.0
    if vector.size != 3 or not np.all(np.isfinite(vector)) or norm == 0.0:
        raise ValueError(f"rotate: axis must be three numbers (x, y, z) of non-zero length, got {list(vector)}")
    x, y, z = vector / norm
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    theta = math.radians(angle)
    return np.eye(3) + math.sin(theta) * cross + (1.0 - math.cos(theta)) * (cross @ cross)


def rotated_shape(depth: int, height: int, width: int, matrix: np.ndarray) -> tuple[int, int, int]:
    """``(depth, height, width)`` of the smallest voxel-centred canvas holding the rotated volume."""
    extents = np.array([width, height, depth], dtype=np.float64)
    rotated = np.abs(matrix) @ extents
    sizes = []
    for row, extent in zip(np.abs(matrix), rotated):
        size = math.ceil(extent - 1e-6)
        source = int(extents[int(np.argmax(row))])
        sizes.append(size + (size - source) % 2)
    return sizes[2], sizes[1], sizes[0]


def rotate_volume(
    xp: ModuleType,
    volume: Any,
    out_shape: tuple[int, int, int],
    matrix: np.ndarray,
    fill_value: float | None,
    kind: int,
    out_dtype: np.dtype,
) -> Any:
    """``volume`` (DHWC) rotated by ``matrix`` into ``out_shape`` (depth, height, width), as
    ``out_dtype`` (see the module's docstring)."""
    depth, height, width, channels = volume.shape
    out_d, out_h, out_w = out_shape
    out = xp.empty((out_d, out_h, out_w, channels), dtype=out_dtype)
    values = volume.astype(xp.float64)
    inverse = xp.asarray(matrix)  # rows of the turn; points times it turn them back
    slab = max(1, _SLAB_VOXELS // max(1, out_h * out_w))
    for first in range(0, out_d, slab):
        count = min(slab, out_d - first)
        z, y, x = xp.meshgrid(
            xp.arange(first, first + count, dtype=xp.float64) + 0.5 - out_d / 2,
            xp.arange(out_h, dtype=xp.float64) + 0.5 - out_h / 2,
            xp.arange(out_w, dtype=xp.float64) + 0.5 - out_w / 2,
            indexing="ij",
        )
        points = xp.stack([x, y, z], axis=-1) @ inverse
        source = (points[..., 0] + width / 2, points[..., 1] + height / 2, points[..., 2] + depth / 2)
        sampled = _sample(xp, values, source, fill_value, kind)
        out[first : first + count] = saturate_cast(xp, sampled, np.dtype(out_dtype), overwrite=True)
    return out


def _sample(xp: ModuleType, values: Any, source: tuple[Any, Any, Any], fill_value: float | None, kind: int) -> Any:
    """``values`` (float64 DHWC) at the source points ``(x, y, z)``: nearest or trilinear."""
    depth, height, width, _ = values.shape
    limits = (width, height, depth)
    if kind == NEAREST:
        index = [xp.floor(s).astype(xp.int64) for s in source]
        return _gather(xp, values, index, limits, fill_value)
    low = [xp.floor(s - 0.5) for s in source]
    frac = [s - 0.5 - lo for s, lo in zip(source, low)]
    low = [lo.astype(xp.int64) for lo in low]
    total = 0.0
    for step in itertools.product((0, 1), repeat=3):
        weight = 1.0
        for offset, part in zip(step, frac):
            weight = weight * (part if offset else 1.0 - part)
        index = [lo + offset for lo, offset in zip(low, step)]
        total = total + _gather(xp, values, index, limits, fill_value) * weight[..., None]
    return total


def _gather(xp: ModuleType, values: Any, index: list[Any], limits: tuple[int, int, int], fill: float | None) -> Any:
    """``values`` at integer ``(x, y, z)`` voxels, clamped to the volume; ``fill`` outside it when given."""
    x, y, z = (xp.clip(i, 0, n - 1) for i, n in zip(index, limits))
    picked = values[z, y, x]
    if fill is None:
        return picked
    inside = xp.ones(index[0].shape, dtype=bool)
    for i, n in zip(index, limits):
        inside &= (i >= 0) & (i < n)
    return xp.where(inside[..., None], picked, fill)
