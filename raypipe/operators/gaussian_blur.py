"""``gaussian_blur``: a separable Gaussian filter over the spatial axes of images and volumes.

The spatial axes are those of the layout other than ``C`` (channels) and ``F`` (frames), or every
axis of input without a layout; ``sigma`` and ``window_size`` give one value, or one per spatial
axis in the layout's order, and may be per-sample argument inputs. As in DALI, a missing
``window_size`` is ``2 * ceil(3 * sigma) + 1`` and a missing ``sigma`` is OpenCV's
``0.3 * ((window_size - 1) / 2 - 1) + 0.8``; the weights ``exp(-x**2 / (2 * sigma**2))`` are
normalized to sum to 1, and the border mirrors without repeating the edge (``dcb|abcd|cba``).
Each axis is filtered in float32; the result is rounded and saturated to ``dtype`` (the input's
type by default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import per_sample
from .cast import parse_dtype, saturate_cast

_OP = "gaussian_blur"


def gaussian_window(sigma: float, size: int) -> np.ndarray:
    """The normalized float32 weights of one axis (``size`` odd)."""
    radius = size // 2
    if sigma == 0:
        weights = np.zeros(size)
        weights[radius] = 1.0
        return weights.astype(np.float32)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-(x**2) / (2.0 * sigma * sigma))
    return (weights / weights.sum()).astype(np.float32)


def window_parameters(sigma: float, size: int) -> tuple[float, int]:
    """One axis's ``(sigma, window_size)`` from what was given (0 meaning not given)."""
    if sigma < 0 or size < 0:
        raise ArgumentError(f"{_OP}: sigma and window_size must not be negative, got {sigma} and {size}")
    if sigma == 0 and size == 0:
        raise ArgumentError(f"{_OP}: give sigma, window_size or both")
    if size == 0:
        size = 2 * math.ceil(3 * sigma) + 1
    elif size % 2 == 0:
        raise ArgumentError(f"{_OP}: window_size must be odd, got {size}")
    if sigma == 0:
        sigma = 0.3 * ((size - 1) * 0.5 - 1) + 0.8
    return sigma, size


def border_indices(extent: int, before: int, after: int, border: str = "reflect_101") -> np.ndarray:
    """The source index of each position from ``-before`` to ``extent + after - 1`` along an axis of
    ``extent`` values, under DALI's (OpenCV's) border modes, however far out: ``reflect_101``
    (``dcb|abcd|cba``), ``reflect_1001`` (``cba|abcd|dcb``), ``wrap`` (``bcd|abcd|abc``) and
    ``clamp`` (``aaa|abcd|ddd``); ``constant`` marks the positions outside with -1."""
    index = np.arange(-before, extent + after)
    if border == "constant":
        return np.where((index >= 0) & (index < extent), index, -1)
    if border == "clamp":
        return np.clip(index, 0, extent - 1)
    if border == "wrap":
        return index % extent
    if border == "reflect_1001":
        index = index % (2 * extent)
        return np.where(index >= extent, 2 * extent - 1 - index, index)
    if extent == 1:
        return np.zeros_like(index)
    period = 2 * (extent - 1)
    index = index % period
    return np.where(index >= extent, period - index, index)


def blur_axis(xp: ModuleType, data: Any, axis: int, weights: np.ndarray) -> Any:
    """``data`` (float32) filtered along ``axis`` with ``weights``, mirrored at the borders."""
    radius = len(weights) // 2
    if radius == 0:
        return data * weights[0]
    extent = data.shape[axis]
    padded = xp.take(data, xp.asarray(border_indices(extent, radius, radius)), axis=axis)
    out = None
    for k, weight in enumerate(weights):
        window = [slice(None)] * data.ndim
        window[axis] = slice(k, k + extent)
        term = padded[tuple(window)] * weight
        out = term if out is None else out + term
    return out


@register
class GaussianBlur(Operator):
    """Blur the spatial axes with a Gaussian of ``sigma`` (and/or ``window_size``); per-sample
    argument inputs for both."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("sigma", "window_size"))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, sigma: float | Sequence[float] = 0.0, window_size: int | Sequence[int] = 0, dtype=None):
        self.sigma = tuple(float(s) for s in np.atleast_1d(sigma))
        self.window_size = tuple(int(w) for w in np.atleast_1d(window_size))
        if any(w < 0 or (w and w % 2 == 0) for w in self.window_size) or any(s < 0 for s in self.sigma):
            raise ArgumentError(f"{_OP}: window_size must be odd and sigma not negative, got {window_size}, {sigma}")
        self.dtype = None if dtype is None else parse_dtype(_OP, "dtype", dtype)
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def _spatial_axes(self, ndim: int) -> list[int]:
        if not self.layout:
            return list(range(ndim))
        if len(self.layout) != ndim:
            raise ValueError(f"{_OP}: layout {self.layout!r} does not fit a sample of {ndim} dimensions")
        return [axis for axis, name in enumerate(self.layout) if name not in "CF"]

    def _windows(self, args: dict[str, Any], count: int) -> list[np.ndarray]:
        """The weights of each of ``count`` spatial axes for one sample's arguments."""
        sigmas = [float(s) for s in per_sample(args["sigma"])] if "sigma" in args else self.sigma
        sizes = [int(w) for w in per_sample(args["window_size"])] if "window_size" in args else self.window_size
        sigmas = list(sigmas) * count if len(sigmas) == 1 else list(sigmas)
        sizes = list(sizes) * count if len(sizes) == 1 else list(sizes)
        if len(sigmas) != count or len(sizes) != count:
            raise ValueError(f"{_OP}: sigma and window_size give one value or one per spatial axis ({count})")
        return [gaussian_window(*window_parameters(s, w)) for s, w in zip(sigmas, sizes, strict=True)]

    def _blur(self, xp: ModuleType, data: Any, axes: list[int], windows: list[np.ndarray]) -> Any:
        out = data.astype(np.float32)
        for axis, weights in zip(axes, windows, strict=True):
            out = blur_axis(xp, out, axis, weights)
        dtype = data.dtype if self.dtype is None else self.dtype
        return saturate_cast(xp, out, dtype, overwrite=True)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        data = inputs[0]
        axes = self._spatial_axes(data.ndim)
        return self._blur(xp, data, axes, self._windows(args, len(axes)))

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """A batch held in one array with the same window for every sample in one pass per axis (a
        few array operations for the whole batch); otherwise sample by sample."""
        batch = inputs[0]
        if hasattr(batch, "ndim") and len(batch):
            axes = self._spatial_axes(batch.ndim - 1)
            windows = [self._windows({k: v[i] for k, v in args.items()}, len(axes)) for i in range(len(batch))]
            if all(
                len(w) == len(windows[0]) and all(np.array_equal(a, b) for a, b in zip(w, windows[0])) for w in windows
            ):
                return self._blur(xp, batch, [axis + 1 for axis in axes], windows[0])
        return [
            self.compute(xp, [x], {k: v[i] for k, v in args.items()}, ctx)
            for i, (x, ctx) in enumerate(zip(batch, ctxs, strict=True))
        ]
