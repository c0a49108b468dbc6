"""Data made outside any pipeline definition, as DALI allows in a pipeline's ``__init__``:
``types.Constant`` arrays (NVIDIA's nnU-Net loader keeps its constants there) and ``ops`` objects
called there (``self.flip = ops.Flip(horizontal=self.coin())``).

A raypipe graph is recorded while its definition runs, and a pipeline defines its graph again
wherever it runs (after it is dropped, in CPU helpers, in actors), so such data cannot be one node:
it is a recipe that places its operator in each graph that uses it, once per graph, when an
operator, an argument, arithmetic or the outputs first take it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .errors import PipelineDefinitionError
from .graph import DataNode, Graph, current_graph


class DeferredNode:
    """Operator ``op_name`` on ``inputs`` with ``kwargs`` (on ``device``), called outside a
    definition: placed in the graph being defined (:meth:`place_in_current_graph`); data-node
    attributes and operators act on that node. It pickles with its pipeline (its nodes do not)."""

    def __init__(
        self, op_name: str, inputs: Sequence[Any], kwargs: dict[str, Any], device: str | None, description: str
    ):
        self._recipe = (op_name, tuple(inputs), dict(kwargs), device, description)
        self._nodes: weakref.WeakKeyDictionary[Graph, DataNode] = weakref.WeakKeyDictionary()

    def place_in_current_graph(self) -> DataNode:
        """This data's node in the graph being defined (placed on first use in that graph)."""
        graph = current_graph(repr(self))
        node = self._nodes.get(graph)
        if node is None:
            from .input_sets import place

            op_name, inputs, kwargs, device, _ = self._recipe
            node = place(graph, op_name, inputs, kwargs, device)
            if not isinstance(node, DataNode):
                raise PipelineDefinitionError(
                    f"{self!r} gives several outputs: call it inside the pipeline definition (define_graph)"
                )
            self._nodes[graph] = node
        return node

    def __getstate__(self) -> dict[str, Any]:
        return {"_recipe": self._recipe}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._recipe = state["_recipe"]
        self._nodes = weakref.WeakKeyDictionary()

    def __getattr__(self, name: str) -> Any:  # .gpu(), .layout, .shape() ... of the placed node
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.place_in_current_graph(), name)

    def __repr__(self) -> str:
        return self._recipe[4]

    __array_ufunc__ = None
    __hash__ = object.__hash__


def _delegated(name: str) -> Callable[..., Any]:
    def method(self: DeferredNode, *args: Any) -> Any:
        return getattr(self.place_in_current_graph(), name)(*args)

    method.__name__ = name
    return method


for _name in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ "
    "__mod__ __rmod__ __pow__ __rpow__ __neg__ __pos__ __lt__ __le__ __gt__ __ge__ __and__ __rand__ __or__ "
    "__ror__ __xor__ __rxor__ __getitem__"
).split():
    setattr(DeferredNode, _name, _delegated(_name))
