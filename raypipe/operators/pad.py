"""``pad``: extend samples with ``fill_value`` at the end of the padded axes, as DALI's operator.

An axis's extent is ``shape`` (a minimum: a larger sample keeps its extent) or, without ``shape``
or where it is -1, the largest extent in the batch; either is then rounded up to a multiple of
``align``. ``fill_value`` converts to the sample's type as a C cast (-1 as uint8 is 255, as in
DALI). Padding to the batch's largest extent needs the whole batch: the GPU stage has it (with
or without a GPU, ``device="gpu"`` pads there), and on ``device="cpu"`` pad then runs as a host
batch step once the CPU stage has gathered the batch (:meth:`Pad.host_batch_step`); extents that
``shape`` fixes for every sample pad per sample in the CPU stage.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .axes import int_list, layout_axes, per_sample, resolve_axes
from .cast import c_cast


@register
class Pad(Operator):
    """Pad ``axes`` (or ``axis_names``; all axes by default) to ``shape``, the batch's largest
    extent and/or a multiple of ``align``, with ``fill_value``."""

    schema = Schema("pad", devices=("cpu", "gpu"), arg_inputs=("fill_value", "shape", "align"))
    batch_semantics = True  # the batch's largest extent: a batch step even without a GPU

    def configure(self, axes=None, axis_names: str | None = None, fill_value: float = 0.0, shape=None, align=None):
        if axes is not None and axis_names is not None:
            raise ArgumentError("pad: axes and axis_names are mutually exclusive")
        self.axes = None if axes is None else int_list("pad", "axes", axes)
        if axis_names is not None and not isinstance(axis_names, str):
            raise ArgumentError(f"pad: axis_names must be a layout string, got {axis_names!r}")
        self.axis_names = axis_names or None
        self.fill_value = check_number("pad", "fill_value", fill_value)
        self.shape = None if shape is None else int_list("pad", "shape", shape)
        if self.shape is not None and any(d == 0 or d < -1 for d in self.shape):
            raise ArgumentError(f"pad: shape must hold positive extents or -1, got {list(self.shape)}")
        self.align = None if align is None else int_list("pad", "align", align)
        if self.align is not None and any(a < 1 for a in self.align):
            raise ArgumentError(f"pad: align must hold positive ints, got {list(self.align)}")
        for name, values in (("shape", self.shape), ("align", self.align)):
            count = len(self.axes or self.axis_names or "")
            if values is not None and count and len(values) not in (1, count):
                raise ArgumentError(f"pad: {name} {list(values)} must give one value per padded axis ({count})")

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        """On the CPU, a batch step unless a static ``shape`` fixes every padded axis's extent."""
        return "shape" in arg_inputs or self.shape is None or any(d < 0 for d in self.shape)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.axes = layout_axes("pad", "axis_names", self.axis_names, given)
        return given

    def _padded_axes(self, ndim: int) -> tuple[int, ...]:
        return tuple(range(ndim)) if not self.axes else resolve_axes("pad", "axes", self.axes, ndim)

    def _minimums(self, args: dict[str, Any], count: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """This sample's ``shape`` (-1: the batch's largest) and ``align`` per padded axis."""
        shape = per_sample(args["shape"]) if "shape" in args else self.shape
        align = per_sample(args["align"]) if "align" in args else self.align
        shape = (-1,) * count if shape is None else tuple(int(s) for s in shape)
        align = (1,) * count if align is None else tuple(int(a) for a in align)
        shape = shape * count if len(shape) == 1 else shape
        align = align * count if len(align) == 1 else align
        if len(shape) != count or len(align) != count:
            raise ValueError(f"pad: shape {list(shape)} and align {list(align)} must give {count} values")
        return shape, align

    def _fill(self, args: dict[str, Any], dtype: np.dtype) -> np.ndarray:
        value = float(per_sample(args["fill_value"])[0]) if "fill_value" in args else self.fill_value
        return c_cast(value, dtype)

    def _target(self, own: tuple[int, ...], args: dict[str, Any], largest: Sequence[int] | None) -> tuple[int, ...]:
        """The padded shape of a sample of shape ``own``; ``largest`` is the batch's largest extent
        per axis (None in the CPU stage, where an axis needing it is an error)."""
        axes = self._padded_axes(len(own))
        shape, align = self._minimums(args, len(axes))
        target = list(own)
        for k, axis in enumerate(axes):
            if shape[k] < 0:
                if largest is None:
                    raise ValueError(f"pad: axis {axis} pads to the largest extent of the batch, which it needs")
                base = largest[axis]
            else:
                base = max(shape[k], own[axis])
            target[axis] = math.ceil(base / align[k]) * align[k]
        return tuple(target)

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        return _padded(xp, x, self._target(tuple(x.shape), args, None), self._fill(args, x.dtype))

    def run_batch(self, xp, inputs, args, ctxs):
        """The batch's largest extents, then each sample padded; one array holding the batch with
        no argument inputs pads in one allocation and one copy."""
        batch = inputs[0]
        if hasattr(batch, "ndim") and not args:
            own = tuple(batch.shape[1:])
            target = self._target(own, {}, list(own))
            out = xp.full((len(batch), *target), self._fill({}, batch.dtype).item(), dtype=batch.dtype)
            out[(slice(None), *(slice(0, d) for d in own))] = batch
            return out
        samples = [batch[i] for i in range(len(ctxs))]
        ranks = {s.ndim for s in samples}
        if len(ranks) != 1:
            raise ValueError(f"pad: samples of one batch must have one rank, got {sorted(ranks)}")
        largest = np.max(np.array([s.shape for s in samples], dtype=np.int64).reshape(len(samples), -1), axis=0)
        outs = []
        for i, sample in enumerate(samples):
            sample_args = {k: v[i] for k, v in args.items()}
            target = self._target(tuple(sample.shape), sample_args, largest.tolist())
            outs.append(_padded(xp, sample, target, self._fill(sample_args, sample.dtype)))
        return outs


def _padded(xp, x, target: tuple[int, ...], fill: np.ndarray):
    """``x`` at the start of an array of shape ``target`` filled with ``fill``."""
    if tuple(x.shape) == target:
        return x
    out = xp.full(target, fill.item(), dtype=x.dtype)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out
