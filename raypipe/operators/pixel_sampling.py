"""Pixels of an HWC image at given source points, as OpenCV's geometric warps read them.

:class:`Pixels` gathers an image's pixels at integer points, those outside it by a border rule
(OpenCV's ``constant``, ``replicate``, ``reflect``, ``reflect_101``, ``wrap``); :func:`sample`
interpolates at float32 points (nearest: the rounded point, ties to even; linear: along x then y in
float32 steps, rounded to nearest for integer types). ``warp_perspective`` and ``remap`` share them.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..types import DALIInterpType

BORDERS = ("constant", "replicate", "reflect", "reflect_101", "wrap")
#: points at infinity or beyond any border are moved here: far outside, and still an int32
_LIMIT = np.float32(2**30)


_INTERPS = {DALIInterpType.INTERP_NN: "nearest", DALIInterpType.INTERP_LINEAR: "linear"}


def interpolation(op: str, name: str, value: Any) -> str:
    """``"nearest"`` or ``"linear"`` for DALI's ``INTERP_NN`` or ``INTERP_LINEAR`` (argument ``name``);
    an error naming ``op`` for another."""
    if value not in _INTERPS:
        raise ArgumentError(
            f"{op}: {name} must be INTERP_NN or INTERP_LINEAR here, got {value!r} (DALI's INTERP_CUBIC is not here)"
        )
    return _INTERPS[DALIInterpType(value)]


def centre_origin(op: str, pixel_origin: Any) -> bool:
    """Whether ``pixel_origin`` is ``"center"`` (OpenCV's) rather than ``"corner"`` (DALI's default)."""
    if pixel_origin not in ("corner", "center"):
        raise ArgumentError(f"{op}: pixel_origin must be 'corner' or 'center', got {pixel_origin!r}")
    return pixel_origin == "center"


def border_index(xp: ModuleType, p: Any, n: int, border: str) -> Any:
    """Source indices for positions ``p`` (integers) along an axis of ``n`` pixels by OpenCV's
    border rules; for ``constant``, the positions clipped (the caller masks them)."""
    if border in ("constant", "replicate"):
        return xp.clip(p, 0, n - 1)
    if border == "wrap":
        return p % n
    if border == "reflect":  # fedcba|abcdef|fedcba
        q = p % (2 * n)
        return xp.where(q >= n, 2 * n - 1 - q, q)
    if n == 1:  # reflect_101: gfedcb|abcdefgh|gfedcba
        return xp.zeros_like(p)
    q = p % (2 * n - 2)
    return xp.where(q >= n, 2 * n - 2 - q, q)


class Pixels:
    """An HWC image's (or an ``(n, H, W, C)`` batch's) pixels at any integer points, those outside it
    by the border rule: each axis's source indices found once, the pixels gathered from the flat
    image in one ``take``; a constant border pads the image by one pixel of the fill value and
    clamps the points into the padding. A batch's points carry a leading sample axis."""

    def __init__(self, xp: ModuleType, src: Any, border: str, fill: np.ndarray):
        self.xp = xp
        self.border = border
        batch = src if src.ndim == 4 else src[None]
        count, self.rows_count, self.cols, channels = batch.shape
        if border == "constant":
            padded = xp.empty((count, self.rows_count + 2, self.cols + 2, channels), src.dtype)
            padded[...] = xp.asarray(fill.astype(src.dtype))
            padded[:, 1:-1, 1:-1] = batch
            batch = padded
        self.stride = batch.shape[2]
        self.flat = batch.reshape(-1, channels)
        # each sample's first flat index (a batch's points are shaped (n, ...))
        self.base = xp.arange(count).reshape(-1, 1, 1) * (batch.shape[1] * batch.shape[2]) if src.ndim == 4 else 0

    def columns(self, ix: Any) -> Any:
        """Source columns (in the padded image for a constant border) of integer points ``ix``."""
        return self._axis(ix, self.cols)

    def rows(self, iy: Any) -> Any:
        """Source rows, as :meth:`columns`."""
        return self._axis(iy, self.rows_count)

    def _axis(self, p: Any, n: int) -> Any:
        if self.border == "constant":
            return self.xp.clip(p + 1, 0, n + 1)
        return border_index(self.xp, p, n, self.border)

    def gather(self, rows: Any, cols: Any) -> Any:
        """The pixels at source ``rows`` and ``cols`` (from :meth:`rows` and :meth:`columns`)."""
        return self.xp.take(self.flat, self.base + rows * self.stride + cols, axis=0)


def sample(xp: ModuleType, pixels: Pixels, sx: Any, sy: Any, interp: str, dtype: np.dtype) -> Any:
    """The image's values (of ``dtype``, shaped as the points plus channels) at float32 source
    points ``sx``, ``sy``: ``"nearest"`` or ``"linear"`` interpolation."""
    sx = xp.nan_to_num(xp.clip(sx, -_LIMIT, _LIMIT), nan=-_LIMIT)
    sy = xp.nan_to_num(xp.clip(sy, -_LIMIT, _LIMIT), nan=-_LIMIT)
    if interp == "nearest":
        return pixels.gather(pixels.rows(xp.rint(sy).astype(xp.int32)), pixels.columns(xp.rint(sx).astype(xp.int32)))
    ix, iy = xp.floor(sx), xp.floor(sy)
    fx, fy = (sx - ix)[..., None], (sy - iy)[..., None]
    ix, iy = ix.astype(xp.int32), iy.astype(xp.int32)
    cols = pixels.columns(ix), pixels.columns(ix + 1)
    rows = pixels.rows(iy), pixels.rows(iy + 1)
    p00, p01, p10, p11 = (pixels.gather(r, c).astype(xp.float32) for r in rows for c in cols)
    top = p00 + fx * (p01 - p00)  # float32 steps (OpenCV fuses each multiply-add: ties may round apart)
    bottom = p10 + fx * (p11 - p10)
    out = top + fy * (bottom - top)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        out = xp.clip(xp.rint(out), info.min, info.max)
    return out.astype(dtype)
