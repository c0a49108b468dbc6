"""``lookup_table``: integer samples mapped through a table of ``keys`` and ``values``, as DALI's
(label remapping in segmentation, class merging).

The table holds ``default_value`` for every index up to the largest key that no key names, and a
repeated key takes its last value; an input value outside ``[0, max(keys)]`` gives the default.
Values convert to ``dtype`` (``FLOAT`` by default) as DALI's host does: rounded to nearest with ties
away from zero, then saturated. DALI 2.4 crashes on empty ``keys``; here every value is then the
default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from .axes import float_list, int_list
from .cast import parse_dtype
from .fill import converted

OP = "lookup_table"
MAX_KEY = 65535


@register
class LookupTable(Operator):
    """Each value of an integer sample replaced by its entry in the table."""

    schema = Schema(OP, devices=("cpu", "gpu"))

    def configure(
        self, keys=(), values=(), default_value: float = 0.0, dtype: Any = None, output_dtype: Any = None
    ) -> None:
        if dtype is not None and output_dtype is not None:
            raise ArgumentError(f"{OP}: dtype and output_dtype (its deprecated alias) exclude each other")
        chosen = dtype if dtype is not None else output_dtype
        self.dtype = np.dtype(np.float32) if chosen is None else parse_dtype(OP, "dtype", chosen)
        keys = int_list(OP, "keys", keys)
        values = float_list(OP, "values", values)
        if len(keys) != len(values):
            raise ArgumentError(f"{OP}: keys and values must be as long, got {len(keys)} keys and {len(values)} values")
        if any(not 0 <= k <= MAX_KEY for k in keys):
            raise ArgumentError(
                f"{OP}: keys must be in [0, {MAX_KEY}], got {[k for k in keys if not 0 <= k <= MAX_KEY]}"
            )
        try:
            default = float(default_value)
        except (TypeError, ValueError):
            raise ArgumentError(f"{OP}: default_value must be a number, got {default_value!r}") from None
        table = np.full(max(keys, default=-1) + 1, default, dtype=np.float64)
        for key, value in zip(keys, values, strict=True):  # a repeated key keeps its last value
            table[key] = value
        self.table = converted(np, table, self.dtype)
        self.default = converted(np, np.array(default), self.dtype)

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        if data.dtype.kind not in "iu":
            raise ValueError(f"{OP}: the input must be of an integer type, got {data.dtype}")
        table = xp.asarray(self.table)
        if not len(table):
            return xp.full(data.shape, self.default, dtype=self.dtype)
        inside = (data >= 0) & (data < len(table))
        looked_up = table[xp.clip(data.astype(np.int64), 0, len(table) - 1)]
        return xp.where(inside, looked_up, xp.asarray(self.default))

    def run_batch(self, xp, inputs, args, ctxs):
        """The whole batch in one lookup (the table is elementwise): a batch array, or a packed ragged
        batch's buffer; a list of samples sample by sample."""
        data = inputs[0]
        if isinstance(data, launch.Packed):
            return dataclasses.replace(data, data=self.compute(xp, [data.data], {}, None))
        if hasattr(data, "ndim"):
            return self.compute(xp, [data], {}, None)
        return super().run_batch(xp, inputs, args, ctxs)
