"""``slice``: a window of each sample, as DALI's operator.

The window is given per sliced axis by ``start``/``rel_start`` with ``shape``/``rel_shape`` or
``end``/``rel_end`` (named arguments, per sample where they are argument inputs), or by two
positional inputs, an anchor and a shape (floats are relative when ``normalized_anchor`` /
``normalized_shape``, ints absolute). Sliced axes are ``axis_names`` (default ``"WH"``, when the
input has a layout) or ``axes`` (default ``[1, 0]``), in the order the coordinates list them.
Coordinates are computed in float32 and rounded half away from zero: the start from the start,
the end from start plus extent, as DALI does.

Out of bounds: ``"error"`` names the sample; ``"pad"`` (``"constant"``) fills with ``fill_values``
(one per channel of a ``C`` axis, or one for all); ``"trim_to_shape"`` cuts the window to the
sample; ``"edge"`` (``"clamp"``), ``"reflect_1001"`` (``"reflect"``), ``"reflect_101"`` and
``"wrap"`` extend the sample as their names say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device_check
from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import check_layout, float_list, int_list, layout_axes, per_sample, resolve_axes
from .cast import parse_dtype, saturate_cast

#: how each extending policy pads, as numpy's (and cupy's) ``pad`` modes
EXTENDING = {"edge": "edge", "clamp": "edge", "reflect": "symmetric", "reflect_1001": "symmetric"}
EXTENDING |= {"reflect_101": "reflect", "wrap": "wrap"}
POLICIES = ("error", "pad", "constant", "trim_to_shape", *EXTENDING)
OUTPUT_TYPES = tuple(np.dtype(t) for t in ("float32", "float16", "uint8"))
NAMED = ("start", "end", "shape", "rel_start", "rel_end", "rel_shape")


def round_half_away(value: float) -> int:
    """C's ``llround``: to the nearest integer, halves away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


@register
class Slice(Operator):
    """Extract a window of each sample (see the module docstring for the arguments)."""

    schema = Schema("slice", devices=("cpu", "gpu"), max_inputs=3, arg_inputs=NAMED)

    def configure(
        self,
        start=None,
        end=None,
        shape=None,
        rel_start=None,
        rel_end=None,
        rel_shape=None,
        axes=None,
        axis_names: str | None = None,
        normalized_anchor: bool = True,
        normalized_shape: bool = True,
        out_of_bounds_policy: str = "error",
        fill_values=0.0,
        dtype: Any = None,
        output_dtype: Any = None,
        image_type: Any = None,
    ) -> None:
        """``output_dtype`` is DALI's deprecated alias of ``dtype``; ``image_type``, deprecated and
        unused in DALI, is accepted and changes nothing."""
        self.named = {
            "start": None if start is None else int_list("slice", "start", start),
            "end": None if end is None else int_list("slice", "end", end),
            "shape": None if shape is None else int_list("slice", "shape", shape),
            "rel_start": None if rel_start is None else float_list("slice", "rel_start", rel_start),
            "rel_end": None if rel_end is None else float_list("slice", "rel_end", rel_end),
            "rel_shape": None if rel_shape is None else float_list("slice", "rel_shape", rel_shape),
        }
        _check_exclusive({k for k, v in self.named.items() if v is not None})
        self.axes = None if axes is None else int_list("slice", "axes", axes)
        self.axis_names = None if axis_names is None else check_layout("slice", "axis_names", axis_names)
        for name, flag in (("normalized_anchor", normalized_anchor), ("normalized_shape", normalized_shape)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ArgumentError(f"slice: {name} must be a bool, got {flag!r}")
        self.normalized_anchor, self.normalized_shape = bool(normalized_anchor), bool(normalized_shape)
        if out_of_bounds_policy not in POLICIES:
            raise ArgumentError(f"slice: out_of_bounds_policy must be one of {POLICIES}, got {out_of_bounds_policy!r}")
        self.policy = out_of_bounds_policy
        self.fill_values = np.asarray(float_list("slice", "fill_values", fill_values), dtype=np.float64)
        if dtype is not None and output_dtype is not None:
            raise ArgumentError("slice: dtype and its deprecated alias output_dtype cannot be used together")
        chosen = dtype if dtype is not None else output_dtype
        self.dtype = None if chosen is None else parse_dtype("slice", "dtype", chosen)
        if self.dtype is not None and self.dtype not in OUTPUT_TYPES:
            raise ArgumentError(f"slice: dtype must be FLOAT, FLOAT16 or UINT8, got {self.dtype}")
        self.slice_axes: tuple[int, ...] = self.axes if self.axes is not None else (1, 0)
        self.channel_axis: int | None = None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None or (self.axes is None and given):
            names = self.axis_names if self.axis_names is not None else "WH"
            self.slice_axes = layout_axes("slice", "axis_names", names, given)
        self.channel_axis = given.index("C") if "C" in given else None
        return given

    def window(self, in_shape: tuple[int, ...], inputs: Sequence[Any], args: dict[str, Any]) -> tuple[list, list]:
        """The window's ``(start, end)`` over every axis of a sample of ``in_shape`` (may reach
        outside it)."""
        axes = resolve_axes("slice", "axes", self.slice_axes, len(in_shape))
        named = {k: (per_sample(args[k]) if k in args else v) for k, v in self.named.items()}
        given = {k for k, v in named.items() if v is not None}
        starts: list[np.float32] = []
        ends: list[np.float32] = []
        if len(inputs) > 1:
            if given:
                raise ArgumentError(f"slice: the anchor and shape inputs exclude the arguments {sorted(given)}")
            if len(inputs) != 3:
                raise ValueError("slice: positional inputs are the data, an anchor and a shape")
            anchor, extent = np.asarray(inputs[1]).reshape(-1), np.asarray(inputs[2]).reshape(-1)
            self._check_count(axes, anchor, "anchor")
            self._check_count(axes, extent, "shape")
            for k, axis in enumerate(axes):
                size = np.float32(in_shape[axis])
                a = np.float32(anchor[k]) * (size if anchor.dtype.kind == "f" and self.normalized_anchor else 1)
                s = np.float32(extent[k]) * (size if extent.dtype.kind == "f" and self.normalized_shape else 1)
                starts.append(a)
                ends.append(a + s)
        else:
            _check_exclusive(given)
            for name in given:
                self._check_count(axes, named[name], name)
            for k, axis in enumerate(axes):
                size = np.float32(in_shape[axis])
                a = _coordinate(named, "start", k, size, np.float32(0))
                ends.append(_end(named, k, size, a))
                starts.append(a)
        start, end = [0] * len(in_shape), list(in_shape)
        for k, axis in enumerate(axes):
            start[axis], end[axis] = round_half_away(float(starts[k])), round_half_away(float(ends[k]))
            if end[axis] < start[axis]:
                raise ValueError(f"slice: the end {end[axis]} of axis {axis} is before its start {start[axis]}")
        return start, end

    @staticmethod
    def _check_count(axes: Sequence[int], values: Sequence[Any], name: str) -> None:
        if len(values) != len(axes):
            raise ValueError(f"slice: {name} gives {len(values)} coordinates for the {len(axes)} sliced axes")

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        start, end = self.window(tuple(x.shape), inputs, args)
        out = self._cut(xp, x, start, end)
        return out if self.dtype is None else saturate_cast(xp, out, self.dtype)

    def _cut(self, xp, x, start: list[int], end: list[int]):
        shape = tuple(x.shape)
        inside = all(s >= 0 and e <= n for s, e, n in zip(start, end, shape))
        if inside:
            return xp.ascontiguousarray(x[tuple(slice(s, e) for s, e in zip(start, end))])
        if self.policy == "error":
            raise ValueError(
                f"slice: the window from {start} to {end} is outside the sample's shape {shape} "
                "(out_of_bounds_policy='error'; 'pad' or 'trim_to_shape' allow it)"
            )
        if self.policy == "trim_to_shape":
            cut = tuple(slice(max(s, 0), min(e, n)) for s, e, n in zip(start, end, shape))
            return xp.ascontiguousarray(x[cut])
        if self.policy in EXTENDING:
            widths = [(max(0, -s), max(0, e - n)) for s, e, n in zip(start, end, shape)]
            padded = xp.pad(x, widths, mode=EXTENDING[self.policy])
            return xp.ascontiguousarray(padded[tuple(slice(s + b, e + b) for s, e, (b, _) in zip(start, end, widths))])
        out = xp.empty(tuple(e - s for s, e in zip(start, end)), dtype=x.dtype)
        out[...] = xp.asarray(self._fill(out.shape, x.dtype))
        src = tuple(slice(max(s, 0), max(min(e, n), max(s, 0))) for s, e, n in zip(start, end, shape))
        dst = tuple(slice(c.start - s, c.stop - s) for c, s in zip(src, start))
        out[dst] = x[src]
        return out

    def _fill(self, out_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """``fill_values`` broadcastable to the output: one value, or one per channel."""
        values = saturate_cast(np, self.fill_values, np.dtype(dtype))
        if len(values) == 1:
            return values[0]
        axis = self.channel_axis
        if axis is None or axis >= len(out_shape) or out_shape[axis] != len(values):
            raise ValueError(
                f"slice: {len(values)} fill_values need a C axis of {len(values)} channels in the output {out_shape}"
            )
        shape = [1] * len(out_shape)
        shape[axis] = len(values)
        return values.reshape(shape)

    def run_batch(self, xp, inputs, args, ctxs):
        """One array holding the batch, with a window inside every sample that no argument input
        changes, is cut in one call; other batches sample by sample, naming the sample that fails."""
        batch = inputs[0]
        if hasattr(batch, "ndim") and len(inputs) == 1 and not args:
            start, end = self.window(tuple(batch.shape[1:]), inputs, args)
            if all(s >= 0 and e <= n for s, e, n in zip(start, end, batch.shape[1:])):
                out = xp.ascontiguousarray(batch[(slice(None), *(slice(s, e) for s, e in zip(start, end)))])
                return out if self.dtype is None else saturate_cast(xp, out, self.dtype)
        if xp is not np:
            device_check.warn_once(
                f"per-sample:{self.schema.name}",
                "slice runs sample by sample on the GPU: a few launches per sample; "
                "pipe.device_report() says which operators run how",
            )
        outs = []
        for i, ctx in enumerate(ctxs):
            try:
                outs.append(self.compute(xp, [inp[i] for inp in inputs], {k: v[i] for k, v in args.items()}, ctx))
            except ValueError as exc:
                raise ValueError(f"sample {ctx.sample_index}: {exc}") from exc
        return outs


def _check_exclusive(given: set[str]) -> None:
    if {"start", "rel_start"} <= given:
        raise ArgumentError("slice: start and rel_start are mutually exclusive")
    ends = sorted(given & {"end", "rel_end", "shape", "rel_shape"})
    if len(ends) > 1:
        raise ArgumentError(f"slice: end, rel_end, shape and rel_shape are mutually exclusive, got {ends}")


def _coordinate(named: dict, name: str, k: int, size: np.float32, default: np.float32) -> np.float32:
    """Coordinate ``k`` of ``name`` (absolute) or ``rel_<name>`` (times ``size``), else ``default``."""
    if named[name] is not None:
        return np.float32(named[name][k])
    if named[f"rel_{name}"] is not None:
        return np.float32(named[f"rel_{name}"][k]) * size
    return default


def _end(named: dict, k: int, size: np.float32, start: np.float32) -> np.float32:
    """The window's end along sliced axis ``k``: from ``end``/``rel_end``, or ``start`` plus
    ``shape``/``rel_shape``, else the sample's end."""
    extent = _coordinate(named, "shape", k, size, np.float32(-1))
    if named["shape"] is not None or named["rel_shape"] is not None:
        return start + extent
    return _coordinate(named, "end", k, size, size)
