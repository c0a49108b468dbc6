"""Separable resampling (nearest, antialiased linear, cubic and Lanczos), shared by ``resize`` and
``random_resized_crop``.

The linear, cubic and Lanczos weights reproduce Pillow's ``Image.resize(..., BILINEAR / BICUBIC /
LANCZOS)`` (libImaging/Resample.c): a triangle, Keys cubic (``a = -0.5``) or three-lobed Lanczos
filter whose support widens by the downscale factor, output pixel ``i`` centred on
``in0 + (i + 0.5) * scale``, taps clipped to the image and renormalised. Nearest takes the source
pixel ``floor(in0 + (i + 0.5) * scale)`` computed in float32, clamped to the image, as DALI's
``ResampleNN`` (its results equal DALI 2.4's). The array-module path (:func:`resample`) applies the
weights as two matrix products, so the GPU stage gives the host's Pillow result within one or two
grey levels.

Each axis takes the filter of ``min_filter`` where it shrinks and of ``mag_filter`` otherwise, as in
DALI; ``interp_type`` sets both.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels.filters import CUBIC, CUBIC_A, LANCZOS, LINEAR, NEAREST, REACH, axis_kind
from ..types import DALIInterpType

Box = tuple[float, float, float, float]

#: The interpolations the resizing operators take, and the filter each gives. In DALI's resize,
#: ``INTERP_TRIANGULAR`` is linear with the triangular antialiasing filter that ``antialias=True``
#: (the default) applies anyway, and DALI 2.4's results for the two are identical.
RESIZE_FILTERS = {
    DALIInterpType.INTERP_NN: NEAREST,
    DALIInterpType.INTERP_LINEAR: LINEAR,
    DALIInterpType.INTERP_TRIANGULAR: LINEAR,
    DALIInterpType.INTERP_CUBIC: CUBIC,
    DALIInterpType.INTERP_LANCZOS3: LANCZOS,
}


def cubic_weights(x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel (``a = -0.5``) at ``x`` (float64), Pillow's ``bicubic_filter``."""
    x = np.abs(x)
    near = ((CUBIC_A + 2.0) * x - (CUBIC_A + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * CUBIC_A
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def lanczos_weights(x: np.ndarray) -> np.ndarray:
    """The three-lobed Lanczos filter at ``x`` (float64), Pillow's ``lanczos_filter``: ``sinc(x) *
    sinc(x / 3)`` on ``[-3, 3)``, each sinc as ``sin(pi x) / (pi x)``."""

    def sinc(v: np.ndarray) -> np.ndarray:
        t = v * np.pi
        safe = np.where(v == 0.0, 1.0, t)
        return np.where(v == 0.0, 1.0, np.sin(safe) / safe)

    return np.where((x >= -3.0) & (x < 3.0), sinc(x) * sinc(x / 3.0), 0.0)


def filter_weights(kind: int, x: np.ndarray) -> np.ndarray:
    """Filter ``kind`` (:data:`LINEAR`, :data:`CUBIC` or :data:`LANCZOS`) at offsets ``x`` (float64)."""
    if kind == CUBIC:
        return cubic_weights(x)
    if kind == LANCZOS:
        return lanczos_weights(x)
    return np.maximum(0.0, 1.0 - np.abs(x))


def nearest_indices(in_size: int, out_size: int, start: float = 0.0, stop: float | None = None) -> np.ndarray:
    """The source index of each output position for nearest-neighbour resampling of input span
    ``[start, stop)``: ``floor(start + (i + 0.5) * scale)`` in float32, clamped to the axis (DALI's
    ``ResampleNN``)."""
    stop = float(in_size) if stop is None else float(stop)
    start32, stop32 = np.float32(start), np.float32(stop)
    scale = np.float32((stop32 - start32) / np.float32(out_size))
    centers = start32 + (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale
    return np.clip(np.floor(centers), 0, in_size - 1).astype(np.int64)


@functools.lru_cache(maxsize=64)
def resample_weights(
    in_size: int,
    out_size: int,
    start: float = 0.0,
    stop: float | None = None,
    antialias: bool = True,
    kind: int = LINEAR,
) -> tuple[int, np.ndarray]:
    """Weights mapping input span ``[start, stop)`` of an axis of ``in_size`` onto ``out_size``
    with filter ``kind`` (:data:`NEAREST`, :data:`LINEAR`, :data:`CUBIC` or :data:`LANCZOS`).

    Returns ``(first, matrix)``: ``matrix`` is ``(out_size, n)`` float32 and applies to input
    indices ``first .. first + n - 1``; like Pillow, taps may reach outside the span (never
    outside the axis). ``antialias=False`` keeps the filter at unit support (plain bilinear or
    bicubic). Each row is normalised by its float64 sum taken in tap order, so the kernels, which
    compute each output position's weights alone, give these float32 values exactly. Nearest rows
    hold a single 1 (:func:`nearest_indices`).
    """
    if kind == NEAREST:
        indices = nearest_indices(in_size, out_size, start, stop)
        first = int(indices.min())
        matrix = np.zeros((out_size, int(indices.max()) - first + 1), np.float32)
        matrix[np.arange(out_size), indices - first] = 1.0
        matrix.flags.writeable = False
        return first, matrix
    stop = float(in_size) if stop is None else float(stop)
    start, stop = float(np.float32(start)), float(np.float32(stop))
    scale = (stop - start) / out_size
    filterscale = max(scale, 1.0) if antialias else 1.0
    support = REACH[kind] * filterscale  # the filter's support, widened when downscaling
    centers = start + (np.arange(out_size) + 0.5) * scale
    lows = np.maximum(np.trunc(centers - support + 0.5).astype(np.int64), 0)
    highs = np.minimum(np.trunc(centers + support + 0.5).astype(np.int64), in_size)
    first, last = int(lows.min()), int(highs.max())
    taps = np.arange(first, last)
    offsets = (taps[None, :] - centers[:, None] + 0.5) / filterscale
    weights = filter_weights(kind, offsets)
    weights[(taps[None, :] < lows[:, None]) | (taps[None, :] >= highs[:, None])] = 0.0
    totals = np.cumsum(weights, axis=1)[:, -1:]  # tap by tap, as Pillow (and the resampling kernels) sum
    weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals != 0)
    matrix = weights.astype(np.float32)
    matrix.flags.writeable = False
    return first, matrix


def resample(
    xp: ModuleType,
    image: Any,
    width: int,
    height: int,
    box: Box | None = None,
    antialias: bool = True,
    dtype: np.dtype | None = None,
    filters: tuple[int, int] = (LINEAR, LINEAR),
) -> Any:
    """Resize HWC ``image`` (its ``box`` region, default all of it) to ``width`` x ``height``
    with ``filters`` = (min, mag) filter kinds (:func:`axis_kind` picks one per axis).

    Two passes in float32. For uint8 in and out the intermediate is rounded to uint8
    and the passes run in Pillow's order (:func:`vertical_first`), so both device paths agree.
    """
    in_h, in_w = image.shape[:2]
    x0, y0, x1, y1 = box if box is not None else (0, 0, in_w, in_h)
    fx, wx = resample_weights(in_w, width, x0, x1, antialias, axis_kind(filters, x1 - x0, width))
    fy, wy = resample_weights(in_h, height, y0, y1, antialias, axis_kind(filters, y1 - y0, height))
    wx, wy = xp.asarray(wx), xp.asarray(wy)
    out_dtype = np.dtype(dtype) if dtype is not None else np.dtype(image.dtype)
    pillow_rounding = np.dtype(image.dtype) == np.uint8 and out_dtype == np.uint8
    src = image[fy : fy + wy.shape[1], fx : fx + wx.shape[1]].astype(xp.float32)
    middle_dtype = np.dtype(np.uint8) if pillow_rounding else np.dtype(np.float32)
    out = _two_passes(xp, src, wx, wy, middle_dtype, bool(vertical_first(in_w, in_h, width, height)))
    return cast_to(xp, out, out_dtype)


def _two_passes(xp: ModuleType, src: Any, wx: Any, wy: Any, middle_dtype: np.dtype, rows_first: bool) -> Any:
    """``wy`` applied along the rows of float32 ``src`` and ``wx`` along its columns, the rows
    first when ``rows_first``, the intermediate cast to ``middle_dtype``."""
    if rows_first:
        middle = cast_to(xp, _along_rows(xp, wy, src), middle_dtype).astype(xp.float32, copy=False)
        return xp.matmul(wx, middle)
    middle = cast_to(xp, xp.matmul(wx, src), middle_dtype).astype(xp.float32, copy=False)
    return _along_rows(xp, wy, middle)


def vertical_first(in_w: Any, in_h: Any, out_w: Any, out_h: Any) -> Any:
    """Whether Pillow resamples rows before columns for this resize (sizes as ints, or arrays of
    them for a whole batch).

    Pillow 13 (python-pillow/Pillow#9549) runs the vertical pass first when the height shrinks
    markedly more than the width; this condition reproduces its choice (checked against Pillow 13
    on random sizes and boxes: whole-image sizes decide). Earlier releases always run the
    horizontal pass first (:func:`pillow_orders_passes`); with a uint8 intermediate the two orders
    differ by up to 6 grey levels with the cubic filter.
    """
    return pillow_orders_passes() & (out_h < in_h) & (2 * out_w - out_h > 2 * in_w - in_h)


@functools.cache
def pillow_orders_passes() -> bool:
    """Whether the installed Pillow picks the order of its two passes from the sizes (13 and
    later) rather than always running the horizontal one first (before 13).

    Found once per process by resizing a probe image both ways: the answer decides the order of the
    host array path and of the resampling kernels, so that both give the installed Pillow's
    result."""
    from PIL import Image

    rows, cols, channels = np.mgrid[:13, :9, :3]
    image = ((rows * 7919 + cols * 104729 + channels * 31) % 256).astype(np.uint8)  # 5 levels apart
    pillow = np.asarray(Image.fromarray(image).resize((10, 6), Image.Resampling.BICUBIC)).astype(np.int16)
    _, wx = resample_weights(9, 10, kind=CUBIC)
    _, wy = resample_weights(13, 6, kind=CUBIC)
    src = image.astype(np.float32)
    gaps = [
        np.abs(cast_to(np, _two_passes(np, src, wx, wy, np.dtype(np.uint8), first), np.dtype(np.uint8)) - pillow).max()
        for first in (True, False)
    ]
    return bool(gaps[0] < gaps[1])


def _along_rows(xp: ModuleType, weights: Any, image: Any) -> Any:
    """``weights`` (out, n) applied along axis 0 of ``image`` (n, ...)."""
    flat = xp.matmul(weights, image.reshape(image.shape[0], -1))
    return flat.reshape(weights.shape[0], *image.shape[1:])


def cast_to(xp: ModuleType, values: Any, dtype: np.dtype) -> Any:
    """Float ``values`` as ``dtype``: integers are rounded half up and clipped to the type's range."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = xp.clip(xp.floor(values + 0.5), info.min, info.max)
    return values.astype(dtype, copy=False)


def interp_kind(op: str, name: str, value: Any, accepted: dict[DALIInterpType, int]) -> int:
    """The filter kind of one interpolation argument: a member of ``accepted`` or its name (``"cubic"``,
    ``"INTERP_CUBIC"``); any other ``types.DALIInterpType`` raises naming it."""
    names = ", ".join(f"types.{m.name}" for m in accepted)
    if isinstance(value, str):
        by_name = {m.name.removeprefix("INTERP_"): m for m in DALIInterpType}
        member = by_name.get(value.upper().removeprefix("INTERP_"))
        if member is None:
            raise ArgumentError(f"{op}: {name} {value!r} is not supported (accepted: {names})")
        value = member
    if not isinstance(value, DALIInterpType):
        raise ArgumentError(f"{op}: {name} must be a types.DALIInterpType, got {value!r}")
    if value not in accepted:
        raise ArgumentError(f"{op}: {name} types.{value.name} is not supported (accepted: {names})")
    return accepted[value]


def interp_filters(
    op: str,
    accepted: dict[DALIInterpType, int],
    interp_type: Any = None,
    min_filter: Any = None,
    mag_filter: Any = None,
) -> tuple[int, int]:
    """``(min, mag)`` filter kinds from DALI's interpolation arguments: ``interp_type`` sets both
    (default linear), ``min_filter`` / ``mag_filter`` override one each, as in DALI."""
    both = LINEAR if interp_type is None else interp_kind(op, "interp_type", interp_type, accepted)
    low = both if min_filter is None else interp_kind(op, "min_filter", min_filter, accepted)
    high = both if mag_filter is None else interp_kind(op, "mag_filter", mag_filter, accepted)
    return low, high


def check_hwc(op: str, image: Any) -> None:
    """Raise a ValueError naming the shape unless ``image`` is a non-empty HWC array."""
    if image.ndim != 3 or min(image.shape[:2]) < 1:
        raise ValueError(f"{op}: expects a non-empty HWC image, got shape {tuple(image.shape)}")


def hwc_shapes(op: str, batch: Any) -> np.ndarray:
    """Every sample's ``(H, W, C)`` as an ``(n, 3)`` array (no call per sample for a packed batch or
    a batch array); a ValueError naming the shape unless each sample is a non-empty HWC image."""
    from ..kernels.launch import Packed, shapes_of

    if not isinstance(batch, Packed) and not hasattr(batch, "ndim"):
        for image in batch:  # a list may mix ranks: check each before stacking their shapes
            check_hwc(op, image)
    shapes = shapes_of(batch)
    bad = np.flatnonzero((shapes[:, :2] < 1).any(axis=1)) if shapes.shape[1] == 3 else [0]
    if len(bad):
        raise ValueError(f"{op}: expects a non-empty HWC image, got shape {tuple(shapes[bad[0]].tolist())}")
    return shapes


def pillow_applies(image: np.ndarray, dtype: np.dtype | None, antialias: bool) -> bool:
    """True when Pillow's resize gives the wanted result: uint8 in and out, antialiased."""
    return antialias and image.dtype == np.uint8 and (dtype is None or dtype == np.uint8)


def resize_nearest(image: np.ndarray, width: int, height: int, box: Box | None = None) -> np.ndarray:
    """Nearest-neighbour resize of HWC ``image`` (its ``box`` region) by gathering rows and columns:
    the pixels :func:`resample` computes with nearest filters, without arithmetic."""
    in_h, in_w = image.shape[:2]
    x0, y0, x1, y1 = box if box is not None else (0, 0, in_w, in_h)
    rows = nearest_indices(in_h, height, y0, y1)
    cols = nearest_indices(in_w, width, x0, x1)
    return np.ascontiguousarray(image[rows[:, None], cols[None, :]])
