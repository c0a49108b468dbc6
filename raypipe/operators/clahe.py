"""``clahe``: contrast-limited adaptive histogram equalization of uint8 images, as DALI 2.4's CPU
operator (which runs OpenCV's ``CLAHE`` and, for RGB with ``luma_only``, OpenCV's 8-bit Lab
conversion), reproduced in numpy so that OpenCV is not needed.

The image is cut into ``tiles_y`` x ``tiles_x`` tiles; where its size is not a multiple of the grid,
the tiles are cut from a copy padded at the bottom and right (OpenCV's ``BORDER_REFLECT_101``) by
``tiles - size % tiles`` rows and columns (a whole extra tile's worth when the other side divides).
Each tile's 256-bin histogram is clipped at ``max(int(clip_limit * tile_area / 256), 1)`` (no clip
when ``clip_limit <= 0``; a limit past the int range is 1, as OpenCV's conversion gives), the excess
spread evenly with the remainder one per bin every ``256 // remainder`` bins from 0; the tile's map
is ``round(cdf * float32(255 / tile_area))``. Each pixel blends the maps of the four nearest tile
centres bilinearly in float32 (OpenCV's weights and order of operations) and rounds to nearest even.

Gray images (``HWC`` with one channel; also ``HW``, which DALI refuses) are equalized as they are;
RGB with ``luma_only=False`` channel by channel. With ``luma_only=True`` (the default) RGB goes to
OpenCV's 8-bit L*a*b* (its integer tables: sRGB gamma, the cube root of softfloat, bit exact), the
L channel is equalized, and the image comes back through OpenCV's integer Lab-to-RGB path.
``bins`` does not change the result (DALI's CPU operator always uses 256 bins); it is checked to be
a power of two as DALI documents. ``gpu`` gives the ``cpu`` result, sample by sample.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register

OP = "clahe"
_BINS = 256
_INT_MAX = 2**31


@register
class Clahe(Operator):
    """Contrast-limited adaptive histogram equalization (OpenCV's CLAHE, as DALI's CPU operator)."""

    schema = Schema(OP, devices=("cpu", "gpu"))

    def configure(self, tiles_x=None, tiles_y=None, clip_limit=None, bins=256, luma_only=True) -> None:
        self.tiles_x = _positive_int("tiles_x", tiles_x)
        self.tiles_y = _positive_int("tiles_y", tiles_y)
        if clip_limit is None:
            raise ArgumentError(f"{OP}: clip_limit is required")
        self.clip_limit = float(np.float32(check_number(OP, "clip_limit", clip_limit)))
        if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1 or bins & (bins - 1):
            raise ArgumentError(f"{OP}: bins must be a positive power of two, got {bins!r}")
        if not isinstance(luma_only, (bool, np.bool_)):
            raise ArgumentError(f"{OP}: luma_only must be a bool, got {luma_only!r}")
        self.luma_only = bool(luma_only)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout not in ("", "HWC", "HW"):
            raise ArgumentError(f"{OP}: expects HWC images (or HW gray ones), got layout {layout!r}")
        return layout

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.dtype != np.uint8:
            raise ValueError(f"{OP}: the input must be uint8, got {image.dtype}")
        if image.ndim == 2:
            return _clahe(xp, image, self.tiles_x, self.tiles_y, self.clip_limit)
        if image.ndim != 3 or image.shape[2] not in (1, 3):
            raise ValueError(f"{OP}: expects HWC images of 1 or 3 channels (or HW), got shape {tuple(image.shape)}")
        if image.shape[2] == 1:
            return _clahe(xp, image[..., 0], self.tiles_x, self.tiles_y, self.clip_limit)[..., None]
        if not self.luma_only:
            planes = [_clahe(xp, image[..., c], self.tiles_x, self.tiles_y, self.clip_limit) for c in range(3)]
            return xp.stack(planes, axis=-1)
        lab = _rgb_to_lab(xp, image)
        lightness = _clahe(xp, lab[..., 0].astype(np.uint8), self.tiles_x, self.tiles_y, self.clip_limit)
        return _lab_to_rgb(xp, lightness.astype(np.int64), lab[..., 1], lab[..., 2])


def _positive_int(name: str, value: Any) -> int:
    if value is None:
        raise ArgumentError(f"{OP}: {name} is required")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{OP}: {name} must be a positive int, got {value!r}")
    return int(value)


def _reflect_101(count: int, size: int) -> np.ndarray:
    """Indices of ``count`` rows (or columns) of a ``size``-long axis padded by BORDER_REFLECT_101."""
    index = np.arange(count)
    if size == 1:
        return np.zeros(count, np.int64)
    period = 2 * (size - 1)
    folded = index % period
    return np.where(folded < size, folded, period - folded)


def _clip_limit(clip_limit: float, area: int) -> int:
    """OpenCV's per-bin limit (0: no clipping), with its int conversion of a too large product."""
    if not clip_limit > 0.0:
        return 0
    limit = clip_limit * area / _BINS
    return max(int(limit), 1) if limit < _INT_MAX else 1


def _tile_luts(xp: ModuleType, tiles: Any, area: int, clip_limit: float) -> Any:
    """The float32 maps (tiles, 256) of the tiles' pixels ``tiles`` (tiles, area)."""
    count = tiles.shape[0]
    offsets = xp.arange(count, dtype=np.int64)[:, None] * _BINS
    hist = xp.bincount((tiles.astype(np.int64) + offsets).ravel(), minlength=count * _BINS).reshape(count, _BINS)
    limit = _clip_limit(clip_limit, area)
    if limit:
        excess = xp.maximum(hist - limit, 0).sum(axis=1)
        hist = xp.minimum(hist, limit)
        batch = excess // _BINS
        residual = excess - batch * _BINS
        step = xp.maximum(_BINS // xp.maximum(residual, 1), 1)
        bins = xp.arange(_BINS, dtype=np.int64)[None, :]
        extra = (bins % step[:, None] == 0) & (bins // step[:, None] < residual[:, None])
        hist = hist + batch[:, None] + extra
    scale = np.float32(_BINS - 1) / np.float32(area)
    cdf = xp.cumsum(hist, axis=1).astype(np.float32)
    return xp.clip(xp.rint(cdf * scale), 0, 255).astype(np.float32)


def _blend_weights(size: int, tile: int, tiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pixel along one axis: the two tiles blended and their float32 weights (OpenCV's)."""
    position = np.arange(size, dtype=np.float32) * (np.float32(1.0) / np.float32(tile)) - np.float32(0.5)
    low = np.floor(position)
    weight = (position - low).astype(np.float32)
    low = low.astype(np.int64)
    return np.maximum(low, 0), np.minimum(low + 1, tiles - 1), np.float32(1.0) - weight, weight


def _clahe(xp: ModuleType, image: Any, tiles_x: int, tiles_y: int, clip_limit: float) -> Any:
    """OpenCV's CLAHE of one uint8 plane (HW)."""
    height, width = image.shape
    padded = image
    if width % tiles_x or height % tiles_y:
        rows = xp.asarray(_reflect_101(height + tiles_y - height % tiles_y, height))
        cols = xp.asarray(_reflect_101(width + tiles_x - width % tiles_x, width))
        padded = image[rows][:, cols]
    tile_h, tile_w = padded.shape[0] // tiles_y, padded.shape[1] // tiles_x
    area = tile_h * tile_w
    tiles = padded[: tile_h * tiles_y, : tile_w * tiles_x].reshape(tiles_y, tile_h, tiles_x, tile_w)
    tiles = tiles.transpose(0, 2, 1, 3).reshape(tiles_y * tiles_x, area)
    luts = _tile_luts(xp, tiles, area, clip_limit).reshape(tiles_y, tiles_x, _BINS)
    x1, x2, xa1, xa = (xp.asarray(a) for a in _blend_weights(width, tile_w, tiles_x))
    y1, y2, ya1, ya = (xp.asarray(a)[:, None] for a in _blend_weights(height, tile_h, tiles_y))
    values = image.astype(np.int64)
    top = luts[y1, x1[None, :], values] * xa1 + luts[y1, x2[None, :], values] * xa
    bottom = luts[y2, x1[None, :], values] * xa1 + luts[y2, x2[None, :], values] * xa
    blended = top * ya1 + bottom * ya
    return xp.clip(xp.rint(blended), 0, 255).astype(np.uint8)


# ---- OpenCV's 8-bit RGB <-> L*a*b* (color_lab.cpp, integer, bit exact) ---------------------------


def _raw(hexes: str) -> np.ndarray:
    return np.array([struct.unpack(">d", bytes.fromhex(h))[0] for h in hexes.split()])


_SRGB_TO_XYZ = _raw(
    "3fda65a14488c60d 3fd6e297396d0918 3fc71819d2391d58 3fcb38cda6e75ff6 3fe6e297396d0918 "
    "3fb279aae6c8f755 3f93cc4ac6cdaf4b 3fbe836eb4e98138 3fee68427418d691"
).reshape(3, 3)
_XYZ_TO_SRGB = _raw(
    "4009ec804102ff8f bff8982a9930be0e bfdfe7ff583a53b9 bfef042528ae74f3 3ffe040f23897204 "
    "3fa546d3f9e7b80b 3fac7de5082cf52c bfca1e14bdfd2631 3ff0eabef06b3786"
).reshape(3, 3)
_D65 = np.array([_raw("3fee6a22b3892ee8")[0], 1.0, _raw("3ff16b8950763a19")[0]])
#: Ken Turkowski's rational cube root, as OpenCV's softfloat ``cbrt`` has it.
_CBRT_POLY = _raw(
    "4046a09e6653ba70 406808f46c6116e0 405dca97439cae14 402add70d2827500 3fc4f15f83f55d2d "
    "402d9e20660edb21 4062ff15c0285815 406510d06a8112ce 4040fecbc9e2c375"
)
_BASE = 1 << 14
_MIN_AB = -8145


def _gamma(x: np.ndarray) -> np.ndarray:
    """sRGB to linear (float64 of float32 inputs, rounded to float32)."""
    xd = x.astype(np.float64)
    linear = np.where(xd <= 809 / 20000, xd / (323 / 25), ((xd + 11 / 200) / (1 + 11 / 200)) ** (12 / 5))
    return linear.astype(np.float32)


def _inverse_gamma(x: np.ndarray) -> np.ndarray:
    """Linear to sRGB (float64 of float32 inputs, rounded to float32)."""
    xd = x.astype(np.float64)
    encoded = np.where(xd <= 7827 / 2500000, xd * (323 / 25), xd ** (1 / (12 / 5)) * (1 + 11 / 200) - 11 / 200)
    return encoded.astype(np.float32)


def _softfloat_cbrt(x: np.ndarray) -> np.ndarray:
    """OpenCV's softfloat cube root of positive float32 values: a rational polynomial in float64 on
    the mantissa, its result truncated (not rounded) to float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    exponent = ((bits >> 23) & 0xFF) - 127
    shift = np.fmod(exponent, 3)
    shift = np.where(shift >= 0, shift - 3, shift)
    exponent = (exponent - shift) // 3 - 1
    fr = (((shift + 1023) << 52) | ((bits & 0x7FFFFF) << 29)).astype(np.uint64).view(np.float64)
    a = _CBRT_POLY
    numerator = (((a[0] * fr + a[1]) * fr + a[2]) * fr + a[3]) * fr + a[4]
    denominator = (((a[5] * fr + a[6]) * fr + a[7]) * fr + a[8]) * fr + 1.0
    mantissa = ((numerator / denominator).view(np.uint64).astype(np.int64) & ((1 << 52) - 1)) >> 29
    result = np.where(bits & 0x7FFFFFFF, ((exponent + 127) << 23) | mantissa, 0)
    return result.astype(np.uint32).view(np.float32)


def _cdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (towards zero)."""
    return np.sign(a) * (np.abs(a) // b)


@functools.cache
def _lab_tables() -> dict[str, np.ndarray]:
    """OpenCV's ``initLabTabs`` for 8-bit sRGB, and the fixed-point matrices of the conversions."""
    f32 = np.float32
    levels = np.arange(256, dtype=np.float32)
    gamma = np.rint(f32(255 * 8) * _gamma(levels / f32(255))).astype(np.int64)
    steps = f32(1) / f32(4096) * np.arange(4096, dtype=np.float32)
    inverse_gamma = np.rint(f32(255) * _inverse_gamma(steps)).astype(np.int64)
    lthresh = f32(216) / f32(24389)
    lscale = f32(841) / f32(108)
    lbias = f32(16) / f32(116)
    x = f32(1) / (f32(255) * f32(8)) * np.arange(3072, dtype=np.float32)
    linear = (x.astype(np.float64) * float(lscale) + float(lbias)).astype(np.float32)
    cbrt = np.rint(f32(1 << 15) * np.where(x < lthresh, linear, _softfloat_cbrt(x))).astype(np.int64)
    yf = np.zeros((256, 2), np.int64)
    for i in range(256):
        if i <= 20:
            y = np.rint(f32(i * _BASE * 20 * 9) / f32(17 * 29 * 29 * 29))
            ify = np.rint(f32(_BASE) * (f32(16) / f32(116) + f32(i * 5) / f32(3 * 17 * 29)))
        else:
            fy = f32(i * 100 * _BASE) / f32(255 * 116) + f32(16 * _BASE) / f32(116)
            ify, y = np.rint(fy), np.rint(fy * fy * fy / f32(_BASE * _BASE))
        yf[i] = y, ify
    index = np.arange(_MIN_AB, _BASE * 9 // 4 + _MIN_AB, dtype=np.int64)
    ab_to_xz = np.where(
        index <= 3390,
        _cdiv(index * 108, 841) - _BASE * 16 // 116 * 108 // 841,
        _cdiv(_cdiv(index * index, _BASE) * index, _BASE),
    )
    return {
        "gamma": gamma,
        "inverse_gamma": inverse_gamma,
        "cbrt": cbrt,
        "yf": yf,
        "ab_to_xz": ab_to_xz,
        "to_xyz": np.rint(4096 * _SRGB_TO_XYZ / _D65[:, None]).astype(np.int64),
        "to_rgb": np.rint(4096 * _XYZ_TO_SRGB * _D65[None, :]).astype(np.int64),
    }


def _descale(value: Any, shift: int) -> Any:
    return (value + (1 << (shift - 1))) >> shift


def _mix(xp: ModuleType, values: Any, matrix: Any) -> Any:
    """``values`` (..., 3) times the integer ``matrix`` (rows: outputs), in integers."""
    rows = [values[..., 0] * int(m[0]) + values[..., 1] * int(m[1]) + values[..., 2] * int(m[2]) for m in matrix]
    return xp.stack(rows, axis=-1)


def _tables(xp: ModuleType) -> dict[str, Any]:
    return {name: table if name.startswith("to_") else xp.asarray(table) for name, table in _lab_tables().items()}


def _rgb_to_lab(xp: ModuleType, image: Any) -> Any:
    """OpenCV's ``COLOR_RGB2Lab`` of uint8 RGB: int64 (H, W, 3) L, a, b in 0..255."""
    t = _tables(xp)
    rgb = t["gamma"][image.astype(np.int64)]
    xyz = _descale(_mix(xp, rgb, t["to_xyz"]), 12)
    f = t["cbrt"][xyz]
    lightness = _descale(296 * f[..., 1] - 1336934, 15)
    a = _descale(500 * (f[..., 0] - f[..., 1]) + (128 << 15), 15)
    b = _descale(200 * (f[..., 1] - f[..., 2]) + (128 << 15), 15)
    return xp.clip(xp.stack([lightness, a, b], axis=-1), 0, 255)


def _lab_to_rgb(xp: ModuleType, lightness: Any, a: Any, b: Any) -> Any:
    """OpenCV's integer ``COLOR_Lab2RGB`` of 8-bit L, a, b: uint8 (H, W, 3)."""
    t = _tables(xp)
    y, ify = t["yf"][lightness, 0], t["yf"][lightness, 1]
    adiv = ((5 * a * 53687 + (1 << 7)) >> 13) - 128 * _BASE // 500
    bdiv = ((b * 41943 + (1 << 4)) >> 9) - 128 * _BASE // 200 + 1
    x = t["ab_to_xz"][ify + adiv - _MIN_AB]
    z = t["ab_to_xz"][ify - bdiv - _MIN_AB]
    rgb = xp.clip(_descale(_mix(xp, xp.stack([x, y, z], axis=-1), t["to_rgb"]), 14), 0, 4095)
    return xp.clip(t["inverse_gamma"][rgb], 0, 255).astype(np.uint8)
