"""Operators traced into a graph of their own, run on chosen samples.

An operator that applies one of several transformations to each sample holds each one as a
:class:`Subgraph`: automatic augmentation policies (:mod:`raypipe.auto_aug`) trace each augmentation
function once, at definition time, on placeholder data nodes (:meth:`Subgraph.trace`); conditionals
(:mod:`raypipe.conditionals`) record each branch of an ``if`` in a :class:`CapturingGraph`, where a
data node of the enclosing graph becomes a placeholder. The owner then runs the subgraph on one
sample (:meth:`Subgraph.run_sample`, the CPU stage) or on a group of samples
(:meth:`Subgraph.run_batch`, the GPU stage), each operator as the stages run it in a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .errors import PipelineDefinitionError
from .graph import DataNode, Graph, OpNode, _check_order, _reachable, check_open, defining
from .keyed_random import SampleContext
from .operators.external_source import ExternalSource

#: The operator of a subgraph's inputs (:mod:`raypipe.operators.subgraph_input`).
INPUT_OP = "_subgraph_input"

#: The operator ids of the subgraphs an operator holds start at this many times (that operator's id
#: + 1): they key random streams that no operator of the enclosing graph uses.
ID_SPAN = 1 << 20


def first_subgraph_id(graph: Graph) -> int:
    """The first operator id for the subgraphs of the operator ``graph`` places next."""
    return (graph.first_id + len(graph.nodes) + 1) * ID_SPAN


class CapturingGraph(Graph):
    """A graph recorded inside an enclosing one (``parent``): an operator placed here on a data node
    of the enclosing graphs takes a placeholder instead, one per node (``captured`` maps the node, as
    the parent sees it, to its placeholder)."""

    def __init__(self, parent: Graph, first_id: int):
        super().__init__(first_id=first_id)
        self.parent = parent
        self.captured: dict[DataNode, DataNode] = {}
        self._own: set[OpNode] = set()

    def capture(self, value: Any) -> Any:
        """``value`` as this graph sees it: a node of an enclosing graph becomes its placeholder."""
        if not isinstance(value, DataNode) or value.producer in self._own:
            return value
        check_open(value)
        outer = self.parent.capture(value) if isinstance(self.parent, CapturingGraph) else value
        placeholder = self.captured.get(outer)
        if placeholder is None:
            placeholder = super().add(INPUT_OP, [], {"slot": len(self.captured)}, device=outer.device)[0]
            self._own.add(placeholder.producer)
            self.captured[outer] = placeholder
        return placeholder

    def add(
        self, op_name: str, inputs: Sequence[Any], kwargs: dict[str, Any], device: str | None = None
    ) -> list[DataNode]:
        outputs = super().add(
            op_name, [self.capture(v) for v in inputs], {k: self.capture(v) for k, v in kwargs.items()}, device
        )
        self._own.add(self.nodes[-1])
        return outputs

    def close(self, where: str) -> None:
        """The branch is recorded: its nodes may no longer be used outside it (see :func:`check_open`)."""
        for node in self.nodes:
            node.closed_in = where

    def outer(self, placeholder: DataNode) -> DataNode:
        """The enclosing graph's node (as the parent sees it) that ``placeholder`` stands for."""
        return next(node for node, p in self.captured.items() if p is placeholder)


class Subgraph:
    """The operators of ``graph`` that ``outputs`` need, given values for ``placeholders`` (nodes of
    ``graph`` made by its ``_subgraph_input`` operator, in the order the owner passes their values);
    an output may be a placeholder itself."""

    def __init__(
        self,
        name: str,
        graph: Graph,
        placeholders: Sequence[DataNode],
        outputs: Sequence[DataNode],
        allow_whole_batch: bool = False,
    ):
        """``allow_whole_batch``: its owner runs it on groups of samples (:meth:`run_batch`) wherever
        it holds an operator that needs the whole batch, so such operators are allowed."""
        self.name = name
        self.placeholders = list(placeholders)
        self.outputs = list(outputs)
        needed = _reachable([out.producer for out in self.outputs])
        self.nodes: list[OpNode] = [n for n in graph.nodes if n in needed and n.op.schema.name != INPUT_OP]
        for node in self.nodes:
            _check_node(name, node, allow_whole_batch)
        #: whether an operator in it needs the whole batch (it then runs only through run_batch)
        self.whole_batch = any(_needs_batch(node) for node in self.nodes)

    @classmethod
    def trace(
        cls, name: str, function: Callable[..., Any], inputs: Sequence[str], kwargs: dict[str, Any], first_id: int
    ) -> Subgraph:
        """``function(*placeholders, **kwargs)`` traced: ``inputs`` are the devices of its placeholder
        inputs (``"cpu"`` or ``"gpu"``), ``first_id`` the operator id of its first operator (ids key
        the operators' random streams: give each subgraph ids no other operator has). It must
        return one output."""
        graph = Graph(first_id=first_id)
        with defining(graph):
            placeholders = [graph.add(INPUT_OP, [], {"slot": i}, device=d)[0] for i, d in enumerate(inputs)]
            out = function(*placeholders, **kwargs)
        if not isinstance(out, DataNode) or (out.producer not in graph.nodes):
            raise PipelineDefinitionError(
                f"{name} must return one output of the operators it calls on its input, got {out!r}"
            )
        return cls(name, graph, placeholders, [out])

    @staticmethod
    def needed_placeholders(graph: Graph, outputs: Sequence[DataNode]) -> list[DataNode]:
        """The placeholders of ``graph`` that ``outputs`` depend on, in the order they were made."""
        needed = _reachable([out.producer for out in outputs])
        return [n.outputs[0] for n in graph.nodes if n in needed and n.op.schema.name == INPUT_OP]

    def preload(self) -> None:
        """Its operators' :meth:`~raypipe.operator.Operator.preload`."""
        for node in self.nodes:
            node.op.preload()

    def device_operators(self) -> list[Any]:
        """Its operators that run on a device (what ``pipe.device_report()`` judges an owner by)."""
        inner = []
        for node in self.nodes:
            if node.device != "cpu":
                inner.append(node.op)
            inner.extend(getattr(node.op, "inner_operators", list)())
        return inner

    def output_layouts(self, input_layouts: Sequence[str]) -> list[str]:
        """The outputs' layouts given the placeholders' layouts; every operator checks its input's
        layout here, as the pipeline's do when it is built."""
        layouts = dict(zip(self.placeholders, input_layouts))
        for node in self.nodes:
            layout = node.op.output_layout([layouts.get(d, "") for d in node.inputs])
            per_output = getattr(node.op, "output_layouts", None)
            for d, each in zip(node.outputs, per_output() if per_output else [layout] * len(node.outputs)):
                layouts[d] = each
        return [layouts.get(out, "") for out in self.outputs]

    def run_sample(self, values: Sequence[Any], ctx: SampleContext) -> list[Any]:
        """The outputs for one sample, given a value for each placeholder."""
        env: dict[DataNode, Any] = dict(zip(self.placeholders, values))
        for node in self.nodes:
            out = node.op.run_sample(
                [env[d] for d in node.inputs], {k: env[d] for k, d in node.arg_inputs.items()}, ctx
            )
            _store(env, node, out)
        return [env[out] for out in self.outputs]

    def run_batch(self, xp: ModuleType, values: Sequence[list[Any]], ctxs: Sequence[SampleContext]) -> list[list[Any]]:
        """The outputs for a group of samples (the GPU stage): the samples of each placeholder in
        (a list, a batch array or a packed batch), each output's samples out, as the operator making
        it gave them (or as they came in, for an output that is a placeholder). Host operators run with
        numpy, the others with ``xp``; host values a device operator takes as inputs are moved to
        the device (those of placeholders on the GPU first)."""
        env: dict[DataNode, Any] = {
            d: _on(xp, v, d.device == "cpu" or (isinstance(v, list) and any(x is None for x in v)))
            for d, v in zip(self.placeholders, values)
        }
        for node in self.nodes:
            on_host = node.device == "cpu"
            inputs = [_on(xp, env[d], on_host or d.device == "gpu") for d in node.inputs]
            args = {k: env[d] for k, d in node.arg_inputs.items()}
            out = node.op.run_batch(np if on_host else xp, inputs, args, ctxs)
            _store(env, node, out)
        return [env[out] for out in self.outputs]


class SubgraphOwner:
    """What an operator holding subgraphs (``subgraphs``) gets from them: its device operators for
    ``pipe.device_report()`` and their preloading."""

    subgraphs: list[Subgraph]

    def inner_operators(self) -> list[Any]:
        """The device operators of its subgraphs (what ``pipe.device_report()`` judges it by)."""
        return [op for subgraph in self.subgraphs for op in subgraph.device_operators()]

    def preload(self) -> None:
        for subgraph in self.subgraphs:
            subgraph.preload()


def _on(xp: ModuleType, samples: Any, as_is: bool) -> Any:
    """``samples`` where an operator takes them: as they are, or host samples moved to ``xp``'s device
    (a batch array in one copy)."""
    if as_is or xp is np:
        return samples
    if isinstance(samples, np.ndarray):
        return xp.asarray(samples)
    return [xp.asarray(s) for s in samples]


def _store(env: dict[DataNode, Any], node: OpNode, out: Any) -> None:
    if len(node.outputs) == 1:
        env[node.outputs[0]] = out
    else:
        for d, value in zip(node.outputs, out):
            env[d] = value


def _needs_batch(node: OpNode) -> bool:
    op = node.op
    return bool(getattr(op, "batch_semantics", False)) or (
        node.device == "cpu" and op.host_batch_step(set(node.arg_inputs))
    )


def _check_node(name: str, node: OpNode, allow_whole_batch: bool = False) -> None:
    """Refuse what cannot run on chosen samples: readers, sources, mixed operators, and, unless the
    owner runs the subgraph on groups of samples (``allow_whole_batch``), operators that need the
    whole batch."""
    op = node.op
    schema = op.schema
    if schema.is_reader or isinstance(op, ExternalSource):
        raise PipelineDefinitionError(
            f"{name}: {node.label} makes data of its own; a subgraph only transforms its input"
        )
    if node.device == "mixed" and not getattr(op, "batch_transfer", False):  # .gpu() moves a group as it is
        raise PipelineDefinitionError(
            f"{name}: {node.label} runs on device 'mixed'; a subgraph runs operators on 'cpu' or 'gpu'"
        )
    if not allow_whole_batch and _needs_batch(node):
        raise PipelineDefinitionError(
            f"{name}: {node.label} needs the whole batch; a subgraph runs on the samples chosen for it"
        )
    _check_order(node)
