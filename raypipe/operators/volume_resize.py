"""3-D ``resize``: volumes (``DHWC``, ``CDHW``, ``DHW`` or any layout naming ``D``, ``H`` and ``W``)
resized along depth, height and width with the 2-D resize's filters (:mod:`.resample`: nearest,
antialiased linear, cubic), one separable float32 pass per axis.

Sizes are ``size`` = ``[d, h, w]`` (static or per sample) or ``resize_x``/``resize_y``/``resize_z``.
As in DALI: in ``"default"`` mode a missing extent is scaled by the geometric mean of the given
extents' scales, ``"stretch"`` keeps it, ``"not_larger"``/``"not_smaller"`` scale every extent by the
smallest/largest given scale; sizes round half up and are at least 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..kernels.filters import NEAREST, axis_kind
from .resample import cast_to, resample_weights


def volume_axes(layout: str, ndim: int) -> tuple[int, int, int] | None:
    """The ``(D, H, W)`` axes of a sample of ``ndim`` dimensions, or None when it is not a volume:
    from the layout when it names them, else ``DHWC`` for 4-D samples without a layout."""
    if layout and len(layout) == ndim:
        if all(name in layout for name in "DHW"):
            return layout.index("D"), layout.index("H"), layout.index("W")
        return None
    return (0, 1, 2) if not layout and ndim == 4 else None


#: How ``volume_size`` rounds an extent: DALI's ``size_rounding`` policies (``round``: half up).
ROUNDINGS = {"round": lambda e: np.floor(e + np.float32(0.5)), "truncate": np.floor, "ceil": np.ceil}


def volume_size(
    in_size: Sequence[int],
    wanted: Sequence[float | None],
    mode: str = "default",
    rounding: str = "round",
    *,
    roi: Sequence[tuple[float, float]] | None = None,
    alignment: Sequence[float] | None = None,
    subpixel: bool = True,
    max_size: Sequence[float | None] | None = None,
) -> tuple[tuple[int, ...], tuple[tuple[float, float], ...]]:
    """The output ``(d, h, w)`` of a volume of ``in_size`` (or of any number of axes) for the ``wanted``
    extents (None: unset), and the source window ``(start, stop)`` of each axis.

    As DALI computes them: the scales are float32 quotients of the wanted extents and the regions
    of interest (``roi``: ``(start, stop)`` per axis, the whole axis by default, ``start < stop``), an
    extent computed from a scale is held as float32, and ``max_size`` (per axis, None: no limit)
    lowers the common scale of ``"not_larger"``/``"not_smaller"`` and caps each extent otherwise.
    Where rounding (:data:`ROUNDINGS`) changes an extent and ``subpixel`` holds, the window is the
    span the rounded size covers at that scale, placed so that the point at ``alignment`` (0: the
    region's start, 0.5 its centre, the default, 1 its end) keeps its place; otherwise it is the
    whole region."""
    f32 = np.float32
    roi = roi if roi is not None else [(0.0, float(n)) for n in in_size]
    alignment = alignment if alignment is not None else [0.5] * len(in_size)
    limits = max_size if max_size is not None else [None] * len(in_size)
    sizes_in = [f32(stop) - f32(start) for start, stop in roi]
    scales = {k: f32(w) / sizes_in[k] for k, w in enumerate(wanted) if w is not None}
    exact = list(sizes_in)
    if scales and mode in ("not_larger", "not_smaller"):
        final = min(scales.values()) if mode == "not_larger" else max(scales.values())
        capped = [f32(limit) / n for limit, n in zip(limits, sizes_in) if limit is not None]
        if capped and min(capped) < final:
            final = min(capped)
            scales = {k: final for k in scales}
        exact = [
            f32(wanted[k]) if scales.get(k) == final and wanted[k] is not None and f32(wanted[k]) / n == final
            else f32(float(n) * float(final))
            for k, n in enumerate(sizes_in)
        ]  # fmt: skip
    elif scales:
        mean = math.prod(float(v) for v in scales.values()) ** (1.0 / len(scales))
        keep = mode == "stretch"
        exact = [f32(w) if w is not None else (n if keep else f32(float(n) * mean)) for w, n in zip(wanted, sizes_in)]
    if mode not in ("not_larger", "not_smaller"):
        exact = [e if limit is None else min(e, f32(limit)) for e, limit in zip(exact, limits)]
    sizes = tuple(max(1, int(ROUNDINGS[rounding](e))) for e in exact)
    windows = []
    for n, e, size, (start, stop), align in zip(sizes_in, exact, sizes, roi, alignment):
        if e == size or not subpixel:
            windows.append((float(start), float(stop)))
            continue
        span = f32(f32(size) / (e / n))
        anchor = f32((1.0 - align) * start + align * stop)
        first = f32(anchor - f32(align) * span)
        windows.append((float(first), float(first + span)))
    return sizes, tuple(windows)


def nearest_positions(size: int, start: float, stop: float, extent: int, walk: bool) -> np.ndarray:
    """The source index of each of ``size`` outputs over ``[start, stop)`` of an axis of ``extent``,
    floored and clamped, with sample centres computed in float32 as DALI's volume resampling does:
    one step added at a time along the depth and height axes (``walk``), ``start + (i + 0.5) * step``
    along the width."""
    step = np.float32((stop - start) / size)
    if walk:
        increments = np.full(size, step, np.float32)
        increments[0] = np.float32(start) + np.float32(0.5) * step
        centres = np.add.accumulate(increments, dtype=np.float32)
    else:
        centres = np.float32(start) + (np.arange(size, dtype=np.float32) + np.float32(0.5)) * step
    return np.clip(np.floor(centres), 0, extent - 1).astype(np.int64)


def resize_volume(
    xp: ModuleType,
    volume: Any,
    axes: tuple[int, ...],
    out_size: tuple[int, ...],
    filters: tuple[int, int],
    antialias: bool,
    dtype: np.dtype | None,
    windows: Sequence[tuple[float, float]] | None = None,
) -> Any:
    """``volume`` resized to ``out_size`` along its ``axes`` (D, H, W; or one or two axes, resampled as
    a 2-D resize resamples its axes) from the source ``windows``
    (the whole axes by default), as ``dtype`` (the input's type by default; integers rounded half up
    and saturated). Nearest-neighbour axes gather elements of the input's type; other axes filter
    in float32."""
    out = volume
    for k, (axis, size) in enumerate(zip(axes, out_size)):
        extent = volume.shape[axis]
        start, stop = windows[k] if windows is not None else (0.0, float(extent))
        if size == extent and (start, stop) == (0.0, float(extent)):  # every filter keeps such an axis
            continue
        kind = axis_kind(filters, stop - start, size)
        if kind == NEAREST:
            positions = nearest_positions(size, start, stop, extent, walk=len(axes) == 3 and k < 2)
            out = xp.take(out, xp.asarray(positions), axis=axis)
            continue
        first, weights = resample_weights(extent, size, start, stop, antialias, kind)
        taken = xp.take(out.astype(xp.float32, copy=False), xp.arange(first, first + weights.shape[1]), axis=axis)
        moved = xp.moveaxis(taken, axis, 0)
        flat = xp.matmul(xp.asarray(weights), moved.reshape(moved.shape[0], -1))
        out = xp.moveaxis(flat.reshape(size, *moved.shape[1:]), 0, axis)
    return cast_to(xp, xp.ascontiguousarray(out), np.dtype(dtype) if dtype is not None else np.dtype(volume.dtype))
