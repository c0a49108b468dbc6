"""``reductions.min`` and ``reductions.max``: the smallest or largest value of each sample over
``axes`` (or the axes ``axis_names`` names in the layout; every axis by default), keeping the
input's type, as DALI's. ``keep_dims`` keeps the reduced axes with extent 1."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import check_layout, int_list, layout_axes, resolve_axes


class _Reduction(Operator):
    """A reduction over axes of each sample; subclasses name the array-module function."""

    function = ""

    def configure(self, axes=None, axis_names: str | None = None, keep_dims: bool = False) -> None:
        op = self.schema.name
        if axes is not None and axis_names is not None:
            raise ArgumentError(f"{op}: axes and axis_names exclude each other")
        self.axes = None if axes is None else int_list(op, "axes", axes)
        self.axis_names = None if axis_names is None else check_layout(op, "axis_names", axis_names)
        self.keep_dims = bool(keep_dims)
        self.layout_axes: tuple[int, ...] | None = None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.layout_axes = layout_axes(self.schema.name, "axis_names", self.axis_names, given)
        if self.keep_dims:
            return given
        reduced = self.layout_axes if self.layout_axes is not None else self.axes
        if reduced is None or not given:
            return ""
        return "".join(
            c for i, c in enumerate(given) if i not in resolve_axes(self.schema.name, "axes", reduced, len(given))
        )

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        chosen = self.layout_axes if self.layout_axes is not None else self.axes
        axes = tuple(range(data.ndim)) if chosen is None else resolve_axes(self.schema.name, "axes", chosen, data.ndim)
        if data.size == 0:
            raise ValueError(f"{self.schema.name}: cannot reduce an empty sample of shape {tuple(data.shape)}")
        return xp.asarray(getattr(xp, self.function)(data, axis=axes, keepdims=self.keep_dims))


@register
class Min(_Reduction):
    """The smallest value of each sample (over ``axes``)."""

    schema = Schema("reductions.min", devices=("cpu", "gpu"))
    function = "amin"


@register
class Max(_Reduction):
    """The largest value of each sample (over ``axes``)."""

    schema = Schema("reductions.max", devices=("cpu", "gpu"))
    function = "amax"
