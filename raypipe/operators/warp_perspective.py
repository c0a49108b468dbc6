"""``experimental.warp_perspective``: images (and each frame of sequences) through a 3x3
perspective matrix, as DALI's CPU operator computes it with OpenCV 5's ``warpPerspective``.

Each output pixel ``(x, y)`` maps to the source point ``(X / W, Y / W)`` where
``(X, Y, W) = M @ (x, y, 1)``, in float32 as OpenCV 5 does it: ``M[1] * y + M[2]`` (and the other
rows' parts of a row) in float64, rounded to float32, then ``M[0] * x`` added with one rounding (a
fused multiply-add) and the division in float32. ``M`` maps output to input (``inverse_map=True``,
DALI's default) or is inverted first (in float64); with ``pixel_origin="corner"`` (DALI's default)
the matrix is first moved to OpenCV's pixel-centre origin (``S^-1 @ M @ S``, ``S`` a half-pixel
shift, in float32). Nearest neighbour takes the pixel at the rounded point (ties to even); linear
interpolates along x then y in float32 steps and rounds to nearest, ties to even, for integer types
(OpenCV fuses each multiply-add: a value next to a rounding tie may round the other way). Taps
outside the image take ``fill_value`` (``border_mode`` ``"constant"``) or the pixel OpenCV's border
rule names (``replicate``, ``reflect``, ``reflect_101``, ``wrap``). The source points' fused
multiply-adds are evaluated in float64 and rounded once to float32 (exact but for rare
double-rounding ties). Linear int16 takes OpenCV 5's older path, points rounded to 1/32 of a pixel
(:func:`_linear_in_32ths`). A sequence's frames share the sample's matrix and are warped together,
as the channels of one image; per-frame matrices come through ``fn.per_frame``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import DALIInterpType
from .axes import float_list, per_sample
from .pixel_sampling import BORDERS, Pixels, centre_origin, interpolation, sample

_OP = "experimental.warp_perspective"
_LAYOUTS = ("HW", "HWC", "FHWC")
_TYPES = (np.uint8, np.int16, np.uint16, np.float32)
#: OpenCV's half-pixel shift between the corner origin (DALI's default) and the pixel-centre one
_SHIFT = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]], np.float32)
_SHIFT_BACK = np.array([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]], np.float32)


def _matmul32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A 3x3 float32 product summed left to right in float32, as OpenCV's ``Matx`` multiplies."""
    out = np.zeros((3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            total = np.float32(0)
            for k in range(3):
                total = np.float32(total + np.float32(a[i, k] * b[k, j]))
            out[i, j] = total
    return out


def invert3(m: np.ndarray) -> np.ndarray:
    """OpenCV's 3x3 inverse in float64 (cofactors times the reciprocal of the determinant); an
    error for a singular matrix."""
    m = np.asarray(m, np.float64)
    det = (
        m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1])
        - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
        + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0])
    )
    if det == 0:
        raise ValueError(f"{_OP}: the matrix {m.tolist()} is singular, it has no inverse to map outputs to inputs")
    d = 1.0 / det
    return np.array(
        [
            [(m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) * d, (m[0, 2] * m[2, 1] - m[0, 1] * m[2, 2]) * d,
             (m[0, 1] * m[1, 2] - m[0, 2] * m[1, 1]) * d],
            [(m[1, 2] * m[2, 0] - m[1, 0] * m[2, 2]) * d, (m[0, 0] * m[2, 2] - m[0, 2] * m[2, 0]) * d,
             (m[0, 2] * m[1, 0] - m[0, 0] * m[1, 2]) * d],
            [(m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]) * d, (m[0, 1] * m[2, 0] - m[0, 0] * m[2, 1]) * d,
             (m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]) * d],
        ]
    )  # fmt: skip


def output_to_input(matrix: Any, inverse_map: bool, centre_origin: bool) -> np.ndarray:
    """The float64 matrix mapping output pixels to source points, from the float32 3x3 ``matrix``
    as given."""
    m = np.asarray(matrix, np.float32).reshape(3, 3)
    if not centre_origin:
        m = _matmul32(_SHIFT_BACK, _matmul32(m, _SHIFT))
    m = m.astype(np.float64)
    return m if inverse_map else invert3(m)


def source_points(xp: ModuleType, m: np.ndarray, height: int, width: int) -> tuple[Any, Any]:
    """Each output pixel's source point ``(sx, sy)`` (float32 arrays of ``(height, width)``) under
    the output-to-input float64 matrix ``m``, with OpenCV 5's float32 steps: per row ``M[1] * y +
    M[2]`` in float64 rounded to float32, plus ``M[0] * x`` (float32 coefficient, exact in float64)
    rounded once, as a fused multiply-add rounds; then the float32 division."""
    flat = m.reshape(-1)
    ys = xp.arange(height, dtype=xp.float64)[:, None]
    xs = xp.arange(width, dtype=xp.float64)[None, :]
    x, y, w = (
        (
            (ys * flat[3 * r + 1] + flat[3 * r + 2]).astype(xp.float32).astype(xp.float64)
            + xs * float(np.float32(flat[3 * r]))
        ).astype(xp.float32)
        for r in range(3)
    )
    return x / w, y / w


def warp_image(
    xp: ModuleType,
    image: Any,
    m: np.ndarray,
    height: int,
    width: int,
    interp: str,
    border: str,
    fill: np.ndarray,
) -> Any:
    """One HW or HWC image warped into ``height`` x ``width`` (OpenCV 5's ``warpPerspective``)."""
    planar = image.ndim == 2
    src = image[:, :, None] if planar else image
    pixels = Pixels(xp, src, border, fill)
    if interp == "linear" and src.dtype == np.int16:
        return _unplanar(_linear_in_32ths(xp, pixels, m, height, width), planar)
    sx, sy = source_points(xp, m, height, width)
    return _unplanar(sample(xp, pixels, sx, sy, interp, src.dtype), planar)


def _unplanar(out: Any, planar: bool) -> Any:
    return out[:, :, 0] if planar else out


def _linear_in_32ths(xp: ModuleType, pixels: Pixels, m: np.ndarray, height: int, width: int) -> Any:
    """int16 images, which OpenCV 5 still warps linearly through its older remap: source points
    in float64 rounded to 1/32 of a pixel (computed per block of output pixels, as OpenCV's blocks
    order the sums), float32 weights from the 32x32 table, a left-to-right float32 sum rounded to
    nearest, ties to even."""
    flat = m.reshape(-1)
    block_h = min(16, height)
    block_w = min(1024 // block_h, width)
    xs = np.arange(width)
    origin = (xs // block_w * block_w).astype(np.float64)[None, :]
    offset = (xs % block_w).astype(np.float64)[None, :]
    ys = np.arange(height, dtype=np.float64)[:, None]
    x0 = flat[0] * origin + flat[1] * ys + flat[2]
    y0 = flat[3] * origin + flat[4] * ys + flat[5]
    w0 = flat[6] * origin + flat[7] * ys + flat[8]
    w = w0 + flat[6] * offset
    with np.errstate(divide="ignore"):
        scale = np.where(w != 0, 32.0 / np.where(w != 0, w, 1.0), 0.0)
    limits = (float(np.iinfo(np.int32).min), float(np.iinfo(np.int32).max))
    qx = np.rint(np.clip((x0 + flat[0] * offset) * scale, *limits)).astype(np.int64)
    qy = np.rint(np.clip((y0 + flat[3] * offset) * scale, *limits)).astype(np.int64)
    ix, iy = xp.asarray(np.clip(qx >> 5, -32768, 32767)), xp.asarray(np.clip(qy >> 5, -32768, 32767))
    ax = xp.asarray((qx & 31).astype(np.float32) / np.float32(32))[:, :, None]
    ay = xp.asarray((qy & 31).astype(np.float32) / np.float32(32))[:, :, None]
    one = np.float32(1)
    weights = ((one - ay) * (one - ax), (one - ay) * ax, ay * (one - ax), ay * ax)
    total = None
    for (dy, dx), weight in zip(((0, 0), (0, 1), (1, 0), (1, 1)), weights):
        term = pixels.gather(pixels.rows(iy + dy), pixels.columns(ix + dx)).astype(xp.float32) * weight
        total = term if total is None else total + term
    return xp.clip(xp.rint(total), -32768, 32767).astype(np.int16)


@register
class WarpPerspective(Operator):
    """Warp HW/HWC images (FHWC sequences frame by frame) through a 3x3 perspective ``matrix``
    (an argument, a per-sample argument input, or a second input of 3x3 float32 samples)."""

    schema = Schema(
        "experimental.warp_perspective",
        devices=("cpu", "gpu"),
        min_inputs=1,
        max_inputs=2,
        arg_inputs=("matrix", "size"),
    )
    per_frame_args = frozenset({"matrix"})
    per_frame_inputs = frozenset({1})

    def configure(
        self,
        matrix: Sequence[float] = (),
        size: Sequence[float] = (),
        inverse_map: bool = True,
        border_mode: str = "constant",
        interp_type: DALIInterpType = DALIInterpType.INTERP_LINEAR,
        pixel_origin: str = "corner",
        fill_value: float | Sequence[float] = (),
    ) -> None:
        self.matrix = _matrix(matrix) if len(matrix) else None
        self.size = _size(size) if len(size) else None
        self.inverse_map = bool(inverse_map)
        if border_mode not in BORDERS:
            raise ArgumentError(f"{_OP}: border_mode must be one of {', '.join(BORDERS)}, got {border_mode!r}")
        self.border = border_mode
        self.interp = interpolation(_OP, "interp_type", interp_type)
        self.centre_origin = centre_origin(_OP, pixel_origin)
        values = float_list(_OP, "fill_value", fill_value) if np.ndim(fill_value) else [float(fill_value)]
        if len(values) > 4:
            raise ArgumentError(f"{_OP}: fill_value takes at most 4 values (one per channel), got {len(values)}")
        self.fill = np.asarray(values or [0.0], np.float64)

    def bind_inputs(self, count: int, arg_inputs) -> None:
        if count == 2 and (self.matrix is not None or "matrix" in arg_inputs):
            raise ArgumentError(f"{_OP}: give the matrix as an argument or as a second input, not both")
        if count == 1 and self.matrix is None and "matrix" not in arg_inputs:
            raise ArgumentError(f"{_OP}: give matrix (an argument or argument input) or a second input")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout and layout not in _LAYOUTS:
            raise ArgumentError(
                f"{_OP}: expects HW or HWC images or FHWC sequences (channels last), got layout {layout!r}"
            )
        return layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        image = inputs[0]
        if image.dtype not in _TYPES:
            raise ValueError(f"{_OP}: takes uint8, int16, uint16 or float32 data, got {image.dtype}")
        if image.ndim not in (2, 3, 4):
            raise ValueError(f"{_OP}: expects HW or HWC images or FHWC sequences, got shape {tuple(image.shape)}")
        channels = 1 if image.ndim == 2 else image.shape[-1]
        if channels > 4:
            raise ValueError(f"{_OP}: images with more than 4 channels are not supported, got {channels}")
        if len(self.fill) > 1 and len(self.fill) != channels:
            raise ValueError(
                f"{_OP}: fill_value has {len(self.fill)} values for images of {channels} channels (one, or one each)"
            )
        fill = _saturated(np.resize(self.fill, channels), image.dtype)
        m = output_to_input(self._matrix(inputs, args), self.inverse_map, self.centre_origin)
        size = _size(per_sample(args["size"])) if "size" in args else self.size
        height, width = size if size is not None else image.shape[-3:-1] if image.ndim == 4 else image.shape[:2]
        if image.ndim < 4:
            return warp_image(xp, image, m, height, width, self.interp, self.border, fill)
        # a sequence's frames share the sample's matrix: warped at once as the channels of one image
        frames, rows, cols, channels = image.shape
        stacked = xp.ascontiguousarray(image.transpose(1, 2, 0, 3)).reshape(rows, cols, frames * channels)
        out = warp_image(xp, stacked, m, height, width, self.interp, self.border, np.tile(fill, frames))
        return xp.ascontiguousarray(out.reshape(height, width, frames, channels).transpose(2, 0, 1, 3))

    def _matrix(self, inputs, args) -> np.ndarray:
        if len(inputs) > 1:
            given = inputs[1].get() if hasattr(inputs[1], "get") else inputs[1]
            if np.shape(given) != (3, 3) or np.asarray(given).dtype != np.float32:
                raise ValueError(
                    f"{_OP}: the matrix input must be 3x3 float32 samples, got shape {np.shape(given)} "
                    f"of {np.asarray(given).dtype}"
                )
            return np.asarray(given)
        if "matrix" in args:
            return _matrix(per_sample(args["matrix"]))
        return self.matrix


def _matrix(value: Any) -> np.ndarray:
    values = np.asarray(value, dtype=np.float32).reshape(-1)
    if values.size != 9:
        raise ArgumentError(f"{_OP}: matrix must hold 9 numbers (3x3), got {values.size}")
    if not np.isfinite(values).all():
        raise ArgumentError(f"{_OP}: matrix must be finite, got {values.tolist()}")
    return values.reshape(3, 3)


def _size(value: Any) -> tuple[int, int]:
    values = np.asarray(value, dtype=np.float64).reshape(-1)
    if values.size != 2 or not np.isfinite(values).all():
        raise ArgumentError(f"{_OP}: size is [height, width], got {list(values)}")
    return tuple(max(int(math.copysign(math.floor(abs(v) + 0.5), v)), 1) for v in values)


def _saturated(fill: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The fill value as OpenCV converts it to the image's type (rounded to nearest, ties to even,
    and saturated for integers)."""
    if np.dtype(dtype).kind == "f":
        return fill.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(fill), info.min, info.max).astype(dtype)
