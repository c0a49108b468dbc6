"""``filter``: each sample correlated with its own filter (a second input), as DALI's (whose CPU
operator is OpenCV's ``filter2D``).

The output at ``x`` is the sum over the filter's positions ``k`` of ``filter[k] * input[x - anchor
+ k]`` (a correlation: the filter is not flipped). ``anchor`` (one value or one per spatial axis,
per sample) defaults to ``extent // 2`` per axis (-1). Outside the sample, ``border`` gives
``reflect_101`` (``dcb|abcd|cba``, the default), ``reflect_1001`` (``cba|abcd|dcb``), ``wrap``,
``clamp`` or ``constant``: the third input, a scalar of the input's type per sample, or 0. Mode
``"valid"`` keeps only the positions where the filter lies inside the sample (``extent - filter +
1`` of them; ``anchor`` is ignored).

The spatial axes are the layout's other than ``F`` (first) and ``C`` (first after ``F``, or
last), or every axis of input without a layout; the filter has one axis per spatial axis, float32.
The sum runs in float32 over the filter's non-zero entries in row-major order, as OpenCV's; an
integer result rounds half to even and saturates to ``dtype`` (the input's type, or float32).
Integer results equal DALI's but for a value next to a rounding tie; float32 results lie within
a few units in the last place, since OpenCV's vector loop fuses multiply and add (filters of 50
entries or more may take its DFT path, within about 1e-6 relative). DALI's CPU operator takes
2-D filters and uint8, int16, uint16, float32 input; this one, as DALI's GPU operator, also takes
int8 and float16 input and volumes with 3-D filters. Per-frame filters (``fn.per_frame``) are
not here: a sequence's frames share the sample's filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..backend import to_host
from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import int_list, per_sample
from .cast import parse_dtype, saturate_cast
from .gaussian_blur import border_indices

OP = "filter"
BORDERS = ("reflect_101", "reflect_1001", "wrap", "clamp", "constant")
INPUT_TYPES = tuple(np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16, np.float16, np.float32))


def filter_axes(layout: str, ndim: int) -> list[int]:
    """The spatial axes of a sample of ``ndim`` dimensions under DALI's filter's layout rules;
    ValueError (a property of the data) when the layout breaks them."""
    if not layout:
        return list(range(ndim))
    if len(layout) != ndim:
        raise ValueError(f"{OP}: layout {layout!r} does not fit a sample of {ndim} dimensions")
    if "F" in layout[1:]:
        raise ValueError(f"{OP}: frames (F) must be the outermost axis, got layout {layout!r}")
    rest = layout[1:] if layout.startswith("F") else layout
    if "C" in rest[1:-1]:
        raise ValueError(f"{OP}: channels (C) must come first or last, got layout {layout!r}")
    return [axis for axis, name in enumerate(layout) if name not in "CF"]


def correlate(
    xp: ModuleType, data: Any, kernel: np.ndarray, axes: Sequence[int], anchor: Sequence[int], border: str, fill: Any
) -> Any:
    """``data`` (float32) correlated with ``kernel`` over ``axes``; ``anchor`` None gives mode
    ``"valid"``. One array operation per non-zero entry of the kernel."""
    if anchor is None:
        padded, extents = data, [data.shape[a] - k + 1 for a, k in zip(axes, kernel.shape, strict=True)]
    else:
        padded, extents = data, [data.shape[a] for a in axes]
        for axis, size, before in zip(axes, kernel.shape, anchor, strict=True):
            index = border_indices(data.shape[axis], before, size - 1 - before, border)
            padded = xp.take(padded, xp.asarray(np.maximum(index, 0)), axis=axis)
            if border == "constant":
                outside = [slice(None)] * data.ndim
                outside[axis] = xp.asarray(np.flatnonzero(index < 0))
                padded[tuple(outside)] = fill
    out = xp.zeros(tuple(extents[axes.index(a)] if a in axes else n for a, n in enumerate(data.shape)), np.float32)
    for offset in zip(*np.nonzero(kernel)):
        window = [slice(None)] * data.ndim
        for axis, start, extent in zip(axes, offset, extents, strict=True):
            window[axis] = slice(int(start), int(start) + extent)
        out += padded[tuple(window)] * kernel[offset]
    return out


@register
class Filter(Operator):
    """Correlate each sample with its filter (second input); an optional third input holds the
    ``constant`` border's fill value; ``anchor`` may be a per-sample argument input."""

    schema = Schema(OP, devices=("cpu", "gpu"), min_inputs=2, max_inputs=3, arg_inputs=("anchor",))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(
        self, anchor: int | Sequence[int] = -1, border: str = "reflect_101", mode: str = "same", dtype=None
    ) -> None:
        self.anchor = int_list(OP, "anchor", anchor)
        if border not in BORDERS:
            raise ArgumentError(f"{OP}: border must be one of {', '.join(BORDERS)}, got {border!r}")
        if mode not in ("same", "valid"):
            raise ArgumentError(f"{OP}: mode must be 'same' or 'valid', got {mode!r}")
        self.border, self.valid = border, mode == "valid"
        self.dtype = None if dtype is None else parse_dtype(OP, "dtype", dtype)
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def _anchor(self, args: dict[str, Any], shape: tuple[int, ...]) -> list[int] | None:
        """The anchor per filter axis (None in mode ``"valid"``), -1 resolved to the middle."""
        if self.valid:
            return None
        anchor = [int(a) for a in per_sample(args["anchor"])] if "anchor" in args else list(self.anchor)
        if len(anchor) not in (1, len(shape)):
            raise ValueError(f"{OP}: anchor takes one value or one per filter axis ({len(shape)}), got {anchor}")
        anchor = anchor * len(shape) if len(anchor) == 1 else anchor
        if not all(-1 <= a < n for a, n in zip(anchor, shape, strict=True)):
            raise ValueError(f"{OP}: anchor {anchor} does not lie within the filter of shape {list(shape)}")
        return [n // 2 if a == -1 else a for a, n in zip(anchor, shape, strict=True)]

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        data = inputs[0]
        kernel = to_host(inputs[1])
        if data.dtype not in INPUT_TYPES:
            raise ValueError(f"{OP}: the input must be one of {', '.join(map(str, INPUT_TYPES))}, got {data.dtype}")
        dtype = data.dtype if self.dtype is None else self.dtype
        if dtype not in (data.dtype, np.float32):
            raise ValueError(f"{OP}: dtype must be the input's type ({data.dtype}) or float32, got {dtype}")
        if kernel.dtype != np.float32:
            raise ValueError(f"{OP}: the filter must be float32, got {kernel.dtype}")
        axes = filter_axes(self.layout, data.ndim)
        if len(axes) not in (2, 3) or kernel.ndim != len(axes):
            raise ValueError(
                f"{OP}: the filter must have one axis per spatial axis of the input (2 or 3), "
                f"got a {kernel.ndim}-D filter for {len(axes)} spatial axes"
            )
        if not kernel.size:
            raise ValueError(f"{OP}: the filter is empty")
        if self.valid and any(data.shape[a] < n for a, n in zip(axes, kernel.shape, strict=True)):
            raise ValueError(f"{OP}: in mode 'valid' the filter {list(kernel.shape)} must fit the sample")
        fill = np.float32(0)
        if len(inputs) > 2:
            value = to_host(inputs[2])
            if value.ndim or value.dtype != data.dtype:
                raise ValueError(
                    f"{OP}: fill_value must be a scalar of the input's type ({data.dtype}), "
                    f"got {value.dtype} of shape {list(value.shape)}"
                )
            fill = np.float32(value)
        out = correlate(xp, data.astype(np.float32), kernel, axes, self._anchor(args, kernel.shape), self.border, fill)
        return saturate_cast(xp, out, dtype, overwrite=True)
