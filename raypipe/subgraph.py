"""A function of pipeline data traced into operators of its own, run on chosen samples.

An operator that applies one of several transformations to each sample (automatic augmentation
policies, :mod:`raypipe.auto_aug`) holds each transformation as a :class:`Subgraph`: the function
is called once, at definition time, on placeholder data nodes, and the operators it places are
recorded in a graph of their own instead of the pipeline's. The owner then runs the subgraph on
one sample (:meth:`Subgraph.run_sample`, the CPU stage) or on a group of samples
(:meth:`Subgraph.run_batch`, the GPU stage), each operator as the stages run it in a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .errors import PipelineDefinitionError
from .graph import DataNode, Graph, OpNode, _check_order, _reachable, defining
from .keyed_random import SampleContext

#: The operator of a subgraph's inputs (:mod:`raypipe.operators.subgraph_input`).
INPUT_OP = "_subgraph_input"


class Subgraph:
    """``function(*placeholders, **kwargs)`` traced: ``inputs`` are the devices of its placeholder
    inputs (``"cpu"`` or ``"gpu"``), ``first_id`` the operator id of its first operator (ids key
    the operators' random streams: give each subgraph ids no other operator has)."""

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        inputs: Sequence[str],
        kwargs: dict[str, Any],
        first_id: int,
    ):
        self.name = name
        graph = Graph(first_id=first_id)
        with defining(graph):
            self.placeholders = [graph.add(INPUT_OP, [], {"slot": i}, device=d)[0] for i, d in enumerate(inputs)]
            out = function(*self.placeholders, **kwargs)
        if not isinstance(out, DataNode) or (out.producer not in graph.nodes):
            raise PipelineDefinitionError(
                f"{name} must return one output of the operators it calls on its input, got {out!r}"
            )
        self.output = out
        needed = _reachable([out.producer])
        self.nodes: list[OpNode] = [n for n in graph.nodes if n in needed and n.op.schema.name != INPUT_OP]
        for node in self.nodes:
            _check_node(name, node)

    @property
    def device(self) -> str:
        """Where the output is: ``"gpu"`` when any of its operators runs there."""
        return self.output.device

    def preload(self) -> None:
        """Its operators' :meth:`~raypipe.operator.Operator.preload`."""
        for node in self.nodes:
            node.op.preload()

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The output's layout given the placeholders' layouts; every operator checks its input's
        layout here, as the pipeline's do when it is built."""
        layouts = dict(zip(self.placeholders, input_layouts))
        for node in self.nodes:
            layout = node.op.output_layout([layouts.get(d, "") for d in node.inputs])
            per_output = getattr(node.op, "output_layouts", None)
            for d, each in zip(node.outputs, per_output() if per_output else [layout] * len(node.outputs)):
                layouts[d] = each
        return layouts.get(self.output, "")

    def run_sample(self, values: Sequence[Any], ctx: SampleContext) -> Any:
        """The output for one sample, given a value for each placeholder."""
        env: dict[DataNode, Any] = dict(zip(self.placeholders, values))
        for node in self.nodes:
            out = node.op.run_sample(
                [env[d] for d in node.inputs], {k: env[d] for k, d in node.arg_inputs.items()}, ctx
            )
            _store(env, node, out)
        return env[self.output]

    def run_batch(self, xp: ModuleType, values: Sequence[list[Any]], ctxs: Sequence[SampleContext]) -> list[Any]:
        """The outputs for a group of samples (the GPU stage): a list of per-sample values for each
        placeholder in, a list of per-sample outputs out. Host operators run with numpy, the others
        with ``xp``; host values a device operator takes as inputs are moved to the device (those of
        placeholders on the GPU first)."""
        env: dict[DataNode, Any] = {
            d: _on(xp, v, d.device == "cpu" or any(x is None for x in v)) for d, v in zip(self.placeholders, values)
        }
        for node in self.nodes:
            on_host = node.device == "cpu"
            inputs = [_on(xp, env[d], on_host or d.device == "gpu") for d in node.inputs]
            args = {k: env[d] for k, d in node.arg_inputs.items()}
            out = node.op.run_batch(np if on_host else xp, inputs, args, ctxs)
            _store(env, node, out)
        return list(env[self.output])


def _on(xp: ModuleType, samples: list[Any], as_is: bool) -> list[Any]:
    """``samples`` where an operator takes them: as they are, or host samples moved to ``xp``'s device."""
    if as_is or xp is np:
        return samples
    return [xp.asarray(s) for s in samples]


def _store(env: dict[DataNode, Any], node: OpNode, out: Any) -> None:
    if len(node.outputs) == 1:
        env[node.outputs[0]] = out
    else:
        for d, value in zip(node.outputs, out):
            env[d] = value


def _check_node(name: str, node: OpNode) -> None:
    """Refuse what cannot run on chosen samples one at a time: readers, sources, mixed operators
    and operators that need the whole batch."""
    op = node.op
    schema = op.schema
    if schema.is_reader or schema.name == "external_source":
        raise PipelineDefinitionError(
            f"{name}: {node.label} makes data of its own; a subgraph only transforms its input"
        )
    if node.device == "mixed":
        raise PipelineDefinitionError(
            f"{name}: {node.label} runs on device 'mixed'; a subgraph runs operators on 'cpu' or 'gpu'"
        )
    if getattr(op, "batch_semantics", False) or (node.device == "cpu" and op.host_batch_step(set(node.arg_inputs))):
        raise PipelineDefinitionError(
            f"{name}: {node.label} needs the whole batch; a subgraph runs on the samples chosen for it"
        )
    _check_order(node)
