"""``grid_mask``: GridMask augmentation (https://arxiv.org/abs/2001.04086), as DALI's: the pixels of
an ``HWC`` image inside a grid of squares are zeroed. The grid repeats every ``tile`` pixels in both
directions, its squares are ``ratio`` of a tile wide, and it is rotated by ``angle`` (radians) about
the origin and moved by ``shift_x``, ``shift_y`` (each per sample).

A pixel ``(x, y)`` is zeroed when the fractional parts of both ``(x cos a - y sin a - shift_x) /
tile`` and ``(x sin a + y cos a - shift_y) / tile`` are below ``ratio``; the coordinates are computed
in float32 in DALI's order, with the C library's ``cosf`` and ``sinf``, so the mask is DALI's.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register
from .transforms import c_trig

OP = "grid_mask"
_F32 = np.float32


@register
class GridMask(Operator):
    """An image with the grid's squares zeroed."""

    schema = Schema(OP, devices=("cpu", "gpu"), arg_inputs=("tile", "ratio", "angle", "shift_x", "shift_y"))

    def configure(self, tile=100, ratio=0.5, angle=0.0, shift_x=0.0, shift_y=0.0) -> None:
        self.static = {
            "tile": _tile(tile),
            "ratio": check_number(OP, "ratio", ratio),
            "angle": check_number(OP, "angle", angle),
            "shift_x": check_number(OP, "shift_x", shift_x),
            "shift_y": check_number(OP, "shift_y", shift_y),
        }

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.ndim != 3:
            raise ValueError(f"{OP}: the input must be an HWC image, got shape {tuple(image.shape)}")
        value = {k: as_scalar(args[k]) if k in args else v for k, v in self.static.items()}
        keep = xp.asarray(_kept(int(image.shape[0]), int(image.shape[1]), value))
        return image * keep[:, :, None].astype(image.dtype)


def _tile(value) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or int(value) < 1:
        raise ArgumentError(f"{OP}: tile must be a positive int, got {value!r}")
    return int(value)


def _kept(height: int, width: int, value: dict) -> np.ndarray:
    """Which pixels stay (True) and which the grid zeroes (False), as DALI's CPU kernel computes it."""
    tile = _tile(value["tile"])
    angle = _F32(value["angle"])
    ca = _F32(c_trig("cos", angle) / _F32(tile))
    sa = _F32(c_trig("sin", angle) / _F32(tile))
    sx = _F32(_F32(value["shift_x"]) / _F32(tile))
    sy = _F32(_F32(value["shift_y"]) / _F32(tile))
    ratio = _F32(value["ratio"])
    ys = np.arange(height, dtype=_F32)[:, None]
    xs = np.arange(width, dtype=_F32)[None, :]
    fx = (-sx + ys * -sa) + xs * ca
    fy = (-sy + ys * ca) + xs * sa
    return ((fx - np.floor(fx)) >= ratio) | ((fy - np.floor(fy)) >= ratio)
