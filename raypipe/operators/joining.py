"""Joining several inputs sample by sample: ``cat`` (along an existing axis) and ``stack`` (along a
new one), with DALI's arguments and checks: the inputs share the element type and rank, and their
shapes agree except, for ``cat``, along the joined axis.

In the GPU stage, inputs that each arrive as one array holding the batch join in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import is_int, resolve_axes

MAX_INPUTS = 999  # as DALI


def _check_axis(op: str, axis: Any, axis_name: Any) -> tuple[int, str | None]:
    if axis is not None and axis_name is not None:
        raise ArgumentError(f"{op}: axis and axis_name cannot be used together")
    if axis is not None and not is_int(axis):
        raise ArgumentError(f"{op}: axis must be an int, got {axis!r}")
    if axis_name is not None and (not isinstance(axis_name, str) or len(axis_name) != 1):
        raise ArgumentError(f"{op}: axis_name must be one axis letter, got {axis_name!r}")
    return (0 if axis is None else int(axis)), axis_name


def _common_layout(op: str, input_layouts: Sequence[str]) -> str:
    """The inputs' layout: the one every input with a layout has."""
    given = {layout for layout in input_layouts if layout}
    if len(given) > 1:
        raise ArgumentError(f"{op}: the inputs have different layouts {sorted(given)}")
    return given.pop() if given else ""


def _check_inputs(op: str, samples: Sequence[Any], skip_axis: int | None) -> None:
    """ValueError unless the samples share element type and rank, and their shapes agree (except
    along ``skip_axis``)."""
    first = samples[0]
    for k, sample in enumerate(samples[1:], start=1):
        if sample.dtype != first.dtype or sample.ndim != first.ndim:
            raise ValueError(
                f"{op}: all inputs must have the same type and rank: input 0 is {first.dtype} {first.ndim}-D, "
                f"input {k} is {sample.dtype} {sample.ndim}-D"
            )
        if any(a != b for i, (a, b) in enumerate(zip(first.shape, sample.shape)) if i != skip_axis):
            where = f" except along axis {skip_axis}" if skip_axis is not None else ""
            raise ValueError(f"{op}: input shapes must agree{where}: {first.shape} and {sample.shape} (input {k})")


def _batch_arrays(inputs: Sequence[Any]) -> bool:
    """Whether every input is one array holding the batch, all of one element type."""
    return all(hasattr(batch, "ndim") for batch in inputs) and len({batch.dtype for batch in inputs}) == 1


@register
class Cat(Operator):
    """Join the inputs along the existing axis ``axis`` (or the one named ``axis_name``)."""

    schema = Schema("cat", devices=("cpu", "gpu"), max_inputs=MAX_INPUTS)

    def configure(self, axis: int | None = None, axis_name: str | None = None) -> None:
        self.axis, self.axis_name = _check_axis("cat", axis, axis_name)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = _common_layout("cat", input_layouts)
        if self.axis_name is not None:
            if self.axis_name not in layout:
                raise ArgumentError(f"cat: axis_name {self.axis_name!r} is not an axis of the layout {layout!r}")
            self.axis = layout.index(self.axis_name)
        return layout

    def compute(self, xp, inputs, args, ctx):
        (axis,) = resolve_axes("cat", "axis", [self.axis], inputs[0].ndim)
        _check_inputs("cat", inputs, axis)
        return xp.concatenate(inputs, axis=axis)

    def run_batch(self, xp, inputs, args, ctxs):
        if _batch_arrays(inputs):
            (axis,) = resolve_axes("cat", "axis", [self.axis], inputs[0].ndim - 1)
            _check_inputs("cat", inputs, axis + 1)
            return xp.concatenate(inputs, axis=axis + 1)
        return super().run_batch(xp, inputs, args, ctxs)


@register
class Stack(Operator):
    """Join the inputs along a new axis inserted at ``axis`` and named ``axis_name``."""

    schema = Schema("stack", devices=("cpu", "gpu"), max_inputs=MAX_INPUTS)

    def configure(self, axis: int | None = None, axis_name: str | None = None) -> None:
        if axis is not None and not is_int(axis):
            raise ArgumentError(f"stack: axis must be an int, got {axis!r}")
        if axis_name is not None and (not isinstance(axis_name, str) or len(axis_name) != 1):
            raise ArgumentError(f"stack: axis_name must be one axis letter, got {axis_name!r}")
        self.axis, self.axis_name = (0 if axis is None else int(axis)), axis_name

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = _common_layout("stack", input_layouts)
        if self.axis_name is None or not layout:
            return ""
        (position,) = resolve_axes("stack", "axis", [self.axis], len(layout), allow_end=True)
        return layout[:position] + self.axis_name + layout[position:]

    def compute(self, xp, inputs, args, ctx):
        _check_inputs("stack", inputs, None)
        (axis,) = resolve_axes("stack", "axis", [self.axis], inputs[0].ndim, allow_end=True)
        return xp.stack(inputs, axis=axis)

    def run_batch(self, xp, inputs, args, ctxs):
        if _batch_arrays(inputs):
            _check_inputs("stack", inputs, None)
            (axis,) = resolve_axes("stack", "axis", [self.axis], inputs[0].ndim - 1, allow_end=True)
            return xp.stack(inputs, axis=axis + 1)
        return super().run_batch(xp, inputs, args, ctxs)
