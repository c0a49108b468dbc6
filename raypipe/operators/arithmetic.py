"""Arithmetic on pipeline data: ``images * 2``, ``labels - 1``, ``-x``, ``a / b``, ``a < b``,
``a & b`` (DALI's mathematical expressions), element by element, per sample, with DALI's types
and rules.

Types: a Python ``int`` constant is int32, a ``float`` float32, a ``bool`` bool, a
``types.Constant(value, dtype=...)`` scalar its ``dtype``; two operands
promote as numpy does for typed values (uint8 and int16 give int16, an integer and float32 give
float32), and integer arithmetic wraps (uint8 ``200 * 2`` is 144, as in DALI). ``/`` is true
division in float32 for integers; ``//`` and ``%`` truncate towards zero on integers (C's
quotient and remainder: ``-7 // 2`` is -3, ``-7 % 3`` is -1) and an integer divisor of zero is
an error; on floats ``//`` is ``/`` and ``%`` is C's ``fmod``, as DALI computes them. An integer
``**`` a negative integer is 0 unless the base is 1 or -1 (C's integer power, as DALI). Comparisons
(``== != < <= > >=``) compare in the promoted type and give bool; bitwise ``& | ^`` take integers
and bools only (a float operand is an error, as in DALI) and give the promoted type.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import ScalarConstant
from .batch_args import stacked

COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
BITWISE = ("and", "or", "xor")
BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", *COMPARISONS, *BITWISE)
UNARY = ("neg", "pos")
SYMBOLS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and": "&",
    "or": "|",
    "xor": "^",
    "neg": "-",
    "pos": "+",
}


def constant_dtype(value: Any) -> np.dtype | None:
    """DALI's type of a constant operand: a Python number's (int32, float32, bool), a numpy
    scalar's or a ``types.Constant`` scalar's own; None if not a number."""
    if isinstance(value, ScalarConstant):
        return value.dtype.numpy
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(value, np.number):
        return value.dtype
    if isinstance(value, int):
        return np.dtype(np.int32)
    if isinstance(value, float):
        return np.dtype(np.float32)
    return None


def promoted_dtype(*dtypes: np.dtype) -> np.dtype:
    """The common type of operands: integers (or bools) with floats give the float type, whatever
    the integers' widths (DALI's rule; numpy would widen int32 and float32 to float64); otherwise
    numpy's promotion."""
    floats = [d for d in dtypes if d.kind == "f"]
    return np.result_type(*floats) if floats else np.result_type(*dtypes)


def result_dtype(op: str, left: np.dtype, right: np.dtype) -> np.dtype:
    """The element type of ``left op right``: :func:`promoted_dtype`, float32 for ``/`` of
    integers, bool for comparisons."""
    if op in COMPARISONS:
        return np.dtype(np.bool_)
    promoted = promoted_dtype(left, right)
    if op == "truediv" and promoted.kind in "biu":
        return np.dtype(np.float32)
    return promoted


def integer_power(xp: ModuleType, base: Any, exponent: Any) -> Any:
    """``base ** exponent`` of integer arrays of one type, as C's integer power: wrapping, and for a
    negative exponent 0 unless the base is 1 or -1 (numpy refuses negative integer exponents)."""
    negative = exponent < 0
    power = xp.power(base, xp.where(negative, 0, exponent).astype(base.dtype, copy=False))
    if not bool(xp.any(negative)):
        return power
    odd = (exponent % 2) != 0
    minus_one = xp.where(odd, -1, 1) if base.dtype.kind == "i" else 0
    unit = xp.where(base == 1, 1, xp.where(base == -1, minus_one, 0))
    return xp.where(negative, unit, power).astype(base.dtype, copy=False)


_ELEMENTWISE = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
}


def apply(xp: ModuleType, op: str, left: Any, right: Any = None) -> Any:
    """``left op right`` (or ``op left`` for a unary op) on arrays of the array module ``xp``."""
    if op in UNARY:
        return xp.negative(left) if op == "neg" else left.copy()
    dtype = promoted_dtype(left.dtype, right.dtype) if op in COMPARISONS else result_dtype(op, left.dtype, right.dtype)
    if op in BITWISE and dtype.kind not in "biu":
        raise TypeError(f"bitwise {SYMBOLS[op]} takes integers or bools, got {left.dtype} and {right.dtype}")
    left, right = left.astype(dtype, copy=False), right.astype(dtype, copy=False)
    if op in COMPARISONS or op in BITWISE:
        return getattr(xp, _ELEMENTWISE[op])(left, right)
    if op == "pow" and dtype.kind in "iu":
        return integer_power(xp, left, right)
    if op in ("floordiv", "mod") and dtype.kind in "biu":
        if bool(xp.any(right == 0)):
            raise ValueError(f"integer {SYMBOLS[op]} by zero")
        if op == "mod":
            return xp.fmod(left, right)
        quotient = xp.floor_divide(left, right)
        inexact = (xp.fmod(left, right) != 0) & ((left < 0) != (right < 0))
        return (quotient + inexact.astype(dtype)).astype(dtype, copy=False)
    if op in ("truediv", "floordiv"):
        return xp.true_divide(left, right).astype(dtype, copy=False)
    if op == "mod":
        return xp.fmod(left, right)
    return {"add": xp.add, "sub": xp.subtract, "mul": xp.multiply, "pow": xp.power}[op](left, right, dtype=dtype)


@register
class Arithmetic(Operator):
    """One arithmetic operation between two inputs, an input and a constant, or on one input."""

    schema = Schema("_arithmetic", devices=("cpu", "gpu"), min_inputs=1, max_inputs=2)

    def configure(self, op: str, constant: Any = None, constant_first: bool = False) -> None:
        if op not in BINARY + UNARY:
            raise ArgumentError(f"arithmetic: unknown operation {op!r}")
        if constant is not None and constant_dtype(constant) is None:
            raise ArgumentError(f"arithmetic: {SYMBOLS[op]} takes numbers, got {constant!r}")
        self.op, self.constant_first = op, bool(constant_first)
        self.constant = None if constant is None else np.asarray(constant, dtype=constant_dtype(constant))

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return next((layout for layout in input_layouts if layout), "")

    def run_batch(self, xp, inputs, args, ctxs):
        """Inputs whose samples each have one shape (an image batch, a scalar per sample) in one
        operation over the stacked batch: each input's samples aligned to their trailing axes, as
        one sample's operands broadcast. Ragged inputs go sample by sample."""
        stacked_inputs = [stacked(xp, batch) for batch in inputs]
        if any(s is None for s in stacked_inputs):
            return super().run_batch(xp, inputs, args, ctxs)
        ndim = max(s.ndim for s in stacked_inputs)
        operands = [s.reshape(s.shape[:1] + (1,) * (ndim - s.ndim) + s.shape[1:]) for s in stacked_inputs]
        if self.constant is not None:
            constant = xp.asarray(self.constant)
            operands = [constant, *operands] if self.constant_first else [*operands, constant]
        with np.errstate(all="ignore"):
            return apply(xp, self.op, *operands)

    def compute(self, xp, inputs, args, ctx):
        operands = [xp.asarray(x) for x in inputs]
        if self.constant is not None:
            constant = xp.asarray(self.constant)
            operands = [constant, *operands] if self.constant_first else [*operands, constant]
        with np.errstate(all="ignore"):  # float x / 0 is inf and 0 / 0 nan, silently, as in DALI
            return apply(xp, self.op, *operands)
