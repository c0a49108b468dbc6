"""``crop``: a fixed-size window at a relative position, DALI's ``crop_pos_x``/``crop_pos_y``
semantics; :func:`crop_window` is the anchor rule ``crop_mirror_normalize`` shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register
from ..types import DALIDataType
from .cast import parse_dtype, saturate_cast

_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint8))
POLICIES = ("error", "pad")


def crop_window(in_h: int, in_w: int, crop_h: int, crop_w: int, pos_x: float, pos_y: float) -> tuple[int, int]:
    """Top-left ``(y0, x0)`` of a ``crop_h`` x ``crop_w`` window in an ``in_h`` x ``in_w`` image.

    DALI's rule: ``x0 = roundf(pos_x * (in_w - crop_w))``, halves away from zero; the
    anchor is negative when the window is larger than the image (padding).
    """
    return _round_half_away(pos_y * (in_h - crop_h)), _round_half_away(pos_x * (in_w - crop_w))


def _round_half_away(value: float) -> int:
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def crop_anchors(
    in_h: np.ndarray, in_w: np.ndarray, crop_h: int, crop_w: int, pos_x: np.ndarray, pos_y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`crop_window` of a whole batch: ``(y0, x0)`` int64 arrays for arrays of image sizes
    and float64 positions (the same float64 arithmetic and rounding, so the same integers)."""
    return _round_half_away_array(pos_y * (in_h - crop_h)), _round_half_away_array(pos_x * (in_w - crop_w))


def _round_half_away_array(values: np.ndarray) -> np.ndarray:
    return (np.sign(values) * np.floor(np.abs(values) + 0.5)).astype(np.int64)


def check_position(op: str, name: str, value: Any) -> float:
    """A relative crop position as a float in [0, 1]; ArgumentError otherwise."""
    pos = check_number(op, name, value)
    if not 0.0 <= pos <= 1.0:
        raise ArgumentError(f"{op}: {name} must be in [0, 1], got {value!r}")
    return pos


def _crop_size(crop: Any, crop_h: Any, crop_w: Any) -> tuple[int, int]:
    if crop is not None and (crop_h is not None or crop_w is not None):
        raise ArgumentError("crop: give either crop=(h, w) or crop_h and crop_w, not both")
    if crop is None:
        if crop_h is None or crop_w is None:
            raise ArgumentError("crop: give crop=(h, w), or both crop_h and crop_w")
        crop = (crop_h, crop_w)
    sizes = (crop, crop) if isinstance(crop, (int, float, np.integer, np.floating)) else tuple(crop)
    if len(sizes) != 2 or any(
        isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)) for s in sizes
    ):
        raise ArgumentError(f"crop: crop must be a size or a pair (h, w), got {crop!r}")
    if any(int(s) < 1 for s in sizes):
        raise ArgumentError(f"crop: crop sizes must be at least 1, got {crop!r}")
    return int(sizes[0]), int(sizes[1])


@register
class Crop(Operator):
    """Cut a ``crop`` = (h, w) window out of HWC (or HW) images.

    The window's anchor follows :func:`crop_window`. A window larger than the image is
    an error naming both sizes unless ``out_of_bounds_policy="pad"``, which fills the
    outside with ``fill_values`` (a scalar or one value per channel).
    """

    schema = Schema("crop", devices=("cpu", "gpu"), arg_inputs=("crop_pos_x", "crop_pos_y"))

    def configure(
        self,
        crop: Sequence[float] | float | None = None,
        crop_h: float | None = None,
        crop_w: float | None = None,
        crop_pos_x: float = 0.5,
        crop_pos_y: float = 0.5,
        out_of_bounds_policy: str = "error",
        fill_values: float | Sequence[float] = 0,
        dtype: DALIDataType | np.dtype | str | None = None,
    ) -> None:
        self.crop_h, self.crop_w = _crop_size(crop, crop_h, crop_w)
        self.dtype = None if dtype is None else parse_dtype("crop", "dtype", dtype)
        if self.dtype is not None and self.dtype not in _DTYPES:
            raise ArgumentError(f"crop: dtype must be types.FLOAT, FLOAT16 or UINT8 (as DALI), got {dtype!r}")
        self.crop_pos_x = check_position("crop", "crop_pos_x", crop_pos_x)
        self.crop_pos_y = check_position("crop", "crop_pos_y", crop_pos_y)
        if out_of_bounds_policy not in POLICIES:
            raise ArgumentError(f"crop: out_of_bounds_policy must be one of {POLICIES}, got {out_of_bounds_policy!r}")
        self.policy = out_of_bounds_policy
        try:
            self.fill_values = np.asarray(fill_values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ArgumentError(f"crop: fill_values must be numbers, got {fill_values!r}") from None
        if self.fill_values.size == 0:
            raise ArgumentError("crop: fill_values must not be empty")

    def compute(self, xp, inputs, args, ctx):
        out = self._window(xp, inputs[0], args)
        return out if self.dtype is None else saturate_cast(xp, out, self.dtype)

    def _window(self, xp, image, args):
        if image.ndim < 2:
            raise ValueError(f"crop: expects an HWC or HW image, got shape {tuple(image.shape)}")
        in_h, in_w = image.shape[:2]
        ch, cw = self.crop_h, self.crop_w
        pos_x = check_position("crop", "crop_pos_x", as_scalar(args.get("crop_pos_x", self.crop_pos_x)))
        pos_y = check_position("crop", "crop_pos_y", as_scalar(args.get("crop_pos_y", self.crop_pos_y)))
        y0, x0 = crop_window(in_h, in_w, ch, cw, pos_x, pos_y)
        if 0 <= y0 and 0 <= x0 and y0 + ch <= in_h and x0 + cw <= in_w:
            return xp.ascontiguousarray(image[y0 : y0 + ch, x0 : x0 + cw])
        if self.policy == "error":
            raise ValueError(
                f"crop: the {ch}x{cw} (h x w) window does not fit in the {in_h}x{in_w} image; "
                "use a smaller crop or out_of_bounds_policy='pad'"
            )
        return self._pad(xp, image, y0, x0)

    def _pad(self, xp, image, y0: int, x0: int) -> Any:
        channels = image.shape[2] if image.ndim == 3 else 1
        if self.fill_values.size not in (1, channels):
            raise ValueError(f"crop: {self.fill_values.size} fill_values for an image of {channels} channels")
        out = xp.empty((self.crop_h, self.crop_w, *image.shape[2:]), dtype=image.dtype)
        out[...] = xp.asarray(self.fill_values.astype(image.dtype))
        in_h, in_w = image.shape[:2]
        top, left = max(y0, 0), max(x0, 0)
        bottom, right = min(y0 + self.crop_h, in_h), min(x0 + self.crop_w, in_w)
        if top < bottom and left < right:
            out[top - y0 : bottom - y0, left - x0 : right - x0] = image[top:bottom, left:right]
        return out
