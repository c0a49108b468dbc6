"""``rotate``: rotate images counter-clockwise about their centre with bilinear (or, with
``interp_type=types.INTERP_NN``, nearest-neighbour) sampling.

The host path is Pillow's ``Image.rotate``; the GPU stage maps every output pixel
back through the same affine matrix (:func:`rotation`) and samples with Pillow's conventions
(pixel centres at +0.5, bilinear: clamped neighbours, uint8 results truncated; nearest: the pixel
under the mapped centre, in Pillow's 16.16 fixed point; samples whose source lies outside the image
take ``fill_value``). Without ``fill_value``, as in DALI, the source coordinates are clamped: the
border pixels repeat (the array path on the host too, as Pillow has no such border; bilinear,
it runs in torch's ``grid_sample`` where torch is installed, ``RAYPIPE_HOST_WARP=numpy`` aside).
DALI's rotate takes only nearest and linear interpolation (it refuses ``INTERP_CUBIC``), and so
does this one. ``DHWC`` volumes turn about an ``axis`` (:mod:`raypipe.operators.volume_rotation`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from PIL import Image

from ..errors import ArgumentError
from ..kernels.filters import LINEAR, NEAREST
from ..operator import Operator, Schema, as_scalar, register
from ..types import DALIInterpType
from .cast import dtype_or_alias, parse_dtype, round_half_away
from .resample import interp_kind
from .volume_rotation import rotate_volume, rotated_shape, rotation_matrix
from .warp_affine import host_torch, torch_warp

#: The interpolations DALI's rotate (its warp) takes.
ROTATE_FILTERS = {DALIInterpType.INTERP_NN: NEAREST, DALIInterpType.INTERP_LINEAR: LINEAR}

Affine = tuple[float, float, float, float, float, float]


def rotation(width: int, height: int, angle: float, expand: bool) -> tuple[int, int, Affine]:
    """Output ``(width, height)`` and the output-to-input affine matrix of Pillow's rotate.

    With ``expand`` the output grows to hold the whole rotated image (Pillow's size rule:
    ceil/floor of the rotated corners); otherwise it keeps the input size.
    """
    angle = angle % 360.0
    if angle == 0:
        return width, height, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    theta = -math.radians(angle)
    a, b = round(math.cos(theta), 15), round(math.sin(theta), 15)
    d, e = round(-math.sin(theta), 15), round(math.cos(theta), 15)
    cx, cy = width / 2, height / 2
    c = a * -cx + b * -cy + cx
    f = d * -cx + e * -cy + cy
    if expand:
        corners = [
            (a * x + b * y + c, d * x + e * y + f) for x, y in ((0, 0), (width, 0), (width, height), (0, height))
        ]
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        new_w = math.ceil(max(xs)) - math.floor(min(xs))
        new_h = math.ceil(max(ys)) - math.floor(min(ys))
        tx, ty = -(new_w - width) / 2.0, -(new_h - height) / 2.0
        c, f = a * tx + b * ty + c, d * tx + e * ty + f
        width, height = new_w, new_h
    return width, height, (a, b, c, d, e, f)


def rotation_into(width: int, height: int, angle: float, out_width: int, out_height: int) -> Affine:
    """The output-to-input matrix of Pillow's rotate by ``angle`` into an ``out_width`` x
    ``out_height`` canvas, the centres aligned (as ``expand`` aligns them)."""
    a, b, c, d, e, f = rotation(width, height, angle, False)[2]
    tx, ty = -(out_width - width) / 2.0, -(out_height - height) / 2.0
    return a, b, a * tx + b * ty + c, d, e, d * tx + e * ty + f


def quarter_turns(angle: float, width: int, height: int, expand: bool) -> int | None:
    """Counter-clockwise quarter turns (1-3) where Pillow's rotate transposes the image instead of
    resampling it (a multiple of 90 degrees that fits: 180, or any with ``expand`` or a square image),
    else None."""
    angle = angle % 360.0
    if angle == 0 or angle % 90 != 0 or (angle != 180 and not expand and width != height):
        return None
    return int(angle // 90)


def warp_affine(
    xp: ModuleType, image: Any, width: int, height: int, matrix: Affine, fill_value: float | None, kind: int = LINEAR
) -> Any:
    """Sample HWC ``image`` at ``matrix`` applied to each output pixel centre (bilinear, or nearest
    for ``kind`` :data:`NEAREST`; Pillow rules); outside the image ``fill_value``, or with None the
    nearest border pixel (clamped coordinates)."""
    if kind == NEAREST:
        return _nearest(xp, image, width, height, matrix, fill_value)
    a, b, c, d, e, f = matrix
    in_h, in_w = image.shape[:2]
    xs = xp.arange(width, dtype=xp.float64)[None, :] + 0.5
    ys = xp.arange(height, dtype=xp.float64)[:, None] + 0.5
    sx = a * xs + b * ys + c
    sy = d * xs + e * ys + f
    inside = (sx >= 0) & (sx < in_w) & (sy >= 0) & (sy < in_h)
    sx, sy = sx - 0.5, sy - 0.5
    x0, y0 = xp.floor(sx), xp.floor(sy)
    dx, dy = (sx - x0)[..., None], (sy - y0)[..., None]
    xa, xb = xp.clip(x0, 0, in_w - 1).astype(xp.int64), xp.clip(x0 + 1, 0, in_w - 1).astype(xp.int64)
    ya, yb = xp.clip(y0, 0, in_h - 1).astype(xp.int64), xp.clip(y0 + 1, 0, in_h - 1).astype(xp.int64)
    pixels = image.astype(xp.float64)
    top = pixels[ya, xa] + (pixels[ya, xb] - pixels[ya, xa]) * dx
    bottom = pixels[yb, xa] + (pixels[yb, xb] - pixels[yb, xa]) * dx
    values = top + (bottom - top) * dy
    if fill_value is not None:
        values = xp.where(inside[..., None], values, fill_value)
    if np.issubdtype(image.dtype, np.integer):
        info = np.iinfo(image.dtype)
        values = xp.clip(xp.floor(values), info.min, info.max)
    return values.astype(image.dtype)


def _fixed(value: float) -> int:
    """``value`` in 16.16 fixed point, rounded as Pillow's ``FIX``."""
    return math.floor(value * 65536.0 + 0.5)


def _nearest(xp: ModuleType, image: Any, width: int, height: int, matrix: Affine, fill_value: float | None) -> Any:
    """Nearest-neighbour sampling as Pillow's affine transform computes it (images under 32768 pixels
    a side): source coordinates in 16.16 fixed point, the pixel at their integer part, ``fill_value``
    where that lies outside the image (None: the nearest border pixel)."""
    a, b, c, d, e, f = matrix
    in_h, in_w = image.shape[:2]
    xs = xp.arange(width, dtype=xp.int64)[None, :]
    ys = xp.arange(height, dtype=xp.int64)[:, None]
    cols = (_fixed(a) * xs + _fixed(b) * ys + _fixed(c + b * 0.5 + a * 0.5)) >> 16
    rows = (_fixed(d) * xs + _fixed(e) * ys + _fixed(f + e * 0.5 + d * 0.5)) >> 16
    inside = (cols >= 0) & (cols < in_w) & (rows >= 0) & (rows < in_h)
    picked = image[xp.clip(rows, 0, in_h - 1), xp.clip(cols, 0, in_w - 1)]
    if fill_value is None:
        return picked
    return xp.where(inside[..., None], picked, xp.asarray(_fill(image.dtype, fill_value)))


def _fill(dtype: np.dtype, fill_value: float) -> np.ndarray:
    """``fill_value`` as ``dtype``: floored and saturated for integers, as the bilinear path stores it."""
    if not np.issubdtype(dtype, np.integer):
        return np.asarray(fill_value, dtype=dtype)
    info = np.iinfo(dtype)
    return np.asarray(np.clip(math.floor(fill_value), info.min, info.max)).astype(dtype)


@register
class Rotate(Operator):
    """Rotate HWC images, or every frame of FHWC sequences alike, by ``angle`` degrees
    counter-clockwise (per sample when an argument input); ``DHWC`` volumes about ``axis``.

    By default the output grows to fit the rotated image; ``keep_size=True`` keeps the
    input size. Uncovered pixels take ``fill_value``, or, left out, as in DALI, the nearest border
    pixel's value.
    """

    schema = Schema("rotate", devices=("cpu", "gpu"), arg_inputs=("angle", "size", "axis"))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(
        self,
        angle: float | None = None,
        keep_size: bool = False,
        fill_value: float | None = None,
        interp_type=None,
        size: Sequence[float] | None = None,
        dtype=None,
        output_dtype=None,
        axis: Sequence[float] | None = None,
    ) -> None:
        """``interp_type``: ``types.INTERP_LINEAR`` (the default) or ``types.INTERP_NN``; ``size``:
        the output's ``(height, width)`` (rounded), the rotated image centred in it; ``dtype``: the
        input's type (the default) or ``types.FLOAT``, which rotates the input's values as floats
        (unrounded), as DALI's; ``output_dtype`` is DALI's deprecated alias of ``dtype``; ``axis``:
        ``(x, y, z)``, what a volume turns about (images and sequences ignore it, as DALI's), with
        ``size`` then ``(depth, height, width)``."""
        dtype = dtype_or_alias("rotate", dtype, output_dtype)
        self.dtype = None if dtype is None else parse_dtype("rotate", "dtype", dtype)
        self.angle = None if angle is None else self._angle(angle)
        self.keep_size = bool(keep_size)
        self.axis = None if axis is None else self._axis(axis)
        self.layout = ""  # the input's, once the graph is built (output_layout)
        self.given_size = size
        self.size = None if size is None or len(size) in (0, 3) else self._size(size)
        if self.size is not None and self.keep_size:
            raise ArgumentError("rotate: give size or keep_size=True, not both")
        if fill_value is not None and (
            isinstance(fill_value, bool) or not isinstance(fill_value, (int, float, np.integer, np.floating))
        ):
            raise ArgumentError(f"rotate: fill_value must be a number, got {fill_value!r}")
        self.fill_value = None if fill_value is None else float(fill_value)
        self.kind = LINEAR if interp_type is None else interp_kind("rotate", "interp_type", interp_type, ROTATE_FILTERS)

    @staticmethod
    def _angle(value: Any) -> float:
        try:
            angle = float(as_scalar(value))
        except (TypeError, ValueError):
            raise ArgumentError(f"rotate: angle must be a number of degrees, got {value!r}") from None
        if not math.isfinite(angle):
            raise ArgumentError(f"rotate: angle must be finite, got {value!r}")
        return angle

    @staticmethod
    def _size(value: Any) -> tuple[int, int]:
        try:
            height, width = (float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1))
        except (TypeError, ValueError):
            raise ArgumentError(f"rotate: size must be (height, width), got {value!r}") from None
        if not (math.isfinite(height) and math.isfinite(width)) or round(height) < 1 or round(width) < 1:
            raise ArgumentError(f"rotate: size must be positive, got {value!r}")
        return round(height), round(width)

    @staticmethod
    def _axis(value: Any) -> np.ndarray:
        try:
            axis = np.asarray(value, dtype=np.float64).reshape(-1)
            rotation_matrix(axis, 0.0)
        except (TypeError, ValueError):
            raise ArgumentError(
                f"rotate: axis must be three numbers (x, y, z) of non-zero length, got {value!r}"
            ) from None
        return axis

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The input's, kept to tell volumes from images and sequences (:meth:`_is_volume`)."""
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def _is_volume(self, sample: Any, args: dict[str, Any]) -> bool:
        """Whether ``sample`` is a volume: a ``DHWC`` or ``DHW`` layout, or four dimensions, no layout
        and an axis."""
        if self.layout:
            return self.layout in ("DHWC", "DHW")
        return sample.ndim == 4 and (self.axis is not None or "axis" in args)

    def _sample_size(self, args: dict[str, Any]) -> tuple[int, int] | None:
        """This sample's output ``(height, width)``; None: the rotation's own (or the input's)."""
        if "size" in args:
            return self._size(args["size"])
        if self.size is None and self.given_size is not None and len(self.given_size):
            raise ValueError("rotate: size (depth, height, width) is a volume's; an image's is (height, width)")
        return self.size

    def _volume(self, xp: ModuleType, volume: Any, args: dict[str, Any]) -> Any:
        """A ``DHWC`` (or ``DHW``) volume turned by the sample's angle about its axis (:mod:`.volume_rotation`)."""
        if volume.ndim == 3:
            return self._volume(xp, volume[..., None], args)[..., 0]
        if volume.ndim != 4:
            raise ValueError(f"rotate: expects a DHWC or DHW volume, got a sample of shape {tuple(volume.shape)}")
        axis = self._axis(args["axis"]) if "axis" in args else self.axis
        if axis is None:
            raise ValueError("rotate: a volume (DHWC) needs axis=(x, y, z), the axis to turn it about")
        matrix = rotation_matrix(axis, self._sample_angle(args))
        depth, height, width = volume.shape[:3]
        given = args.get("size", self.given_size)
        if given is not None and len(np.ravel(given)):
            sizes = np.asarray(given, dtype=np.float64).reshape(-1)
            if sizes.size != 3 or not np.all(np.isfinite(sizes)) or np.any(np.rint(sizes) < 1):
                raise ValueError(f"rotate: a volume's size is (depth, height, width), positive, got {list(sizes)}")
            shape = tuple(int(v) for v in round_half_away(np, sizes))
        elif self.keep_size:
            shape = (depth, height, width)
        else:
            shape = rotated_shape(depth, height, width, matrix)
        out_dtype = self.dtype if self.dtype is not None else volume.dtype
        self._typed(volume)  # the input's type or float, as in DALI
        return rotate_volume(xp, volume, shape, matrix, self._fill_for(volume.dtype), self.kind, out_dtype)

    def bind_inputs(self, count, arg_inputs) -> None:
        if "size" in arg_inputs and self.keep_size:
            raise ArgumentError("rotate: give size or keep_size=True, not both")

    def fit_frames(self, frame_args: list[dict[str, Any]], frame_shape: Sequence[int]) -> list[dict[str, Any]]:
        """Frames rotated by angles of their own share one canvas, each frame's fitting size at its
        largest along each axis (as DALI's rotate of a sequence with per-frame angles)."""
        if self.keep_size or any(self._sample_size(args) is not None for args in frame_args):
            return frame_args
        height, width = int(frame_shape[0]), int(frame_shape[1])
        sizes = [rotation(width, height, self._sample_angle(args), True)[:2] for args in frame_args]
        canvas = (max(h for _, h in sizes), max(w for w, _ in sizes))
        return [{**args, "size": canvas} for args in frame_args]

    def _sample_angle(self, args: dict[str, Any]) -> float:
        if "angle" in args:
            return self._angle(args["angle"])
        if self.angle is None:
            raise ArgumentError("rotate: angle is required (a number or a per-sample argument input)")
        return self.angle

    def _typed(self, image: Any) -> Any:
        """``image`` as the type to rotate in: its own, or float32 for ``dtype=types.FLOAT``; another
        ``dtype`` is an error, as in DALI (its rotate gives the input's type or float)."""
        if self.dtype is None or self.dtype == image.dtype:
            return image
        if self.dtype != np.float32:
            raise ValueError(
                f"rotate: cannot give {self.dtype} from {image.dtype} input; dtype must be the input's type "
                "or types.FLOAT, as in DALI"
            )
        return image.astype(np.float32)

    def _fill_for(self, dtype: np.dtype) -> float | None:
        """``fill_value`` for an input of ``dtype``: as given, or with ``dtype=types.FLOAT`` and integer
        input first rounded (ties away from zero) and saturated to the input's type, as DALI's."""
        if self.fill_value is None or self.dtype is None or self.dtype == dtype or dtype.kind == "f":
            return self.fill_value
        info = np.iinfo(dtype)
        return float(np.clip(round_half_away(np, self.fill_value), info.min, info.max))

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if self._is_volume(image, args):
            return self._volume(xp, image, args)
        if image.ndim == 4:  # a sequence (FHWC): every frame by the sample's angle, as DALI
            return xp.stack([self.compute(xp, [frame], args, ctx) for frame in image])
        if image.ndim != 3:
            raise ValueError(f"rotate: expects an HWC image or an FHWC sequence, got shape {tuple(image.shape)}")
        fill = self._fill_for(image.dtype)
        image = self._typed(image)
        angle = self._sample_angle(args)
        size = self._sample_size(args)
        if size is not None:
            matrix = rotation_into(image.shape[1], image.shape[0], angle, size[1], size[0])
            return warp_affine(xp, image, size[1], size[0], matrix, fill, self.kind)
        turns = quarter_turns(angle, image.shape[1], image.shape[0], not self.keep_size)
        if turns is not None:  # Pillow, and DALI, turn the pixels whatever the interpolation
            return xp.ascontiguousarray(xp.rot90(image, turns))
        width, height, matrix = rotation(image.shape[1], image.shape[0], angle, not self.keep_size)
        return warp_affine(xp, image, width, height, matrix, fill, self.kind)

    def preload(self) -> None:
        host_torch()

    def _clamped_with_torch(self, image: np.ndarray, angle: float, size: tuple[int, int] | None) -> np.ndarray | None:
        """Bilinear rotation with the border repeated, by torch's ``grid_sample`` where torch is
        installed (a tenth of the array path's time): the array path's values computed in float32,
        truncated alike (within one level of it). None without torch, or at a quarter turn."""
        torch = host_torch()
        width, height = image.shape[1], image.shape[0]
        if torch is None or (size is None and quarter_turns(angle, width, height, not self.keep_size) is not None):
            return None
        if size is None:
            out_w, out_h, matrix = rotation(width, height, angle, not self.keep_size)
        else:
            (out_h, out_w), matrix = size, rotation_into(width, height, angle, size[1], size[0])
        values = torch_warp(torch, image, np.asarray(matrix).reshape(2, 3), out_h, out_w, None)
        info = np.iinfo(image.dtype)
        return np.clip(np.floor(values), info.min, info.max).astype(image.dtype)

    def run_sample(self, inputs, args, ctx):
        image = inputs[0]
        if self._is_volume(image, args):
            return self._volume(np, image, args)
        if self.dtype is not None and self.dtype != image.dtype:
            return self.compute(np, inputs, args, ctx)
        if image.ndim == 4:  # a sequence (FHWC): every frame by the sample's angle, as DALI
            return np.stack([self.run_sample([frame], args, ctx) for frame in image])
        if self.fill_value is None and self.kind == LINEAR and image.ndim == 3 and image.dtype.kind in "iu":
            rotated = self._clamped_with_torch(image, self._sample_angle(args), self._sample_size(args))
            return rotated if rotated is not None else self.compute(np, inputs, args, ctx)
        if image.ndim != 3 or image.dtype != np.uint8 or self.fill_value is None or self._sample_size(args):
            return self.compute(np, inputs, args, ctx)
        angle = self._sample_angle(args)
        fill = int(np.clip(math.floor(self.fill_value), 0, 255))
        planes = [image] if image.shape[2] == 3 else [image[:, :, c] for c in range(image.shape[2])]
        rotated = [
            np.asarray(
                Image.fromarray(p).rotate(
                    angle,
                    resample=Image.Resampling.NEAREST if self.kind == NEAREST else Image.Resampling.BILINEAR,
                    expand=not self.keep_size,
                    fillcolor=(fill,) * 3 if p.ndim == 3 else fill,
                )
            )
            for p in planes
        ]
        return rotated[0] if image.shape[2] == 3 else np.stack(rotated, axis=2)
