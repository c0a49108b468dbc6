"""DALI's ``nvidia.dali.math``: ``math.sqrt(x)``, ``math.clamp(x, 0, 255)``, also as ``fn.math.*``.

Each function places one element-wise operator (:mod:`raypipe.operators.math_functions`) on its
data operands; number operands are constants of DALI's types (``int`` int32, ``float`` float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ArgumentError
from .graph import DataNode, constant_input, current_graph, placed

#: DALI's names of each function's operands (``clamp(value, lo=0, hi=255)`` as in DALI)
_PARAMETERS = {
    "min": ("left", "right"),
    "max": ("left", "right"),
    "pow": ("base", "exponent"),
    "fpow": ("base", "exponent"),
    "atan2": ("x", "y"),
    "clamp": ("value", "lo", "hi"),
}


def _operands(function: str, positional: tuple[Any, ...], named: dict[str, Any]) -> list[Any]:
    """The operands in order, from positions and DALI's parameter names."""
    names = _PARAMETERS.get(function, ("input",))
    if len(positional) > len(names):
        raise ArgumentError(f"math.{function} takes {len(names)} operands, got {len(positional)}")
    unknown = sorted(set(named) - set(names))
    if unknown:
        raise ArgumentError(f"math.{function}: unknown operand {unknown[0]!r}; its operands are {', '.join(names)}")
    given = dict(zip(names, positional))
    twice = sorted(set(given) & set(named))
    if twice:
        raise ArgumentError(f"math.{function}: operand {twice[0]!r} given twice")
    given.update(named)
    missing = [name for name in names if name not in given]
    if missing:
        raise ArgumentError(f"math.{function} takes {len(names)} operands ({', '.join(names)}), missing {missing[0]!r}")
    return [given[name] for name in names]


def _operand(function: str, value: Any) -> Any:
    """An operand: data, a number, or an array, list or tuple made a tensor constant broadcast
    against each sample, as DALI's arithmetic makes it (``math.min(x, [1.0, 1.0])``)."""
    value = placed(value)
    if isinstance(value, (np.ndarray, list, tuple)):
        return constant_input(f"math.{function}", value)
    return value


def _place(function: str, *operands: Any, **named: Any) -> DataNode:
    operands = [_operand(function, x) for x in _operands(function, operands, named)]
    inputs = [x for x in operands if isinstance(x, DataNode)]
    if not inputs:
        raise ArgumentError(f"math.{function}: at least one operand must be pipeline data")
    constants = {k: x for k, x in enumerate(operands) if not isinstance(x, DataNode)}
    graph = current_graph(f"math.{function}")
    return graph.add("_math", inputs, {"function": function, "constants": constants})[0]


def _function(function: str):
    def place(*operands: Any, **named: Any) -> DataNode:
        return _place(function, *operands, **named)

    place.__name__ = place.__qualname__ = function
    operands = ", ".join(_PARAMETERS.get(function, ("input",)))
    place.__doc__ = f"DALI's ``math.{function}({operands})``, element by element."
    return place


abs = _function("abs")  # noqa: A001
fabs = _function("fabs")
floor = _function("floor")
ceil = _function("ceil")
pow = _function("pow")  # noqa: A001
fpow = _function("fpow")
sqrt = _function("sqrt")
rsqrt = _function("rsqrt")
cbrt = _function("cbrt")
exp = _function("exp")
log = _function("log")
log2 = _function("log2")
log10 = _function("log10")
sin = _function("sin")
cos = _function("cos")
tan = _function("tan")
asin = _function("asin")
acos = _function("acos")
atan = _function("atan")
atan2 = _function("atan2")
sinh = _function("sinh")
cosh = _function("cosh")
tanh = _function("tanh")
asinh = _function("asinh")
acosh = _function("acosh")
atanh = _function("atanh")
min = _function("min")  # noqa: A001
max = _function("max")  # noqa: A001
clamp = _function("clamp")
