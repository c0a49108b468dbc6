"""3-D ``resize``: volumes (``DHWC``, ``CDHW``, ``DHW`` or any layout naming ``D``, ``H`` and ``W``)
resized along depth, height and width with the 2-D resize's filters (:mod:`.resample`: nearest,
antialiased linear, cubic), one separable float32 pass per axis.

Sizes are ``size`` = ``[d, h, w]`` (static or per sample) or ``resize_x``/``resize_y``/``resize_z``.
As in DALI: in ``"default"`` mode a missing extent is scaled by the mean of the given extents'
scales, ``"stretch"`` keeps it, ``"not_larger"``/``"not_smaller"`` scale every extent by the
smallest/largest given scale; sizes round half up and are at least 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..kernels.filters import axis_kind
from .resample import cast_to, resample_weights


def volume_axes(layout: str, ndim: int) -> tuple[int, int, int] | None:
    """The ``(D, H, W)`` axes of a sample of ``ndim`` dimensions, or None when it is not a volume:
    from the layout when it names them, else ``DHWC`` for 4-D samples without a layout."""
    if layout and len(layout) == ndim:
        if all(name in layout for name in "DHW"):
            return layout.index("D"), layout.index("H"), layout.index("W")
        return None
    return (0, 1, 2) if not layout and ndim == 4 else None


def volume_size(in_size: Sequence[int], wanted: Sequence[float | None], mode: str = "default") -> tuple[int, int, int]:
    """The output ``(d, h, w)`` of a volume of ``in_size`` for the ``wanted`` extents (None: unset)."""
    scales = [w / n for w, n in zip(wanted, in_size) if w is not None]
    if not scales:
        return tuple(int(n) for n in in_size)
    if mode == "not_larger" or mode == "not_smaller":
        scale = min(scales) if mode == "not_larger" else max(scales)
        sizes = [n * scale for n in in_size]
    else:
        mean = sum(scales) / len(scales)
        keep = mode == "stretch"
        sizes = [w if w is not None else (n if keep else n * mean) for w, n in zip(wanted, in_size)]
    return tuple(max(1, int(np.floor(s + 0.5))) for s in sizes)


def resize_volume(
    xp: ModuleType,
    volume: Any,
    axes: tuple[int, int, int],
    out_size: tuple[int, int, int],
    filters: tuple[int, int],
    antialias: bool,
    dtype: np.dtype | None,
) -> Any:
    """``volume`` resized to ``out_size`` along its ``axes`` (D, H, W), as ``dtype`` (the input's
    type by default; integers rounded half up and saturated)."""
    out = volume.astype(xp.float32)
    for axis, size in zip(axes, out_size):
        extent = volume.shape[axis]
        if size == extent:  # every filter maps an axis onto itself unchanged
            continue
        first, weights = resample_weights(extent, size, 0.0, None, antialias, axis_kind(filters, extent, size))
        taken = xp.take(out, xp.arange(first, first + weights.shape[1]), axis=axis)
        moved = xp.moveaxis(taken, axis, 0)
        flat = xp.matmul(xp.asarray(weights), moved.reshape(moved.shape[0], -1))
        out = xp.moveaxis(flat.reshape(size, *moved.shape[1:]), 0, axis)
    return cast_to(xp, xp.ascontiguousarray(out), np.dtype(dtype) if dtype is not None else np.dtype(volume.dtype))
