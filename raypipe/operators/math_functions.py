"""DALI's ``math`` functions (``fn.math.sqrt(x)``, ``fn.math.clamp(x, 0, 255)``, ...), element by
element, per sample, with DALI's result types.

``abs`` keeps its operand's type; the floating-point functions (``fabs``, ``floor``, ``ceil``,
``sqrt``, ``rsqrt``, ``cbrt``, ``exp``, the logarithms and the trigonometric and hyperbolic
functions) give float32 for integer operands and keep a float type; ``pow``, ``min``, ``max`` and
``clamp`` promote their operands as arithmetic does (:func:`arithmetic.promoted_dtype`), ``fpow``
and ``atan2`` promote and then give float32 for integers. Bool operands are refused, as in DALI.
Constants take DALI's types (:func:`arithmetic.constant_dtype`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .arithmetic import constant_dtype, integer_power, promoted_dtype

#: Floating-point functions of one operand: DALI's name -> the array module's function.
FLOAT_UNARY = {
    "fabs": "abs",
    "floor": "floor",
    "ceil": "ceil",
    "sqrt": "sqrt",
    "rsqrt": "sqrt",
    "cbrt": "cbrt",
    "exp": "exp",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "asin": "arcsin",
    "acos": "arccos",
    "atan": "arctan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "asinh": "arcsinh",
    "acosh": "arccosh",
    "atanh": "arctanh",
}
#: Every function by name -> its number of operands.
ARITY = {"abs": 1, **dict.fromkeys(FLOAT_UNARY, 1), **dict.fromkeys(("pow", "fpow", "atan2", "min", "max"), 2)}
ARITY["clamp"] = 3


def _float_type(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def evaluate(xp: ModuleType, function: str, operands: Sequence[Any]) -> Any:
    """``function`` of arrays ``operands`` of the array module ``xp`` with DALI's result type."""
    if any(x.dtype.kind == "b" for x in operands):
        raise TypeError(f"math.{function} does not take bool operands")
    dtype = promoted_dtype(*(x.dtype for x in operands))
    if function in FLOAT_UNARY or function in ("fpow", "atan2"):
        dtype = _float_type(dtype)
    operands = [x.astype(dtype, copy=False) for x in operands]
    if function == "abs":
        return xp.abs(operands[0])
    if function in FLOAT_UNARY:
        result = getattr(xp, FLOAT_UNARY[function])(operands[0])
        return (1 / result).astype(dtype, copy=False) if function == "rsqrt" else result
    if function in ("pow", "fpow"):
        return integer_power(xp, *operands) if dtype.kind in "iu" else xp.power(*operands)
    if function == "atan2":
        return xp.arctan2(*operands)
    if function == "min":
        return xp.minimum(*operands)
    if function == "max":
        return xp.maximum(*operands)
    value, low, high = operands
    return xp.minimum(xp.maximum(value, low), high)


@register
class MathFunction(Operator):
    """One ``math`` function of inputs and constants (``fn.math.<function>``)."""

    schema = Schema("_math", devices=("cpu", "gpu"), min_inputs=1, max_inputs=3)

    def configure(self, function: str, constants: dict[int, Any] | None = None) -> None:
        if function not in ARITY:
            raise ArgumentError(f"math: unknown function {function!r}")
        constants = dict(constants or {})
        for value in constants.values():
            if constant_dtype(value) is None:
                raise ArgumentError(f"math.{function}: operands are data or numbers, got {value!r}")
        self.function = function
        self.constants = {int(k): np.asarray(v, dtype=constant_dtype(v)) for k, v in constants.items()}

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return next((layout for layout in input_layouts if layout), "")

    def compute(self, xp, inputs, args, ctx):
        given = iter(inputs)
        operands = [
            xp.asarray(self.constants[k] if k in self.constants else next(given)) for k in range(ARITY[self.function])
        ]
        with np.errstate(all="ignore"):  # sqrt(-1) is nan and log(0) -inf, silently, as in DALI
            return evaluate(xp, self.function, operands)
