"""Functional operators: ``fn.resize(images, resize_x=224)``, ``fn.readers.file(...)``.

Every registered operator appears here under its dotted name, and under DALI's deprecated
top-level name where DALI still ships one (``fn.image_decoder``, ``fn.file_reader``, ...) and its
deprecated ``experimental`` name (``fn.experimental.filter``, ``fn.experimental.decoders.image``);
calling one inside a pipeline definition places it in the graph and returns its output(s).
"""

from __future__ import annotations

from typing import Any

from .graph import DataNode, current_graph
from .input_sets import place
from .operator import EXPERIMENTAL, OLD_NAMES, registry

_ALIASES = {fn_name: op_name for op_name, (_, fn_name) in OLD_NAMES.items()}


def _call(op_name: str, *inputs: DataNode, device: str | None = None, **kwargs: Any):
    return place(current_graph(f"fn.{op_name}"), op_name, inputs, kwargs, device)


class _Namespace:
    def __init__(self, prefix: str):
        self._prefix = prefix

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr == "math" and not self._prefix:
            from . import math

            return math
        name = _ALIASES.get(attr, attr) if not self._prefix else f"{self._prefix}{attr}"
        name = EXPERIMENTAL.get(name, name)
        ops = registry()
        if name in ops:

            def operator(*inputs, device=None, **kwargs):
                return _call(name, *inputs, device=device, **kwargs)

            operator.__name__ = attr
            operator.__qualname__ = f"fn.{name}"
            operator.__doc__ = ops[name].__doc__
            return operator
        if any(k.startswith(f"{name}.") for k in (*ops, *EXPERIMENTAL)):
            return _Namespace(f"{name}.")
        raise AttributeError(f"raypipe has no operator fn.{name}")

    def __dir__(self):
        names = {
            k[len(self._prefix) :].split(".")[0] for k in (*registry(), *EXPERIMENTAL) if k.startswith(self._prefix)
        }
        if not self._prefix:
            names |= {a for a, op_name in _ALIASES.items() if op_name in registry()} | {"math"}
        return sorted(n for n in names if not n.startswith("_"))


_root = _Namespace("")


def __getattr__(attr: str):
    return getattr(_root, attr)


def __dir__():
    return dir(_root)


def register_namespace_modules() -> None:
    """Make ``from raypipe.fn.<namespace> import ...`` work, as with DALI's packages."""
    from .namespace_modules import register

    register(__name__, (*registry(), *EXPERIMENTAL), _Namespace)
