"""``element_extract``, ``sequence_rearrange`` and ``per_frame``: frames taken out of sequences
(``F`` outermost), and data marked as one value per frame, as DALI's, for pipelines over clips
(frames of a video, slices of a scan).

``element_extract`` gives one output per index of ``element_map``: that frame of every sample, its
layout the input's less the ``F``. ``sequence_rearrange`` gives the frames listed in ``new_order``
(static or per sample; repeats and drops allowed, an empty order is not). An index outside a
sample's frames fails naming the sample, and a layout that does not start with ``F`` fails when the
pipeline is built, as in DALI. ``per_frame`` passes its input through with a layout starting with
``F``: given as an argument input of an operator on sequences, each frame takes its own value
(:mod:`raypipe.frame_args`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import int_list, per_sample


def _sequence_layout(op: str, layout: str) -> str:
    if layout and not layout.startswith("F"):
        raise ArgumentError(f"{op}: the input must be a sequence, its layout starting with 'F', got {layout!r}")
    return layout


def _frames(op: str, sample, indices: Sequence[int], name: str):
    """``sample``'s frames at ``indices``, each checked against its frame count."""
    if sample.ndim < 2:
        raise ValueError(f"{op}: a sequence needs its frames and at least one more axis, got shape {sample.shape}")
    count = sample.shape[0]
    for k, index in enumerate(indices):
        if not 0 <= index < count:
            raise ValueError(f"{op}: {name}[{k}] = {index} is outside the sample's {count} frames")
    return sample


@register
class ElementExtract(Operator):
    """One output per ``element_map`` index: that frame of each sequence."""

    schema = Schema("element_extract", devices=("cpu", "gpu"))

    def configure(self, element_map=()) -> None:
        self.element_map = int_list("element_extract", "element_map", element_map)
        if not self.element_map:
            raise ArgumentError("element_extract: element_map must name at least one frame")

    @property
    def num_outputs(self) -> int:
        return len(self.element_map)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self._frame_layout = _sequence_layout("element_extract", input_layouts[0] if input_layouts else "")[1:]
        return self._frame_layout

    def output_layouts(self) -> list[str]:
        """Every output is a frame: all have the frame's layout."""
        return [self._frame_layout] * self.num_outputs

    def compute(self, xp, inputs, args, ctx):
        sample = _frames("element_extract", inputs[0], self.element_map, "element_map")
        outs = tuple(xp.ascontiguousarray(sample[index]) for index in self.element_map)
        return outs[0] if len(outs) == 1 else outs


@register
class SequenceRearrange(Operator):
    """The frames ``new_order`` lists, in that order."""

    schema = Schema("sequence_rearrange", devices=("cpu", "gpu"), arg_inputs=("new_order",))

    def configure(self, new_order=None) -> None:
        self.new_order = None if new_order is None else int_list("sequence_rearrange", "new_order", new_order)
        if self.new_order is not None and not self.new_order:
            raise ArgumentError("sequence_rearrange: new_order must not be empty (empty sequences are not allowed)")

    def bind_inputs(self, count, arg_inputs) -> None:
        if self.new_order is None and "new_order" not in arg_inputs:
            raise ArgumentError("sequence_rearrange: new_order is required (a list, or per sample)")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return _sequence_layout("sequence_rearrange", input_layouts[0] if input_layouts else "")

    def compute(self, xp, inputs, args, ctx):
        order = self.new_order
        if "new_order" in args:
            order = tuple(int(v) for v in per_sample(args["new_order"]))
            if not order:
                raise ValueError("sequence_rearrange: new_order is empty (empty sequences are not allowed)")
        sample = _frames("sequence_rearrange", inputs[0], order, "new_order")
        return xp.ascontiguousarray(sample[xp.asarray(order)])


@register
class PerFrame(Operator):
    """Its input unchanged, marked as a sequence: layout ``F`` (an input without a layout), or the
    input's layout with its first letter made ``F`` (``replace=True``; without it, an input that has
    a layout is refused, as in DALI). An operator taking it as an argument input uses one value per
    frame of its input sequences."""

    schema = Schema("per_frame", devices=("cpu", "gpu"))

    def configure(self, replace: bool = False) -> None:
        if not isinstance(replace, (bool, np.bool_)):
            raise ArgumentError(f"per_frame: replace must be a bool, got {replace!r}")
        self.replace = bool(replace)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if not layout:
            return "F"
        if not self.replace and not layout.startswith("F"):
            raise ArgumentError(
                f"per_frame: the input already has the layout {layout!r}; pass replace=True to make its first "
                "dimension the frames"
            )
        return "F" + layout[1:]

    def compute(self, xp, inputs, args, ctx):
        sample = inputs[0]
        if sample.ndim == 0:
            raise ValueError("per_frame: a scalar cannot be marked as a sequence (one value per frame needs an axis)")
        return sample
