"""``constant``: the same tensor for every sample, from ``fdata`` (floats) or ``idata`` (ints)
reshaped to ``shape`` (one value fills the whole shape), as DALI's operator that
``types.Constant`` places for array values.

Converting to ``dtype`` rounds and saturates as ``cast`` does (DALI's host rounds ties away from
zero: ``2.5`` to int is 3 there, 2 here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from .axes import check_layout, float_list, int_list
from .cast import parse_dtype, saturate_cast


@register
class Constant(Operator):
    """A constant tensor per sample: ``fdata`` or ``idata`` as ``shape`` and ``dtype``."""

    schema = Schema("constant", devices=("cpu", "gpu"), min_inputs=0, max_inputs=0)

    def configure(self, fdata=None, idata=None, shape=None, dtype: Any = None, layout: str = "") -> None:
        if (fdata is None) == (idata is None):
            raise ArgumentError("constant: exactly one of fdata and idata is required")
        if fdata is not None:
            values = np.asarray(float_list("constant", "fdata", fdata), dtype=np.float64)
        else:
            values = np.asarray(int_list("constant", "idata", idata), dtype=np.int64)
        dims = (len(values),) if shape is None else int_list("constant", "shape", shape)
        if any(d < 0 for d in dims):
            raise ArgumentError(f"constant: shape must hold non-negative extents, got {list(dims)}")
        if len(values) not in (1, math.prod(dims)):
            raise ArgumentError(f"constant: {len(values)} values do not fill the shape {list(dims)}")
        if dtype is None:
            target = np.dtype(np.float32) if fdata is not None else np.dtype(np.int32)
        else:
            target = parse_dtype("constant", "dtype", dtype)
        self.layout = check_layout("constant", "layout", layout)
        if self.layout and len(self.layout) != len(dims):
            raise ArgumentError(f"constant: layout {self.layout!r} does not match the {len(dims)}-D shape")
        typed = saturate_cast(np, values, target)
        self.value = np.array(np.broadcast_to(typed[0], dims) if len(values) == 1 else typed.reshape(dims))

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layout

    def compute(self, xp, inputs, args, ctx):
        return xp.array(self.value)

    def run_batch(self, xp, inputs, args, ctxs):
        """The batch as one array, moved to the device in one copy."""
        batch = np.ascontiguousarray(np.broadcast_to(self.value, (len(ctxs), *self.value.shape)))
        return launch.to_device(xp, batch)
