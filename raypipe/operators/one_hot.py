"""``one_hot``: a new axis of ``num_classes`` values, ``on_value`` at each element's class and
``off_value`` elsewhere, as DALI's operator.

A class is the element truncated to an integer; one outside ``[0, num_classes)`` gives no
``on_value``. ``on_value`` and ``off_value`` convert to ``dtype`` as C casts do (integers wrap:
300 as uint8 is 44, as in DALI). Without an explicit ``axis``, a sample of one element is a scalar
and gives a 1-D result (DALI decides this per batch: every sample of one element).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from ..types import DALIDataType
from .axes import is_int
from .cast import c_cast, parse_dtype


@register
class OneHot(Operator):
    """One-hot encode each element's class along a new axis ``axis`` (the last by default)."""

    schema = Schema("one_hot", devices=("cpu", "gpu"))

    def configure(
        self,
        num_classes: int = 0,
        axis: int | None = None,
        axis_name: str | None = None,
        dtype: Any = DALIDataType.FLOAT,
        on_value: float = 1.0,
        off_value: float = 0.0,
    ) -> None:
        if not is_int(num_classes) or num_classes < 0:
            raise ArgumentError(f"one_hot: num_classes must be a non-negative int, got {num_classes!r}")
        if axis is not None and (not is_int(axis) or axis < -1):
            raise ArgumentError(f"one_hot: axis must be an int of at least -1 (-1: the last), got {axis!r}")
        if axis_name is not None and (not isinstance(axis_name, str) or len(axis_name) != 1):
            raise ArgumentError(f"one_hot: axis_name must be one axis letter, got {axis_name!r}")
        self.num_classes = int(num_classes)
        self.axis, self.axis_name = axis, axis_name
        self.dtype = parse_dtype("one_hot", "dtype", dtype)
        self.on = c_cast(check_number("one_hot", "on_value", on_value), self.dtype)
        self.off = c_cast(check_number("one_hot", "off_value", off_value), self.dtype)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_name is None:
            return ""
        if not given:  # scalar labels (DALI's usual input) give a 1-D result: the new axis alone
            return self.axis_name if self.axis is None else ""
        position = len(given) if self.axis in (None, -1) else self.axis
        if position > len(given):
            raise ArgumentError(f"one_hot: axis {self.axis} is out of range for the {len(given)}-D input {given!r}")
        return given[:position] + self.axis_name + given[position:]

    def _position(self, ndim: int) -> int:
        """Where the new axis goes in the output of an ``ndim``-D sample."""
        if self.axis is None or self.axis == -1:
            return ndim
        if self.axis > ndim:
            raise ValueError(f"one_hot: axis {self.axis} is out of range [-1, {ndim}] for {ndim}-D samples")
        return self.axis

    def _encode(self, xp, classes, position: int):
        """``classes`` one-hot encoded along a new axis at ``position``."""
        hits = xp.expand_dims(classes.astype(np.int64), -1) == xp.arange(self.num_classes)
        out = xp.where(hits, xp.asarray(self.on), xp.asarray(self.off)).astype(self.dtype, copy=False)
        return xp.ascontiguousarray(xp.moveaxis(out, -1, position))

    def compute(self, xp, inputs, args, ctx):
        x = xp.asarray(inputs[0])
        if self.axis is None and x.size == 1:
            return self._encode(xp, x.reshape(()), 0)
        return self._encode(xp, x, self._position(x.ndim))

    def run_batch(self, xp, inputs, args, ctxs):
        """One array holding the batch encodes in one call; other batches sample by sample."""
        batch = inputs[0]
        if not hasattr(batch, "ndim"):
            return super().run_batch(xp, inputs, args, ctxs)
        if self.axis is None and batch[0].size == 1:
            return self._encode(xp, batch.reshape(len(batch)), 1)
        return self._encode(xp, batch, self._position(batch.ndim - 1) + 1)
