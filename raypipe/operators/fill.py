"""Tensors of one value, as DALI's: ``zeros``, ``ones`` and ``full`` of a ``shape`` (per sample
too), ``zeros_like``, ``ones_like`` and ``full_like`` of another sample's shape, type and layout,
and ``copy``.

``full`` takes the fill value as an input and broadcasts it (numpy's rules) to ``shape``, keeping
its type; ``full_like`` converts it to the type of ``data_like`` as DALI does on the host: rounded to
nearest with ties away from zero, then saturated (2.5 is 3, 300.7 as uint8 is 255).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import check_layout, int_list, per_sample
from .cast import parse_dtype, round_half_away, saturate_cast


def _shape_of(op: str, args: dict[str, Any], static: tuple[int, ...] | None) -> tuple[int, ...]:
    """The sample's output shape: the per-sample ``shape`` input, else the argument (else a scalar)."""
    shape = tuple(int(v) for v in per_sample(args["shape"])) if "shape" in args else static or ()
    if any(d < 0 for d in shape):
        raise ValueError(f"{op}: shape must hold non-negative extents, got {list(shape)}")
    return shape


def _static_shape(op: str, shape: Any) -> tuple[int, ...] | None:
    if shape is None:
        return None
    dims = int_list(op, "shape", shape)
    if any(d < 0 for d in dims):
        raise ArgumentError(f"{op}: shape must hold non-negative extents, got {list(dims)}")
    return tuple(dims)


def _check_layout(op: str, layout: str, shape: tuple[int, ...] | None) -> str:
    layout = check_layout(op, "layout", layout)
    if layout and shape is not None and len(layout) != len(shape):
        raise ArgumentError(f"{op}: layout {layout!r} does not match the {len(shape)}-D shape {list(shape)}")
    return layout


def converted(xp: ModuleType, value: Any, dtype: np.dtype) -> Any:
    """``value`` as ``dtype``, as DALI's host converts: floats to integers rounded to nearest with
    ties away from zero, then saturated."""
    shape, flat = value.shape, value.reshape(-1)
    if flat.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
        flat = round_half_away(xp, flat.astype(np.float64))
    return saturate_cast(xp, flat, dtype).reshape(shape)


class _Constant(Operator):
    """``zeros`` and ``ones``: ``shape`` (int32 by default) filled with ``value``."""

    value = 0

    def configure(self, shape=None, dtype: Any = None, layout: str = "") -> None:
        op = self.schema.name
        self.shape = _static_shape(op, shape)
        self.dtype = np.dtype(np.int32) if dtype is None else parse_dtype(op, "dtype", dtype)
        self.layout = _check_layout(op, layout, self.shape)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layout

    def compute(self, xp, inputs, args, ctx):
        shape = _shape_of(self.schema.name, args, self.shape)
        if self.layout and len(self.layout) != len(shape):
            raise ValueError(f"{self.schema.name}: layout {self.layout!r} does not match the shape {list(shape)}")
        return xp.full(shape, self.value, dtype=self.dtype)


@register
class Zeros(_Constant):
    """A tensor of ``shape`` filled with 0."""

    schema = Schema("zeros", devices=("cpu",), min_inputs=0, max_inputs=0, arg_inputs=("shape",))


@register
class Ones(_Constant):
    """A tensor of ``shape`` filled with 1."""

    schema = Schema("ones", devices=("cpu",), min_inputs=0, max_inputs=0, arg_inputs=("shape",))
    value = 1


@register
class Full(Operator):
    """The fill value (the input) broadcast to ``shape``, in the fill value's type."""

    schema = Schema("full", devices=("cpu",), arg_inputs=("shape",))

    def configure(self, shape=None, layout: str = "") -> None:
        self.shape = _static_shape("full", shape)
        self.layout = _check_layout("full", layout, self.shape)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layout

    def compute(self, xp, inputs, args, ctx):
        fill = xp.asarray(inputs[0])
        if "shape" not in args and self.shape is None:
            if fill.size != 1:
                raise ValueError(
                    f"full: without shape the output is a scalar; a fill value of shape {list(fill.shape)} "
                    "needs shape= (DALI takes its first element)"
                )
            return fill.reshape(())
        shape = _shape_of("full", args, self.shape)
        if self.layout and len(self.layout) != len(shape):
            raise ValueError(f"full: layout {self.layout!r} does not match the shape {list(shape)}")
        return xp.array(_broadcast(xp, "full", fill, shape))


def _broadcast(xp: ModuleType, op: str, fill: Any, shape: tuple[int, ...]) -> Any:
    try:
        return xp.broadcast_to(fill, shape)
    except ValueError:
        raise ValueError(
            f"{op}: a fill value of shape {list(fill.shape)} does not broadcast to the shape {list(shape)}"
        ) from None


class _Like(Operator):
    """``zeros_like`` and ``ones_like``: ``data_like``'s shape and layout filled with ``value``, in
    its type or ``dtype``."""

    value = 0

    def configure(self, dtype: Any = None) -> None:
        self.dtype = None if dtype is None else parse_dtype(self.schema.name, "dtype", dtype)

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        return xp.full(data.shape, self.value, dtype=self.dtype or data.dtype)


@register
class ZerosLike(_Like):
    """Zeros of the input's shape (and type, unless ``dtype``)."""

    schema = Schema("zeros_like", devices=("cpu",))


@register
class OnesLike(_Like):
    """Ones of the input's shape (and type, unless ``dtype``)."""

    schema = Schema("ones_like", devices=("cpu",))
    value = 1


@register
class FullLike(Operator):
    """The fill value (the second input) broadcast to the first input's shape, converted to its type."""

    schema = Schema("full_like", devices=("cpu",), min_inputs=2, max_inputs=2)

    def compute(self, xp, inputs, args, ctx):
        data, fill = inputs[0], xp.asarray(inputs[1])
        return xp.array(converted(xp, _broadcast(xp, "full_like", fill, data.shape), data.dtype))


@register
class Copy(Operator):
    """The input, copied."""

    schema = Schema("copy", devices=("cpu", "gpu"))

    def compute(self, xp, inputs, args, ctx):
        return xp.array(inputs[0], copy=True)

    def run_batch(self, xp, inputs, args, ctxs):
        """The batch in one copy where it is one array, else one per sample."""
        data = inputs[0]
        if not isinstance(data, (list, tuple)):
            return xp.array(data, copy=True)
        return [xp.array(x, copy=True) for x in data]
