"""``crop``: a fixed-size window at a relative position, DALI's ``crop_pos_x``/``crop_pos_y``
(and ``crop_pos_z`` for volumes) semantics; :func:`crop_window` is the anchor rule
``crop_mirror_normalize`` shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register
from ..types import DALIDataType, DALIImageType
from .cast import parse_dtype, saturate_cast

_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint8))
POLICIES = ("error", "pad", "trim_to_shape")


#: DALI's ``rounding`` of a window's anchor: half away from zero, or the fraction dropped
ROUNDING = ("round", "truncate")


def anchor(pos: float, span: int, rounding: str = "round") -> int:
    """A window's first index along an axis: ``pos`` (a float32, as DALI holds it) times ``span``
    (the image's extent less the window's) in float64, rounded half away from zero or truncated
    toward zero by ``rounding``; negative where the window is larger than the image (padding)."""
    value = float(np.float32(pos)) * span
    if rounding == "truncate":
        return math.trunc(value)
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def crop_window(
    in_h: int, in_w: int, crop_h: int, crop_w: int, pos_x: float, pos_y: float, rounding: str = "round"
) -> tuple[int, int]:
    """Top-left ``(y0, x0)`` of a ``crop_h`` x ``crop_w`` window in an ``in_h`` x ``in_w`` image.

    DALI's rule: ``x0 = round(pos_x * (in_w - crop_w))``, the position a float32 and the product
    in float64 (0.7 of 535 is 374.49999..., not float64's 374.5), halves away from zero (or
    truncated, ``rounding="truncate"``); see :func:`anchor`.
    """
    return anchor(pos_y, in_h - crop_h, rounding), anchor(pos_x, in_w - crop_w, rounding)


def _round_half_away(value: float) -> int:
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def crop_anchors(
    in_h: np.ndarray,
    in_w: np.ndarray,
    crop_h: int,
    crop_w: int,
    pos_x: np.ndarray,
    pos_y: np.ndarray,
    rounding: str = "round",
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`crop_window` of a whole batch: ``(y0, x0)`` int64 arrays for arrays of image sizes
    and float64 positions (the same float64 arithmetic and rounding, so the same integers)."""
    pos_x, pos_y = (np.asarray(p, np.float32).astype(np.float64) for p in (pos_x, pos_y))
    rounded = np.trunc if rounding == "truncate" else _round_half_away_array
    return rounded(pos_y * (in_h - crop_h)).astype(np.int64), rounded(pos_x * (in_w - crop_w)).astype(np.int64)


def _round_half_away_array(values: np.ndarray) -> np.ndarray:
    return (np.sign(values) * np.floor(np.abs(values) + 0.5)).astype(np.int64)


def check_rounding(op: str, rounding: Any) -> str:
    """``rounding`` checked: one of :data:`ROUNDING`."""
    if rounding not in ROUNDING:
        raise ArgumentError(f"{op}: rounding must be one of {ROUNDING}, got {rounding!r}")
    return rounding


def check_position(op: str, name: str, value: Any) -> float:
    """A relative crop position as a float in [0, 1]; ArgumentError otherwise."""
    pos = check_number(op, name, value)
    if not 0.0 <= pos <= 1.0:
        raise ArgumentError(f"{op}: {name} must be in [0, 1], got {value!r}")
    return pos


def _crop_size(crop: Any, crop_d: Any, crop_h: Any, crop_w: Any) -> tuple[int, ...]:
    """``(h, w)``, or ``(d, h, w)`` for a 3-D crop (three values, or ``crop_d``; 0 is not set, as in DALI)."""
    if crop_d is not None and not isinstance(crop_d, bool) and crop_d == 0:
        crop_d = None
    if crop is not None and (crop_d is not None or crop_h is not None or crop_w is not None):
        raise ArgumentError("crop: give either crop=(h, w) / (d, h, w) or crop_h and crop_w (and crop_d), not both")
    if crop is None:
        if crop_h is None or crop_w is None:
            raise ArgumentError("crop: give crop=(h, w), or both crop_h and crop_w")
        crop = (crop_h, crop_w) if crop_d is None else (crop_d, crop_h, crop_w)
    sizes = (crop, crop) if isinstance(crop, (int, float, np.integer, np.floating)) else tuple(crop)
    if len(sizes) not in (2, 3) or any(
        isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)) for s in sizes
    ):
        raise ArgumentError(f"crop: crop must be a size, a pair (h, w) or a triple (d, h, w), got {crop!r}")
    if any(int(s) < 1 for s in sizes):
        raise ArgumentError(f"crop: crop sizes must be at least 1, got {crop!r}")
    return tuple(int(s) for s in sizes)


def _sized(crop: Any, crop_h: Any, crop_w: Any) -> bool:
    """Whether the static arguments give a window size (else it comes per sample)."""
    return crop is not None or (crop_h is not None and crop_w is not None)


def spatial_axes(layout: str, ndim: int) -> dict[str, int]:
    """The axis of each of ``D``, ``H`` and ``W`` in a sample of ``ndim`` dimensions: from its
    ``layout`` when it names them, else ``HW(C)`` for 2 or 3 dimensions and ``DHWC`` for 4."""
    if layout and len(layout) == ndim and "H" in layout and "W" in layout:
        return {name: layout.index(name) for name in "DHW" if name in layout}
    if ndim in (2, 3):
        return {"H": 0, "W": 1}
    if ndim == 4:
        return {"D": 0, "H": 1, "W": 2}
    raise ValueError(f"crop: cannot tell the spatial axes of a sample of shape with {ndim} dimensions; give a layout")


@register
class Crop(Operator):
    """Cut a ``crop`` = (h, w) window out of images (HWC, CHW or HW), or a (d, h, w) window out of
    volumes (DHWC or CDHW; an (h, w) one keeps their depth), the axes named by the input's layout.

    The window's anchor follows :func:`crop_window` along each axis (``crop_pos_z`` for depth). A
    window larger than the sample is an error naming both sizes unless ``out_of_bounds_policy="pad"``,
    which fills the outside with ``fill_values`` (a scalar or one value per channel).
    """

    schema = Schema(
        "crop",
        devices=("cpu", "gpu"),
        arg_inputs=("crop_pos_x", "crop_pos_y", "crop_pos_z", "crop", "crop_h", "crop_w", "crop_d"),
    )

    def configure(
        self,
        crop: Sequence[float] | float | None = None,
        crop_h: float | None = None,
        crop_w: float | None = None,
        crop_d: float | None = None,
        crop_pos_x: float = 0.5,
        crop_pos_y: float = 0.5,
        crop_pos_z: float = 0.5,
        out_of_bounds_policy: str = "error",
        fill_values: float | Sequence[float] = 0,
        dtype: DALIDataType | np.dtype | str | None = None,
        output_dtype: DALIDataType | np.dtype | str | None = None,
        image_type: DALIImageType | None = None,
        rounding: str = "round",
    ) -> None:
        """``output_dtype`` is DALI's deprecated alias of ``dtype``; ``image_type``, deprecated and
        unused in DALI, is validated and changes nothing; ``rounding`` rounds the window's anchor
        (:func:`anchor`)."""
        self.rounding = check_rounding("crop", rounding)
        self.static_size = {"crop": crop, "crop_d": crop_d, "crop_h": crop_h, "crop_w": crop_w}
        self.size = _crop_size(crop, crop_d, crop_h, crop_w) if _sized(crop, crop_h, crop_w) else (1, 1)
        self.crop_h, self.crop_w = self.size[-2:]
        if dtype is not None and output_dtype is not None:
            raise ArgumentError("crop: dtype and its deprecated alias output_dtype cannot be used together")
        if image_type is not None and not isinstance(image_type, DALIImageType):
            raise ArgumentError(f"crop: image_type must be a types.DALIImageType, got {image_type!r}")
        dtype = dtype if dtype is not None else output_dtype
        self.dtype = None if dtype is None else parse_dtype("crop", "dtype", dtype)
        if self.dtype is not None and self.dtype not in _DTYPES:
            raise ArgumentError(f"crop: dtype must be types.FLOAT, FLOAT16 or UINT8 (as DALI), got {dtype!r}")
        self.crop_pos_x = check_position("crop", "crop_pos_x", crop_pos_x)
        self.crop_pos_y = check_position("crop", "crop_pos_y", crop_pos_y)
        self.crop_pos_z = check_position("crop", "crop_pos_z", crop_pos_z)
        if out_of_bounds_policy not in POLICIES:
            raise ArgumentError(f"crop: out_of_bounds_policy must be one of {POLICIES}, got {out_of_bounds_policy!r}")
        self.policy = out_of_bounds_policy
        try:
            self.fill_values = np.asarray(fill_values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ArgumentError(f"crop: fill_values must be numbers, got {fill_values!r}") from None
        if self.fill_values.size == 0:
            raise ArgumentError("crop: fill_values must not be empty")
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def bind_inputs(self, count, arg_inputs) -> None:
        """The window's size, static or per sample (``crop``, or ``crop_h`` and ``crop_w``)."""
        given = {k for k, v in self.static_size.items() if v is not None} | set(arg_inputs)
        if "crop" not in given and not {"crop_h", "crop_w"} <= given:
            _crop_size(None, None, None, None)
        if "crop" in given and given & {"crop_d", "crop_h", "crop_w"}:
            _crop_size(1, None, 1, 1)

    def _sample_size(self, args) -> tuple[int, ...]:
        """This sample's window size: its argument inputs over the static sizes (rounded)."""
        if not any(k in args for k in self.static_size):
            return self.size
        sizes = {k: args[k] if k in args else v for k, v in self.static_size.items()}
        sizes = {k: None if v is None else np.asarray(v).reshape(-1).tolist() for k, v in sizes.items()}
        sizes = {k: v if v is None or k == "crop" else _round_half_away(float(v[0])) for k, v in sizes.items()}
        if sizes["crop"] is not None:
            sizes["crop"] = [_round_half_away(float(c)) for c in sizes["crop"]]
        return _crop_size(sizes["crop"], sizes["crop_d"], sizes["crop_h"], sizes["crop_w"])

    def compute(self, xp, inputs, args, ctx):
        out = self._window(xp, inputs[0], args)
        return out if self.dtype is None else saturate_cast(xp, out, self.dtype)

    def _window(self, xp, image, args):
        if image.ndim < 2:
            raise ValueError(f"crop: expects an HWC or HW image, got shape {tuple(image.shape)}")
        axes = spatial_axes(self.layout, image.ndim)
        size = self._sample_size(args)
        names = "DHW"[3 - len(size) :]
        if not set(names) <= set(axes):  # a 2-D crop of a volume keeps its depth, as DALI's
            kind = "a 3-D (d, h, w)" if len(size) == 3 else "a 2-D (h, w)"
            raise ValueError(f"crop: {kind} crop does not fit a sample of shape {tuple(image.shape)}")
        positions = {"D": "crop_pos_z", "H": "crop_pos_y", "W": "crop_pos_x"}
        start = [0] * image.ndim
        stop = list(image.shape)
        for name, extent in zip(names, size):
            arg = positions[name]
            pos = check_position("crop", arg, as_scalar(args.get(arg, getattr(self, arg))))
            axis = axes[name]
            start[axis] = anchor(pos, image.shape[axis] - extent, self.rounding)
            stop[axis] = start[axis] + extent
        if all(0 <= a and b <= n for a, b, n in zip(start, stop, image.shape)):
            return xp.ascontiguousarray(image[tuple(slice(a, b) for a, b in zip(start, stop))])
        if self.policy == "trim_to_shape":  # the window cut to the image
            cut = tuple(slice(max(a, 0), max(min(b, n), max(a, 0))) for a, b, n in zip(start, stop, image.shape))
            return xp.ascontiguousarray(image[cut])
        if self.policy == "error":
            window = "x".join(map(str, size))
            extent = "x".join(str(image.shape[axes[n]]) for n in names)
            raise ValueError(
                f"crop: the {window} ({' x '.join(names.lower())}) window does not fit in the {extent} image; "
                "use a smaller crop or out_of_bounds_policy='pad'"
            )
        return self._pad(xp, image, start, stop, len(size))

    def _pad(self, xp, image, start: list[int], stop: list[int], dims: int) -> Any:
        channel_axis = self.layout.index("C") if "C" in self.layout and len(self.layout) == image.ndim else None
        if channel_axis is None and image.ndim in (3, 4) and dims == image.ndim - 1:
            channel_axis = image.ndim - 1
        channels = image.shape[channel_axis] if channel_axis is not None else 1
        if self.fill_values.size not in (1, channels):
            raise ValueError(f"crop: {self.fill_values.size} fill_values for an image of {channels} channels")
        out = xp.empty(tuple(b - a for a, b in zip(start, stop)), dtype=image.dtype)
        fill = self.fill_values.astype(image.dtype)
        if fill.size > 1:
            shape = [1] * image.ndim
            shape[channel_axis] = fill.size
            fill = fill.reshape(shape)
        out[...] = xp.asarray(fill)
        src = tuple(slice(max(a, 0), max(min(b, n), max(a, 0))) for a, b, n in zip(start, stop, image.shape))
        dst = tuple(slice(c.start - a, c.stop - a) for c, a in zip(src, start))
        out[dst] = image[src]
        return out
