"""Operators that read or change only a sample's shape and layout, never its bytes: ``shapes``,
``reshape``, ``reinterpret`` (also a view as another type), ``squeeze`` and ``expand_dims``, with
DALI's arguments and rules.

Their results are views of the input where the array module allows it (as DALI, which does not
copy), so the GPU stage runs them sample by sample without a kernel launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from .axes import check_layout, float_list, int_list, layout_axes, per_sample
from .cast import parse_dtype

SHAPE_TYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64"))


class _ViewOperator(Operator):
    """An operator whose per-sample result is a view: the GPU stage loops over samples with no
    launch, so there is nothing to batch (and no per-sample warning)."""

    def run_batch(self, xp, inputs, args, ctxs):
        return [
            self.compute(xp, [inp[i] for inp in inputs], {k: v[i] for k, v in args.items()}, ctx)
            for i, ctx in enumerate(ctxs)
        ]


@register
class Shapes(Operator):
    """Each sample's shape as a 1-D array of ``dtype`` (int64 by default)."""

    schema = Schema("shapes", devices=("cpu", "gpu"))

    def configure(self, dtype: Any = None, type: Any = None) -> None:  # noqa: A002  (DALI's deprecated alias)
        if dtype is not None and type is not None:
            raise ArgumentError("shapes: dtype and its deprecated alias type cannot be used together")
        chosen = dtype if dtype is not None else type
        self.dtype = np.dtype(np.int64) if chosen is None else parse_dtype("shapes", "dtype", chosen)
        if self.dtype not in SHAPE_TYPES:
            names = ", ".join(str(t) for t in SHAPE_TYPES)
            raise ArgumentError(f"shapes: dtype must be one of {names}, got {self.dtype}")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def compute(self, xp, inputs, args, ctx):
        return xp.asarray(np.asarray(inputs[0].shape, dtype=self.dtype))

    def run_batch(self, xp, inputs, args, ctxs):
        """Every shape from the batch's metadata, moved to the device as one ``(n, ndim)`` array."""
        return launch.to_device(xp, np.ascontiguousarray(launch.shapes_of(inputs[0]).astype(self.dtype)))


def reshaped(
    op: str,
    in_shape: tuple[int, ...],
    shape: Sequence[int] | None,
    rel_shape: Sequence[float] | None,
    src_dims: Sequence[int] | None,
) -> tuple[int, ...]:
    """DALI's output shape of ``reshape`` for a sample of ``in_shape``; ValueError when it cannot be."""
    ndim = len(in_shape)
    if src_dims is not None and any(not -1 <= d < ndim for d in src_dims):
        raise ValueError(f"{op}: src_dims {list(src_dims)} must be -1 or axes of the {ndim}-D samples")
    if shape is not None:
        dims = [int(d) for d in shape]
    elif rel_shape is not None:
        if src_dims is not None and len(src_dims) != len(rel_shape):
            raise ValueError(f"{op}: src_dims {list(src_dims)} and rel_shape {list(rel_shape)} differ in length")
        sources = list(src_dims) if src_dims is not None else list(range(len(rel_shape)))
        dims = []
        for source, factor in zip(sources, rel_shape):
            if factor < 0:
                dims.append(-1)
            elif not -1 <= source < ndim:
                raise ValueError(f"{op}: rel_shape {list(rel_shape)} has more extents than the {ndim}-D samples")
            else:
                dims.append(int(math.floor((in_shape[source] if source >= 0 else 1) * factor + 0.5)))
    elif src_dims is not None:
        dims = [in_shape[d] if d >= 0 else 1 for d in src_dims]
    else:
        return tuple(in_shape)
    volume = math.prod(in_shape)
    free = [i for i, d in enumerate(dims) if d < 0]
    if len(free) > 1:
        raise ValueError(f"{op}: only one negative extent is allowed, got {dims}")
    if any(d == 0 for d in dims):
        raise ValueError(f"{op}: an extent of 0 is not allowed, got {dims}")
    if free:
        known = math.prod(d for d in dims if d >= 0)
        if known == 0 or volume % known:
            raise ValueError(f"{op}: cannot infer the negative extent of {dims} for samples of shape {in_shape}")
        dims[free[0]] = volume // known
    if math.prod(dims) != volume:
        raise ValueError(f"{op}: samples of shape {in_shape} cannot be reshaped to {tuple(dims)} (volumes differ)")
    return tuple(dims)


@register
class Reshape(_ViewOperator):
    """The sample's values as another shape (``shape``, ``rel_shape``, ``src_dims``, or a second
    input holding the shape) and/or layout, without copying."""

    schema = Schema("reshape", devices=("cpu", "gpu"), max_inputs=2, arg_inputs=("shape", "rel_shape", "src_dims"))

    def configure(self, shape=None, rel_shape=None, src_dims=None, layout: str | None = None) -> None:
        op = self.schema.name
        if shape is not None and rel_shape is not None:
            raise ArgumentError(f"{op}: shape and rel_shape are mutually exclusive")
        self.shape = None if shape is None else int_list(op, "shape", shape)
        self.rel_shape = None if rel_shape is None else float_list(op, "rel_shape", rel_shape)
        self.src_dims = None if src_dims is None else int_list(op, "src_dims", src_dims)
        if self.shape is not None:
            if sum(d < 0 for d in self.shape) > 1:
                raise ArgumentError(f"{op}: shape may hold one negative extent, got {list(self.shape)}")
            if 0 in self.shape:
                raise ArgumentError(f"{op}: an extent of 0 is not allowed in shape, got {list(self.shape)}")
        if self.src_dims is not None and any(d < -1 for d in self.src_dims):
            raise ArgumentError(f"{op}: src_dims must hold axis indices or -1, got {list(self.src_dims)}")
        self.layout = None if layout is None else check_layout(op, "layout", layout)
        if self.layout and self._static_ndim() not in (None, len(self.layout)):
            raise ArgumentError(f"{op}: layout {self.layout!r} does not match the {self._static_ndim()}-D output")

    def _static_ndim(self) -> int | None:
        """The output's rank when the arguments fix it (None: it depends on the input)."""
        for value in (self.shape, self.rel_shape, self.src_dims):
            if value is not None:
                return len(value)
        return None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        if self.layout is not None:
            return self.layout
        given = input_layouts[0] if input_layouts else ""
        if len(input_layouts) > 1:
            return ""
        ndim = self._static_ndim()
        return given if ndim is None or ndim == len(given) else ""

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        shape = self.shape
        if len(inputs) > 1:
            if "shape" in args or self.shape is not None or self.rel_shape is not None:
                raise ArgumentError(f"{self.schema.name}: a shape input excludes the shape and rel_shape arguments")
            shape = per_sample(inputs[1])
        elif "shape" in args:
            shape = per_sample(args["shape"])
        rel_shape = per_sample(args["rel_shape"]) if "rel_shape" in args else self.rel_shape
        src_dims = per_sample(args["src_dims"]) if "src_dims" in args else self.src_dims
        if shape is not None and rel_shape is not None:
            raise ArgumentError(f"{self.schema.name}: shape and rel_shape are mutually exclusive")
        target = reshaped(self.schema.name, tuple(x.shape), shape, rel_shape, src_dims)
        if self.layout and len(self.layout) != len(target):
            raise ValueError(f"{self.schema.name}: layout {self.layout!r} does not match the output shape {target}")
        return x.reshape(target)


@register
class Reinterpret(Reshape):
    """``reshape`` that may also view the sample's bytes as another ``dtype``: the innermost extent
    scales by the ratio of the element sizes, and the shape arguments apply to that view."""

    schema = Schema("reinterpret", devices=("cpu", "gpu"), max_inputs=2, arg_inputs=("shape", "rel_shape", "src_dims"))

    def configure(self, dtype: Any = None, **reshape_args: Any) -> None:
        self.dtype = None if dtype is None else parse_dtype("reinterpret", "dtype", dtype)
        super().configure(**reshape_args)

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        if self.dtype is not None and self.dtype != x.dtype:
            x = _viewed_as(xp, x, self.dtype)
        return super().compute(xp, [x, *inputs[1:]], args, ctx)


def _viewed_as(xp, x: Any, dtype: np.dtype) -> Any:
    """``x``'s bytes as ``dtype``, its innermost extent scaled by the ratio of the element sizes."""
    shape = tuple(x.shape) or (1,)
    inner = shape[-1] * x.dtype.itemsize
    if inner % dtype.itemsize:
        raise ValueError(
            f"reinterpret: the innermost extent of a {x.dtype} sample of shape {tuple(x.shape)} is {inner} bytes, "
            f"not a multiple of {dtype}'s {dtype.itemsize}"
        )
    return xp.ascontiguousarray(x).reshape(shape).view(dtype)


@register
class Squeeze(_ViewOperator):
    """Remove the axes ``axes`` (indices) or ``axis_names`` (layout letters), each of extent 1."""

    schema = Schema("squeeze", devices=("cpu", "gpu"))

    def configure(self, axes=None, axis_names: str | None = None) -> None:
        if (axes is None) == (axis_names is None):
            raise ArgumentError("squeeze: exactly one of axes and axis_names is required")
        self.axes = None if axes is None else int_list("squeeze", "axes", axes)
        if self.axes is not None and any(a < 0 for a in self.axes):
            raise ArgumentError(f"squeeze: axes must be non-negative axis indices, got {list(self.axes)}")
        self.axis_names = None if axis_names is None else check_layout("squeeze", "axis_names", axis_names)
        self.resolved = self.axes

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.resolved = layout_axes("squeeze", "axis_names", self.axis_names, given)
        if not given or self.resolved is None or any(a >= len(given) for a in self.resolved):
            return ""
        return "".join(c for i, c in enumerate(given) if i not in self.resolved)

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        axes = self.resolved
        if any(not 0 <= a < x.ndim for a in axes):
            raise ValueError(f"squeeze: axes {list(axes)} are not all axes of the {x.ndim}-D samples")
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        if x.size != 0 and any(x.shape[a] != 1 for a in axes):
            raise ValueError(f"squeeze: cannot remove axes {list(axes)} of extent other than 1 (shape {x.shape})")
        return x.reshape(shape)


@register
class ExpandDims(_ViewOperator):
    """Insert axes of extent 1 at the output positions ``axes``, named ``new_axis_names``."""

    schema = Schema("expand_dims", devices=("cpu", "gpu"))

    def configure(self, axes=None, new_axis_names: str = "") -> None:
        if axes is None:
            raise ArgumentError("expand_dims: axes is required")
        self.axes = int_list("expand_dims", "axes", axes)
        if any(a < 0 for a in self.axes) or len(set(self.axes)) != len(self.axes):
            raise ArgumentError(f"expand_dims: axes must be distinct non-negative positions, got {list(self.axes)}")
        self.names = check_layout("expand_dims", "new_axis_names", new_axis_names)
        if self.names and len(self.names) != len(self.axes):
            raise ArgumentError(
                f"expand_dims: new_axis_names {self.names!r} must name each of the {len(self.axes)} axes"
            )

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if not self.names or not given:
            return ""
        out = list(given)
        for axis, name in sorted(zip(self.axes, self.names)):
            out.insert(axis, name)
        return "".join(out)

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        ndim = x.ndim + len(self.axes)
        if any(a >= ndim for a in self.axes):
            raise ValueError(f"expand_dims: axes {list(self.axes)} do not fit {ndim}-D output of {x.ndim}-D samples")
        shape = list(x.shape)
        for axis in sorted(self.axes):
            shape.insert(axis, 1)
        return x.reshape(shape)
