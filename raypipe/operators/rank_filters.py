"""``experimental.median_blur``, ``experimental.dilate`` and ``experimental.erode``: each pixel
replaced by the median, the largest or the smallest value of a rectangle of its neighbours.

DALI runs these on the GPU only (CV-CUDA's operators), and its own tests check them against
OpenCV's ``medianBlur``, ``dilate`` and ``erode``; here ``cpu`` and ``gpu`` compute them in array
code with those definitions:

- Sizes and points are ``[width, height]`` (``[x, y]``), as OpenCV and CV-CUDA order them: one
  number serves both. A window of size ``k`` around ``x`` covers ``x - a`` to ``x - a + k - 1``
  with ``a`` the anchor, by default ``k // 2``.
- ``median_blur``: the median of the ``window_size`` window (of an even count, the upper one),
  outside pixels replicating the edge (OpenCV's and CV-CUDA's border).
- ``dilate`` / ``erode``: the maximum / minimum over ``mask_size`` at ``anchor``; outside pixels
  by ``border_mode`` (``constant``, DALI's default, leaves them out, as OpenCV's default border
  value does; ``replicate``, ``reflect``, ``reflect_101``, ``wrap``). ``iterations`` greater than
  one grow the rectangle by ``mask_size - 1`` per added iteration, the anchor scaled with it
  (OpenCV's rule for rectangles, which DALI's documentation states).

Each channel is filtered on its own. Layouts ``HW``, ``HWC``, ``FHWC``, ``CHW``, ``FCHW`` (by
dimensions without one: ``HW``, ``HWC``, ``FHWC``); sizes and anchors may be per-sample argument
inputs, and for ``dilate``/``erode`` per frame (``fn.per_frame``).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from .axes import int_list, per_sample
from .pixel_sampling import BORDERS

_LAYOUTS = ("HW", "HWC", "FHWC", "CHW", "FCHW")
_BY_NDIM = {2: "HW", 3: "HWC", 4: "FHWC"}
#: OpenCV's border names as numpy's (and cupy's) ``pad`` modes
_PAD_MODES = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}
#: elements a median's stack of shifted views may hold at once (the rows are filtered in chunks)
_MEDIAN_CHUNK = 1 << 24


def pair(op: str, name: str, value: Any) -> tuple[int, int]:
    """A ``[width, height]`` argument (one number for both) as two ints."""
    values = int_list(op, name, value)
    if len(values) == 1:
        values = values * 2
    if len(values) != 2:
        raise ArgumentError(f"{op}: {name} is [width, height] or one number for both, got {list(values)}")
    return int(values[0]), int(values[1])


class _RankFilter(Operator):
    """What the three filters share: the layout, the images as planes, the padding."""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout and layout not in _LAYOUTS:
            raise ArgumentError(
                f"{self.schema.name}: expects images or sequences laid out as {', '.join(_LAYOUTS)}, got {layout!r}"
            )
        self.layout = layout
        return layout

    layout = ""

    def _planes(self, image: Any, batched: bool = False) -> tuple[Any, Any]:
        """The image (or, ``batched``, a batch of equally shaped samples in one array) as planes
        ``(n, height, width, channels)`` (1 channel for a channel-first layout, whose channels become
        planes), and a function restoring the input's shape."""
        ndim = image.ndim - batched
        layout = self.layout
        if len(layout) == ndim + 1 and layout.startswith("F"):  # one frame of a sequence
            layout = layout[1:]
        layout = layout or _BY_NDIM.get(ndim, "")
        if len(layout) != ndim:
            raise ValueError(
                f"{self.schema.name}: a sample of shape {tuple(image.shape[batched:])} does not fit the layout "
                f"{layout!r}"
            )
        if image.dtype.kind not in "iuf" or image.dtype == np.float16:
            raise ValueError(f"{self.schema.name}: takes integer, float32 or float64 images, got {image.dtype}")
        shape = image.shape
        if layout in ("CHW", "FCHW", "HW"):
            planes = image.reshape(-1, shape[-2], shape[-1], 1)
        else:
            planes = image.reshape(-1, *shape[-3:])
        return planes, lambda out: out.reshape(shape)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        planes, restore = self._planes(inputs[0])
        return restore(self.filter(xp, planes, args))

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """A batch of equally shaped samples with the same arguments in one pass over all their
        planes (a few array operations whatever the batch size); otherwise sample by sample."""
        same_args = all(all(np.array_equal(v, values[0]) for v in values) for values in args.values())
        batch = launch.stacked(xp, inputs[0]) if same_args else None
        if batch is None:
            return super().run_batch(xp, inputs, args, ctxs)
        planes, restore = self._planes(batch, batched=True)
        return restore(self.filter(xp, planes, {k: v[0] for k, v in args.items()}))

    def filter(self, xp: ModuleType, planes: Any, args: dict[str, Any]) -> Any:
        """The filter on planes ``(n, height, width, channels)`` with one sample's arguments."""
        raise NotImplementedError


def _padded(xp: ModuleType, planes: Any, size: tuple[int, int], anchor: tuple[int, int], mode: str, value: Any) -> Any:
    """``planes`` padded for a window of ``size`` ``(w, h)`` at ``anchor`` ``(x, y)``: the pixels
    outside by numpy's ``mode`` (``"constant"`` with ``value``)."""
    (w, h), (ax, ay) = size, anchor
    widths = ((0, 0), (ay, h - 1 - ay), (ax, w - 1 - ax), (0, 0))
    if mode == "constant":
        return xp.pad(planes, widths, mode="constant", constant_values=value)
    return xp.pad(planes, widths, mode=mode)


def _extreme(xp: ModuleType, padded: Any, size: tuple[int, int], out_shape: tuple[int, ...], largest: bool) -> Any:
    """The maximum (or minimum) over each window: a rectangle's extreme is separable, along x then y."""
    pick = xp.maximum if largest else xp.minimum
    (w, h), (_, rows, cols, _) = size, out_shape
    along_x = padded[:, :, :cols]
    for j in range(1, w):
        along_x = pick(along_x, padded[:, :, j : j + cols])
    out = along_x[:, :rows]
    for i in range(1, h):
        out = pick(out, along_x[:, i : i + rows])
    return out


@register
class MedianBlur(_RankFilter):
    """Median of each pixel's ``window_size`` neighbourhood (``[width, height]``; a per-sample
    argument input too)."""

    schema = Schema("experimental.median_blur", devices=("cpu", "gpu"), arg_inputs=("window_size",))

    def configure(self, window_size: int | Sequence[int] = (3, 3)) -> None:
        self.window = _window(self.schema.name, window_size)

    def filter(self, xp: ModuleType, planes: Any, args: dict[str, Any]) -> Any:
        window = _window(self.schema.name, per_sample(args["window_size"])) if "window_size" in args else self.window
        w, h = window
        padded = _padded(xp, planes, window, (w // 2, h // 2), "edge", None)
        rows, cols = planes.shape[1:3]
        kth = w * h // 2
        step = max(1, _MEDIAN_CHUNK // max(1, w * h * planes.shape[0] * cols * planes.shape[3]))
        chunks = []
        for top in range(0, rows, step):
            count = min(step, rows - top)
            views = [padded[:, top + i : top + i + count, j : j + cols] for i in range(h) for j in range(w)]
            chunks.append(xp.partition(xp.stack(views), kth, axis=0)[kth])
        return xp.concatenate(chunks, axis=1)


def _window(op: str, value: Any) -> tuple[int, int]:
    size = pair(op, "window_size", value)
    if min(size) < 1:
        raise ArgumentError(f"{op}: window_size must be positive, got {list(size)}")
    return size


class _Morphology(_RankFilter):
    """``dilate`` and ``erode``: the extreme over ``mask_size`` at ``anchor``."""

    largest = True

    def configure(
        self,
        mask_size: int | Sequence[int] = (3, 3),
        anchor: int | Sequence[int] = (-1, -1),
        iterations: int = 1,
        border_mode: str = "constant",
    ) -> None:
        op = self.schema.name
        self.mask = pair(op, "mask_size", mask_size)
        self.anchor = pair(op, "anchor", anchor)
        _check(op, self.mask, self.anchor)
        if not isinstance(iterations, (int, np.integer)) or isinstance(iterations, bool) or iterations < 1:
            raise ArgumentError(f"{op}: iterations must be a positive int, got {iterations!r}")
        self.iterations = int(iterations)
        if border_mode not in BORDERS:
            raise ArgumentError(f"{op}: border_mode must be one of {', '.join(BORDERS)}, got {border_mode!r}")
        self.border = border_mode

    def filter(self, xp: ModuleType, planes: Any, args: dict[str, Any]) -> Any:
        op = self.schema.name
        mask = pair(op, "mask_size", per_sample(args["mask_size"])) if "mask_size" in args else self.mask
        anchor = pair(op, "anchor", per_sample(args["anchor"])) if "anchor" in args else self.anchor
        _check(op, mask, anchor, ValueError)
        anchor = tuple(k // 2 if a == -1 else a for k, a in zip(mask, anchor))
        n = self.iterations
        size = tuple(k + (n - 1) * (k - 1) for k in mask)
        anchor = tuple(a * n for a in anchor)
        if self.border == "constant":  # the border never wins: the type's lowest (erode: highest) value
            if planes.dtype.kind == "f":
                value = -np.inf if self.largest else np.inf
            else:
                value = np.iinfo(planes.dtype).min if self.largest else np.iinfo(planes.dtype).max
            padded = _padded(xp, planes, size, anchor, "constant", value)
        else:
            padded = _padded(xp, planes, size, anchor, _PAD_MODES[self.border], None)
        return _extreme(xp, padded, size, planes.shape, self.largest)


def _check(op: str, mask: tuple[int, int], anchor: tuple[int, int], error: type[Exception] = ArgumentError) -> None:
    if min(mask) < 1:
        raise error(f"{op}: mask_size must be positive, got {list(mask)}")
    for k, a, axis in zip(mask, anchor, "xy"):
        if a != -1 and not 0 <= a < k:
            raise error(f"{op}: anchor {axis} = {a} is outside the mask (0 to {k - 1}, or -1 for its centre)")


@register
class Dilate(_Morphology):
    """Maximum over ``mask_size`` (``[width, height]``) at ``anchor``."""

    schema = Schema("experimental.dilate", devices=("cpu", "gpu"), arg_inputs=("mask_size", "anchor"))
    per_frame_args = frozenset(schema.arg_inputs)


@register
class Erode(_Morphology):
    """Minimum over ``mask_size`` (``[width, height]``) at ``anchor``."""

    schema = Schema("experimental.erode", devices=("cpu", "gpu"), arg_inputs=("mask_size", "anchor"))
    per_frame_args = frozenset(schema.arg_inputs)
    largest = False
