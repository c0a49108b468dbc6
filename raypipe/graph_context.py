"""DALI's graph-context style: ``with pipe:`` records the operators called inside it into the
pipeline's graph, and ``pipe.set_outputs(...)`` names its outputs.

The calls are recorded, not only their nodes: an engine (and a CPU helper's copy of it) defines
its graph afresh each time it stages one, so a recorded graph is replayed into the graph being
defined (:meth:`RecordedGraph.replay`), making new operator instances with the same arguments in
the same order (hence the same places in the graph and the same random streams).

The current pipeline (:func:`current`) is the innermost one whose ``with`` block, or
:func:`push_current`, is active in this thread."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import PipelineDefinitionError
from .graph import DataNode, Graph, current_graph, defining

_local = threading.local()


@dataclass(frozen=True)
class _Call:
    """One recorded operator call: what ``Graph.add`` was given, and the outputs it made."""

    op_name: str
    inputs: tuple[Any, ...]
    kwargs: dict[str, Any]
    device: str | None
    outputs: tuple[DataNode, ...]


class RecordedGraph(Graph):
    """A graph that also keeps each operator call, to replay them into another graph."""

    def __init__(self):
        super().__init__()
        self.calls: list[_Call] = []
        self.sinks: list[DataNode] = []  # outputs kept although no pipeline output needs them (add_sink)
        self._depth = 0  # adds in progress: only the outermost is recorded

    def add(
        self, op_name: str, inputs: Sequence[Any], kwargs: dict[str, Any], device: str | None = None
    ) -> list[DataNode]:
        """Place the operator (checking its arguments now, as DALI does) and record the call. What the
        call places itself (a constant input, a decoder's ``dtype`` conversion, a move to the GPU) is
        not recorded: replaying the call places it again."""
        given = dict(kwargs)
        self._depth += 1
        try:
            outputs = super().add(op_name, inputs, kwargs, device)
        finally:
            self._depth -= 1
        if not self._depth:
            self.calls.append(_Call(op_name, tuple(inputs), given, device, tuple(outputs)))
        return outputs

    def owns(self, node: Any) -> bool:
        """True when ``node`` is an output of an operator recorded here."""
        return isinstance(node, DataNode) and any(out is node for call in self.calls for out in call.outputs)

    def replay(self, outputs: Sequence[DataNode]) -> tuple[DataNode, ...]:
        """Call every recorded operator again in the graph being defined in this thread; return
        what ``outputs`` became there."""
        graph = current_graph("replaying a recorded graph")
        made: dict[DataNode, DataNode] = {}

        def mapped(value: Any) -> Any:
            return made[value] if isinstance(value, DataNode) else value

        for call in self.calls:
            inputs = [mapped(d) for d in call.inputs]
            kwargs = {key: mapped(value) for key, value in call.kwargs.items()}
            made.update(zip(call.outputs, graph.add(call.op_name, inputs, kwargs, call.device)))
        for sink in self.sinks:
            made[sink].producer.op.preserve = True
        return tuple(made[d] for d in outputs)


class Recording:
    """The active ``with`` block of a pipeline being defined: its graph is the one operator calls
    go to in this thread until :meth:`stop`."""

    def __init__(self, graph: RecordedGraph):
        self._defining = defining(graph)
        self._defining.__enter__()

    def stop(self) -> None:
        """Operator calls go where they went before :meth:`__init__`."""
        self._defining.__exit__(None, None, None)


def current() -> Any:
    """The current pipeline in this thread (None outside every ``with pipe:`` block)."""
    return getattr(_local, "current", None)


def push_current(pipeline: Any) -> Any:
    """Make ``pipeline`` current in this thread, keeping the previous one for :func:`pop_current`;
    return the previous one."""
    previous = current()
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(previous)
    _local.current = pipeline
    return previous


def pop_current() -> None:
    """Restore the pipeline that was current before the last :func:`push_current`."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise PipelineDefinitionError("pop_current(): no pipeline was made current with push_current()")
    _local.current = stack.pop()
