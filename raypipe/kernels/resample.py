"""Batched resampling (``resize``, ``random_resized_crop``: nearest, antialiased linear and cubic)
as two launches.

The host path (:func:`raypipe.operators.resample.resample`) applies Pillow's triangle or cubic
filter (or DALI's nearest-neighbour pick) as two separable passes; so do these kernels, each pass
one launch over the whole batch, in the order Pillow picks for each sample (:func:`vertical_first`),
with the same uint8 rounding of the intermediate for uint8 images and the same final rounding
(``floor(x + 0.5)``, saturated).

The filter weights are computed inside the kernels, per output position, from the sample's input
extent, output extent and box, with the arithmetic of :func:`resample_weights` (float64 centres,
tap ranges and filter values, summed in tap order, normalised, then rounded to float32): the
same float32 weights, and no table built on the host or uploaded, whatever sizes the random crops
take. Results differ from the host path only in the order of float32 accumulation. All per-sample
parameters are built as arrays for the whole batch: the host work of a batch does not grow with
its size.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda

from ..operators.resample import vertical_first
from .convert import round_half_up
from .filters import CUBIC, CUBIC_A, LANCZOS, LINEAR, NEAREST, REACH
from .launch import Packed, allocate, launch, store_rule, to_device

# Columns of a pass's per-sample integer parameters.
_SRC_OFF, _SRC_W, _DST_OFF, _DST_H, _DST_W, _CHANNELS, _AXIS, _CROSS, _TAP_BASE, _IN_SIZE = range(10)
# Columns of a pass's per-sample filter parameters (float64): the box start, the scale (input per
# output step), the filter scale (the widening of the filter when downscaling) and the filter kind.
_START, _SCALE, _SUPPORT, _KIND = range(4)
_ROWS, _COLS = 0, 1  # the axis a pass resamples


if numba.config.ENABLE_CUDASIM:

    @cuda.jit(device=True)
    def _product(x, y):
        """``x * y`` in float64 (the simulator computes it as the host does)."""
        return x * y

    @cuda.jit(device=True)
    def _product32(x, y):
        """``x * y`` in float32."""
        return numba.float32(x) * numba.float32(y)

else:
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def _product(x, y):
        """``x * y`` rounded on its own: NVVM contracts a multiply and an add into one FMA by
        default, which would move the centres off the host's float64 values."""
        return libdevice.dmul_rn(x, y)

    @cuda.jit(device=True)
    def _product32(x, y):
        """``x * y`` in float32, rounded on its own (no FMA with the add that follows)."""
        return libdevice.fmul_rn(numba.float32(x), numba.float32(y))


@cuda.jit(device=True)
def _tap_range(center, support, in_size):
    """The source indices ``[low, high)`` one output position reads, clipped to the axis."""
    low = int(center - support + 0.5)
    if low < 0:
        low = 0
    high = int(center + support + 0.5)
    if high > in_size:
        high = in_size
    return low, high


@cuda.jit(device=True)
def _weight(kind, x):
    """The filter at ``x`` (float64): Keys' cubic for ``CUBIC``, Lanczos for ``LANCZOS``, else the
    triangle. Each product is rounded on its own (:func:`_product`), as numpy computes
    :func:`cubic_weights` on the host (Lanczos's sines are the device's, within an ulp of the host's)."""
    if kind == LANCZOS:
        if x < -3.0 or x >= 3.0:
            return 0.0
        return _sinc(x) * _sinc(x / 3.0)
    x = abs(x)
    if kind == CUBIC:
        if x < 1.0:
            return _product(_product(_product(CUBIC_A + 2.0, x) - (CUBIC_A + 3.0), x), x) + 1.0
        if x < 2.0:
            return _product(_product(_product(x - 5.0, x) + 8.0, x) - 4.0, CUBIC_A)
        return 0.0
    return max(0.0, 1.0 - x)


@cuda.jit(device=True)
def _sinc(x):
    """``sin(pi x) / (pi x)``, 1 at 0 (Pillow's ``sinc_filter``)."""
    if x == 0.0:
        return 1.0
    t = _product(x, math.pi)
    return math.sin(t) / t


@cuda.jit(device=True)
def _nearest(start, scale, pos, in_size):
    """The source index of output position ``pos`` for nearest resampling: ``floor(start + (pos +
    0.5) * scale)`` in float32, clamped to the axis (DALI's ``ResampleNN``)."""
    center = numba.float32(start) + _product32(numba.float32(pos) + numba.float32(0.5), scale)
    t = int(math.floor(center))
    if t < 0:
        return 0
    if t > in_size - 1:
        return in_size - 1
    return t


@cuda.jit
def _resample_pass(src, dst, params, filters, mode, lo, hi):
    """One separable pass over a batch of HWC samples: along rows (``_ROWS``, each output row a
    weighted sum of source rows) or columns. ``_CROSS`` shifts the other axis into the source and
    ``_TAP_BASE`` is the axis index of the source's first row or column."""
    sample = cuda.blockIdx.y
    src_off = params[sample, _SRC_OFF]
    row_pitch = params[sample, _SRC_W] * params[sample, _CHANNELS]
    dst_off = params[sample, _DST_OFF]
    dst_w = params[sample, _DST_W]
    channels = params[sample, _CHANNELS]
    axis = params[sample, _AXIS]
    cross = params[sample, _CROSS]
    tap_base = params[sample, _TAP_BASE]
    in_size = params[sample, _IN_SIZE]
    start = filters[sample, _START]
    scale = filters[sample, _SCALE]
    support = filters[sample, _SUPPORT]
    kind = int(filters[sample, _KIND])
    reach = support * (2.0 if kind == CUBIC else (3.0 if kind == LANCZOS else 1.0))
    total = params[sample, _DST_H] * dst_w * channels
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < total:
        c = i % channels
        x = (i // channels) % dst_w
        y = i // (channels * dst_w)
        if axis == _COLS:
            pos = x
            base = src_off + (y + cross) * row_pitch + c
            step = channels
        else:
            pos = y
            base = src_off + (x + cross) * channels + c
            step = row_pitch
        acc = numba.float32(0)
        if kind == NEAREST:
            t = _nearest(start, scale, pos, in_size)
            acc = numba.float32(src[base + (t - tap_base) * step])
        else:
            center = start + _product(pos + 0.5, scale)
            low, high = _tap_range(center, reach, in_size)
            norm = 0.0
            for t in range(low, high):
                norm += _weight(kind, (t - center + 0.5) / support)
            if norm != 0.0:
                for t in range(low, high):
                    weight = _weight(kind, (t - center + 0.5) / support)
                    acc += numba.float32(weight / norm) * numba.float32(src[base + (t - tap_base) * step])
        dst[dst_off + i] = round_half_up(acc, mode, lo, hi)
        i += cuda.gridDim.x * cuda.blockDim.x


def axis_filters(
    in_size: np.ndarray,
    out_size: np.ndarray,
    start: np.ndarray,
    stop: np.ndarray,
    antialias: bool,
    filters: tuple[int, int] = (LINEAR, LINEAR),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sample along one axis: ``(filters, first, span)`` and the float64 start, as
    :func:`raypipe.operators.resample.resample_weights` computes them, for arrays of samples.

    ``filters`` (in) is the (min, mag) filter kinds; the returned ``filters`` is ``(n, 4)`` (start,
    scale, filter scale, kind); source indices ``[first, first + span)`` hold every tap any output
    position reads."""
    start32 = np.asarray(start, np.float32)
    stop32 = np.asarray(stop, np.float32)
    start, stop = start32.astype(np.float64), stop32.astype(np.float64)
    out_size = np.asarray(out_size, np.int64)
    in_size = np.asarray(in_size, np.int64)
    # the min filter where the axis shrinks (filters.axis_kind over the whole batch at once)
    kinds = np.where(out_size < stop - start, filters[0], filters[1]).astype(np.int64).reshape(-1)
    scale = (stop - start) / out_size
    support = np.maximum(scale, 1.0) if antialias else np.ones_like(scale)
    reach = support * np.array([REACH[LINEAR], REACH[LINEAR], REACH[CUBIC], REACH[LANCZOS]])[kinds]
    first_center = start + 0.5 * scale
    last_center = start + (out_size - 1 + 0.5) * scale
    first = np.maximum(np.trunc(first_center - reach + 0.5).astype(np.int64), 0)
    last = np.minimum(np.trunc(last_center + reach + 0.5).astype(np.int64), in_size)
    # nearest: the picks of the first and last positions (float32, as the kernel computes them)
    scale32 = ((stop32 - start32) / out_size.astype(np.float32)).astype(np.float32)
    near = kinds == NEAREST
    pick = [
        np.clip(np.floor(start32 + (np.float32(p) + np.float32(0.5)) * scale32), 0, in_size - 1).astype(np.int64)
        for p in (np.zeros_like(out_size), out_size - 1)
    ]
    first = np.where(near, pick[0], first)
    last = np.where(near, pick[1] + 1, last)
    filter_scale = np.where(near, scale32.astype(np.float64), scale)
    table = np.stack([start, filter_scale, support, kinds.astype(np.float64)], axis=1)
    return table, first, last - first, start


def resample_batch(
    xp: ModuleType,
    packed: Packed,
    sizes: np.ndarray,
    boxes: np.ndarray | None = None,
    antialias: bool = True,
    dtype: np.dtype | None = None,
    filters: tuple[int, int] = (LINEAR, LINEAR),
) -> Any:
    """Resize each HWC sample of ``packed`` (its ``boxes[i]`` = (x0, y0, x1, y1) region, default
    all of it) to ``sizes[i]`` = (width, height) with ``filters`` = (min, mag) filter kinds, as the
    host ``resample`` does, in two launches.

    ``sizes`` is ``(n, 2)`` and ``boxes`` ``(n, 4)``. Returns ``dtype`` (default: the input's)
    samples, one ``(N, H, W, C)`` array when every output shape agrees, else a :class:`Packed`
    batch. ``dtype`` must have a :func:`store_rule`.
    """
    n = len(packed)
    out_dtype = np.dtype(dtype) if dtype is not None else packed.dtype
    rule = store_rule(out_dtype)
    if rule is None:
        raise ValueError(f"resample: kernels do not write {out_dtype}")
    pillow_rounding = packed.dtype == np.uint8 and out_dtype == np.uint8
    mid_dtype = np.dtype(np.uint8) if pillow_rounding else np.dtype(np.float32)
    in_h, in_w, channels = (packed.shapes[:, k] for k in range(3))
    sizes = np.asarray(sizes, dtype=np.int64).reshape(n, 2)
    width, height = sizes[:, 0], sizes[:, 1]
    if boxes is None:
        boxes = np.stack([np.zeros(n), np.zeros(n), in_w, in_h], axis=1)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(n, 4)
    fx, first_x, span_x, _ = axis_filters(in_w, width, boxes[:, 0], boxes[:, 2], antialias, filters)
    fy, first_y, span_y, _ = axis_filters(in_h, height, boxes[:, 1], boxes[:, 3], antialias, filters)
    rows_first = vertical_first(in_w, in_h, width, height)  # Pillow's order, per sample
    mid_h = np.where(rows_first, height, span_y)
    mid_w = np.where(rows_first, span_x, width)
    mid, mid_offsets, _ = allocate(xp, np.stack([mid_h, mid_w, channels], axis=1), mid_dtype)
    out, out_offsets, batch = allocate(xp, np.stack([height, width, channels], axis=1), out_dtype)
    zeros = np.zeros(n, np.int64)
    first_pass = np.stack(
        [
            packed.offsets,
            in_w,
            mid_offsets,
            mid_h,
            mid_w,
            channels,
            np.where(rows_first, _ROWS, _COLS),
            np.where(rows_first, first_x, first_y),
            zeros,
            np.where(rows_first, in_h, in_w),
        ],
        axis=1,
    )
    second_pass = np.stack(
        [
            mid_offsets,
            mid_w,
            out_offsets,
            height,
            width,
            channels,
            np.where(rows_first, _COLS, _ROWS),
            zeros,
            np.where(rows_first, first_x, first_y),
            np.where(rows_first, in_w, in_h),
        ],
        axis=1,
    )
    params = to_device(xp, np.stack([first_pass, second_pass]))
    filters = to_device(xp, np.stack([np.where(rows_first[:, None], fy, fx), np.where(rows_first[:, None], fx, fy)]))
    mid_max = int((mid_h * mid_w * channels).max())
    out_max = int((height * width * channels).max())
    launch(xp, _resample_pass, n, mid_max, packed.data, mid, params[0], filters[0], *store_rule(mid_dtype))
    launch(xp, _resample_pass, n, out_max, mid, out, params[1], filters[1], *rule)
    return batch
