"""``water`` and ``sphere``: DALI's displacement filters, each output pixel sampled at a point of the
input that a formula gives (an image seen through water, or on a sphere).

Both match DALI's CPU operators: the points in float32 in DALI's order (``water`` with the C
library's ``sinf`` and ``cosf``, evaluated once per row and column), then DALI's sampler: nearest
(``floor`` of the point) or linear (the four pixels around the point less half a pixel, blended in
float32 as DALI blends them, rounded half away from zero for uint8); points outside the image take
``fill_value``, which a uint8 image holds as DALI's C conversion gives it (truncated, low 8 bits).
``water`` takes each output pixel's own coordinates (not its centre), as DALI does. ``mask`` (per
sample) 0 passes a sample through. uint8 and float32 HWC images; on ``gpu`` the same arithmetic on
cupy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register
from ..types import DALIInterpType
from .transforms import c_trig

_F32 = np.float32
_INTERPS = (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR)


class _Displacement(Operator):
    """A displacement filter: :meth:`points` says where each output pixel samples the input."""

    def _configure_filter(self, fill_value: float, interp_type: DALIInterpType, mask: int) -> None:
        name = self.schema.name
        if interp_type not in _INTERPS:
            raise ArgumentError(f"{name}: interp_type must be INTERP_NN or INTERP_LINEAR, got {interp_type!r}")
        if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float, np.number)):
            raise ArgumentError(f"{name}: fill_value must be a number, got {fill_value!r}")
        self.linear = interp_type is DALIInterpType.INTERP_LINEAR
        self.fill = float(fill_value)
        self.mask = _mask(name, mask)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout not in ("", "HWC"):
            raise ArgumentError(f"{self.schema.name}: expects HWC images, got layout {layout!r}")
        return layout

    def points(self, xp, height: int, width: int) -> tuple[object, object]:
        """The input point (x, y), float32 arrays of shape (height, width), of each output pixel."""
        raise NotImplementedError

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        name = self.schema.name
        if image.ndim != 3 or image.dtype not in (np.uint8, np.float32):
            raise ValueError(f"{name}: needs uint8 or float32 HWC images, got {image.dtype} of shape {image.shape}")
        if not _mask(name, as_scalar(args["mask"]) if "mask" in args else self.mask):
            return image
        x, y = self.points(xp, image.shape[0], image.shape[1])
        return sample(xp, image, x, y, self.linear, self.fill)


def _mask(name: str, value) -> int:
    if value not in (0, 1):
        raise ArgumentError(f"{name}: mask must be 0 or 1, got {value!r}")
    return int(value)


def sample(xp, image, x, y, linear: bool, fill: float):
    """``image`` (HWC) sampled at the float32 points ``x``, ``y`` as DALI's 2-D sampler does."""
    height, width, _ = image.shape
    border = _border(image.dtype, fill)

    def at(xi, yi):
        inside = (xi >= 0) & (xi < width) & (yi >= 0) & (yi < height)
        values = image[xp.clip(yi, 0, height - 1), xp.clip(xi, 0, width - 1)]
        return xp.where(inside[..., None], values, xp.asarray(border, dtype=image.dtype))

    if not linear:
        return at(xp.floor(x).astype(np.int64), xp.floor(y).astype(np.int64))
    x = x - _F32(0.5)
    y = y - _F32(0.5)
    x0, y0 = xp.floor(x), xp.floor(y)
    qx = (x - x0)[..., None]
    qy = (y - y0)[..., None]
    px = _F32(1) - qx
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    s00, s01 = at(x0, y0).astype(_F32), at(x0 + 1, y0).astype(_F32)
    s10, s11 = at(x0, y0 + 1).astype(_F32), at(x0 + 1, y0 + 1).astype(_F32)
    s0 = s00 * px + s01 * qx
    s1 = s10 * px + s11 * qx
    value = s0 + (s1 - s0) * qy
    if image.dtype == np.float32:
        return value
    rounded = xp.trunc(value + xp.copysign(_F32(0.5), value))  # half away from zero, as DALI's host
    return xp.clip(rounded, 0, 255).astype(np.uint8)


def _border(dtype: np.dtype, fill: float):
    """``fill_value`` as an image of ``dtype`` holds it: for uint8 as DALI's C conversion gives it on
    x86 (truncated toward zero, then the low 8 bits: -3 is 253)."""
    return _F32(fill) if dtype == np.float32 else np.uint8(int(fill) & 0xFF)


@register
class Water(_Displacement):
    """Each row shifted sideways and each column up or down by a sine wave."""

    schema = Schema("water", devices=("cpu", "gpu"), arg_inputs=("mask",))

    def configure(
        self,
        ampl_x: float = 10.0,
        ampl_y: float = 10.0,
        freq_x: float = 2.0 * np.pi / 128,
        freq_y: float = 2.0 * np.pi / 128,
        phase_x: float = 0.0,
        phase_y: float = 0.0,
        fill_value: float = 0.0,
        interp_type: DALIInterpType = DALIInterpType.INTERP_NN,
        mask: int = 1,
    ) -> None:
        values = {"ampl_x": ampl_x, "ampl_y": ampl_y, "freq_x": freq_x, "freq_y": freq_y}
        values.update(phase_x=phase_x, phase_y=phase_y)
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ArgumentError(f"water: {key} must be a number, got {value!r}")
        self.wave = {key: _F32(value) for key, value in values.items()}
        self._configure_filter(fill_value, interp_type, mask)

    def points(self, xp, height: int, width: int):
        w = self.wave
        rows = np.arange(height, dtype=_F32)
        cols = np.arange(width, dtype=_F32)
        shift_x = np.array([w["ampl_x"] * c_trig("sin", w["freq_x"] * r + w["phase_x"]) for r in rows], _F32)
        shift_y = np.array([w["ampl_y"] * c_trig("cos", w["freq_y"] * c + w["phase_y"]) for c in cols], _F32)
        x = cols[None, :] + shift_x[:, None]
        y = rows[:, None] + shift_y[None, :]
        return xp.asarray(x), xp.asarray(y)


@register
class Sphere(_Displacement):
    """The image as seen on a sphere: points pushed out from the centre by their distance to it."""

    schema = Schema("sphere", devices=("cpu", "gpu"), arg_inputs=("mask",))

    def configure(
        self, fill_value: float = 0.0, interp_type: DALIInterpType = DALIInterpType.INTERP_NN, mask: int = 1
    ) -> None:
        self._configure_filter(fill_value, interp_type, mask)

    def points(self, xp, height: int, width: int):
        mid_x, mid_y = _F32(width) * _F32(0.5), _F32(height) * _F32(0.5)
        d = _F32(int(max(mid_x, mid_y)))
        true_y = (np.arange(height, dtype=_F32) + _F32(0.5) - mid_y)[:, None]
        true_x = (np.arange(width, dtype=_F32) + _F32(0.5) - mid_x)[None, :]
        rad = np.sqrt(true_x * true_x + true_y * true_y) / d
        return xp.asarray(mid_x + rad * true_x), xp.asarray(mid_y + rad * true_y)
