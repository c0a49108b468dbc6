"""Arithmetic on pipeline data: ``images * 2``, ``labels - 1``, ``-x``, ``a / b`` (DALI's
mathematical expressions), element by element, per sample, with DALI's types and rules.

Types: a Python ``int`` constant is int32, a ``float`` float32, a ``bool`` bool, a
``types.Constant(value, dtype=...)`` scalar its ``dtype``; two operands
promote as numpy does for typed values (uint8 and int16 give int16, an integer and float32 give
float32), and integer arithmetic wraps (uint8 ``200 * 2`` is 144, as in DALI). ``/`` is true
division in float32 for integers; ``//`` and ``%`` truncate towards zero on integers (C's
quotient and remainder: ``-7 // 2`` is -3, ``-7 % 3`` is -1) and an integer divisor of zero is
an error; on floats ``//`` is ``/`` and ``%`` is C's ``fmod``, as DALI computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import ScalarConstant

BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")
UNARY = ("neg", "pos")
SYMBOLS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
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


def result_dtype(op: str, left: np.dtype, right: np.dtype) -> np.dtype:
    """The element type of ``left op right``: an integer (or bool) with a float gives that float
    type, whatever the integer's width (DALI's rule; numpy would widen int32 and float32 to
    float64); otherwise numpy's promotion."""
    floats = [d for d in (left, right) if d.kind == "f"]
    promoted = np.result_type(*floats) if len(floats) == 1 else np.result_type(left, right)
    if op == "truediv" and promoted.kind in "biu":
        return np.dtype(np.float32)
    return promoted


def apply(xp: ModuleType, op: str, left: Any, right: Any = None) -> Any:
    """``left op right`` (or ``op left`` for a unary op) on arrays of the array module ``xp``."""
    if op in UNARY:
        return xp.negative(left) if op == "neg" else left.copy()
    dtype = result_dtype(op, left.dtype, right.dtype)
    left, right = left.astype(dtype, copy=False), right.astype(dtype, copy=False)
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

    def compute(self, xp, inputs, args, ctx):
        operands = [xp.asarray(x) for x in inputs]
        if self.constant is not None:
            constant = xp.asarray(self.constant)
            operands = [constant, *operands] if self.constant_first else [*operands, constant]
        with np.errstate(all="ignore"):  # float x / 0 is inf and 0 / 0 nan, silently, as in DALI
            return apply(xp, self.op, *operands)
