"""A constant made outside any pipeline definition, as DALI allows ``types.Constant`` in a
pipeline's ``__init__`` (NVIDIA's nnU-Net loader keeps its constants there).

A raypipe graph is recorded while its definition runs, and a pipeline defines its graph again
wherever it runs (after it is dropped, in CPU helpers, in actors), so such a constant cannot be one
node: it is a recipe that places its ``constant`` operator in each graph that uses it, once per
graph, when an operator, an argument, arithmetic or the outputs first take it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .graph import DataNode, Graph, current_graph


class DeferredConstant:
    """``types.Constant(value, ...)`` called outside a definition: the ``constant`` operator with
    ``arguments``, placed in the graph being defined (:meth:`place_in_current_graph`); data-node
    attributes and operators act on that node. It pickles with its pipeline (its nodes do not)."""

    def __init__(self, arguments: dict[str, Any]):
        self._arguments = arguments
        self._nodes: weakref.WeakKeyDictionary[Graph, DataNode] = weakref.WeakKeyDictionary()

    def place_in_current_graph(self) -> DataNode:
        """This constant's node in the graph being defined (placed on first use in that graph)."""
        graph = current_graph(repr(self))
        node = self._nodes.get(graph)
        if node is None:
            from . import fn

            node = self._nodes[graph] = fn.constant(**self._arguments)
        return node

    def __getstate__(self) -> dict[str, Any]:
        return {"_arguments": self._arguments}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._arguments = state["_arguments"]
        self._nodes = weakref.WeakKeyDictionary()

    def __getattr__(self, name: str) -> Any:  # .gpu(), .layout, .shape() ... of the placed node
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.place_in_current_graph(), name)

    def __repr__(self) -> str:
        return f"types.Constant(shape={self._arguments['shape']}, dtype={self._arguments['dtype']})"

    __array_ufunc__ = None
    __hash__ = object.__hash__


def _delegated(name: str) -> Callable[..., Any]:
    def method(self: DeferredConstant, *args: Any) -> Any:
        return getattr(self.place_in_current_graph(), name)(*args)

    method.__name__ = name
    return method


for _name in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ "
    "__mod__ __rmod__ __pow__ __rpow__ __neg__ __pos__ __lt__ __le__ __gt__ __ge__ __and__ __rand__ __or__ "
    "__ror__ __xor__ __rxor__ __getitem__"
).split():
    setattr(DeferredConstant, _name, _delegated(_name))
