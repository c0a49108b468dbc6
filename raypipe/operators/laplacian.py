"""``laplacian``: the sum of the second derivatives along the spatial axes of images and volumes,
as DALI's (each derivative a separable convolution, OpenCV's Sobel-style windows).

The partial derivative along axis ``i`` convolves axis ``i`` with a derivative window of
``window_size[i]`` (3 to 31, odd): the binomial smoothing window of ``window_size[i] - 2``
differenced twice; every other axis ``j`` with the binomial window (a row of Pascal's triangle,
summed in float32 as DALI's) of ``smoothing_size[j]`` (1 to 31, odd; by default
``window_size[i]``, the derivative's own size). Each partial is multiplied by its ``scale`` (one
value or one per axis), or with ``normalized_kernel`` by ``2 ** (n + 2 - s)`` (``s`` the sum of
the partial's window sizes, ``n`` the number of spatial axes), and the partials are added in axis
order. The border mirrors without repeating the edge (``dcb|abcd|cba``), as ``gaussian_blur``'s.

The spatial axes are those of the layout other than ``C`` and ``F``, which must come before them
(a ``C`` may also come last), or every axis (at most 3) of input without a layout. As DALI's CPU
operator, this computes in float32, convolving the innermost axis first, so its values equal
DALI's bit for bit; an integer result rounds half away from zero and saturates to ``dtype`` (the
input's type, or float32). Only float16 output differs: DALI's comes out up to 2 float16 units in
the last place from the float32 result rounded, which this returns.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import float_list, per_sample
from .cast import parse_dtype, round_half_away, saturate_cast
from .gaussian_blur import blur_axis

OP = "laplacian"
MAX_WINDOW = 31


def smoothing_window(size: int) -> np.ndarray:
    """The binomial smoothing weights of ``size`` taps (``[1, 2, 1]`` for 3), summed row by row of
    Pascal's triangle in float32 as DALI does (above 2**24 they round as DALI's)."""
    weights = np.ones(1, np.float32)
    for _ in range(size - 1):
        weights = np.append(weights, np.float32(0)) + np.insert(weights, 0, np.float32(0))
    return weights


def derivative_window(size: int) -> np.ndarray:
    """The second-derivative weights of ``size`` taps (``[1, -2, 1]`` for 3): the smoothing window
    of ``size - 2`` differenced twice in float32, as DALI does."""
    weights = smoothing_window(size - 2)
    for _ in range(2):
        weights = np.diff(weights, prepend=np.float32(0), append=np.float32(0))
    return weights


def convolution_axes(op: str, layout: str, ndim: int) -> list[int]:
    """The spatial axes of a sample of ``ndim`` dimensions, by DALI's rules for its convolutions;
    ValueError (a property of the data) when the layout does not fit them."""
    if not layout:
        if ndim > 3:
            raise ValueError(f"{op}: input without a layout has at most 3 dimensions, got {ndim}")
        return list(range(ndim))
    if len(layout) != ndim:
        raise ValueError(f"{op}: layout {layout!r} does not fit a sample of {ndim} dimensions")
    axes = [axis for axis, name in enumerate(layout) if name not in "CF"]
    if not axes:
        raise ValueError(f"{op}: layout {layout!r} has no spatial axes")
    inner, after = layout[axes[0] : axes[-1] + 1], layout[axes[-1] + 1 :]
    if "C" in inner or "F" in inner or after not in ("", "C"):
        raise ValueError(
            f"{op}: layout {layout!r} is not supported: frames and channels go before the spatial axes "
            "(channels may also go last)"
        )
    return axes


def _sizes(name: str, value: Any, low: int) -> tuple[int, ...]:
    """A window-size argument (one or one per axis) as odd ints in ``[low, 31]``."""
    sizes = float_list(OP, name, value)
    if not all(s == int(s) and low <= s <= MAX_WINDOW and int(s) % 2 for s in sizes):
        raise ArgumentError(f"{OP}: {name} must be odd integers from {low} to {MAX_WINDOW}, got {value!r}")
    return tuple(int(s) for s in sizes)


def _per_axis(name: str, values: Sequence, count: int) -> list:
    """One value per spatial axis from one value or ``count`` of them."""
    if len(values) not in (1, count):
        raise ValueError(f"{OP}: {name} takes one value or one per spatial axis ({count}), got {len(values)}")
    return list(values) * count if len(values) == 1 else list(values)


@register
class Laplacian(Operator):
    """The Laplacian of the spatial axes; ``window_size``, ``smoothing_size`` and ``scale`` may be
    per-sample argument inputs."""

    schema = Schema(OP, devices=("cpu", "gpu"), arg_inputs=("window_size", "smoothing_size", "scale"))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(
        self,
        window_size: int | Sequence[int] = 3,
        smoothing_size: int | Sequence[int] | None = None,
        normalized_kernel: bool = False,
        scale: float | Sequence[float] | None = None,
        dtype=None,
    ) -> None:
        self.window_size = _sizes("window_size", window_size, 3)
        self.smoothing_size = None if smoothing_size is None else _sizes("smoothing_size", smoothing_size, 1)
        if not isinstance(normalized_kernel, (bool, np.bool_)):
            raise ArgumentError(f"{OP}: normalized_kernel must be a bool, got {normalized_kernel!r}")
        self.normalized = bool(normalized_kernel)
        if self.normalized and scale is not None:
            raise ArgumentError(f"{OP}: scale cannot be given with normalized_kernel=True")
        self.scale = (1.0,) if scale is None else float_list(OP, "scale", scale)
        self.dtype = None if dtype is None else parse_dtype(OP, "dtype", dtype)
        self.layout = ""

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        if self.normalized and "scale" in arg_inputs:
            raise ArgumentError(f"{OP}: scale cannot be given with normalized_kernel=True")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def _partials(self, args: dict[str, Any], count: int) -> list[tuple[list[np.ndarray], np.float32]]:
        """For each spatial axis's partial derivative: the window of every spatial axis and the
        scale, from one sample's arguments."""
        windows = per_sample(args["window_size"]) if "window_size" in args else self.window_size
        sizes = [_sizes("window_size", w, 3)[0] for w in _per_axis("window_size", windows, count)]
        smoothing = per_sample(args["smoothing_size"]) if "smoothing_size" in args else self.smoothing_size
        if smoothing is not None:
            smoothing = [_sizes("smoothing_size", s, 1)[0] for s in _per_axis("smoothing_size", smoothing, count)]
        scales = _per_axis("scale", per_sample(args["scale"]) if "scale" in args else self.scale, count)
        partials = []
        for i, size in enumerate(sizes):
            widths = [size if j == i or smoothing is None else smoothing[j] for j in range(count)]
            scale = 2.0 ** (count + 2 - sum(widths)) if self.normalized else scales[i]
            windows_i = [derivative_window(w) if j == i else smoothing_window(w) for j, w in enumerate(widths)]
            partials.append((windows_i, np.float32(scale)))
        return partials

    def _laplacian(self, xp: ModuleType, data: Any, axes: list[int], partials: list) -> Any:
        """``data`` through every partial (innermost axis first, as DALI), summed, then cast."""
        if data.dtype == np.float64 or data.dtype.kind not in "iuf":
            raise ValueError(f"{OP}: the input must be an integer, float16 or float32 type, got {data.dtype}")
        dtype = data.dtype if self.dtype is None else self.dtype
        if dtype not in (data.dtype, np.float32):
            raise ValueError(f"{OP}: dtype must be the input's type ({data.dtype}) or float32, got {dtype}")
        values = data.astype(np.float32)
        total = None
        for windows, scale in partials:
            out = values
            for axis, weights in reversed(list(zip(axes, windows, strict=True))):
                if len(weights) > 1:
                    out = blur_axis(xp, out, axis, weights)
            out = out * scale
            total = out if total is None else total + out
        if dtype.kind in "iu":
            total = round_half_away(xp, total)
        return saturate_cast(xp, total, dtype, overwrite=True)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        data = inputs[0]
        axes = convolution_axes(OP, self.layout, data.ndim)
        return self._laplacian(xp, data, axes, self._partials(args, len(axes)))

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """A batch held in one array, without per-sample arguments, in one pass per window (a few
        array operations for the whole batch); otherwise sample by sample."""
        batch = inputs[0]
        if hasattr(batch, "ndim") and len(batch) and not args:
            axes = convolution_axes(OP, self.layout, batch.ndim - 1)
            return self._laplacian(xp, batch, [axis + 1 for axis in axes], self._partials({}, len(axes)))
        return super().run_batch(xp, inputs, args, ctxs)
