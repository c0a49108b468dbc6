"""The CPU stage of a staged graph: every sample through the host subgraph.

The executor runs it on its thread pool, a chunk of samples per task; a CPU helper
(``actors/cpu_helper.py``) runs the same stage, built from the same pipeline with the same
split, for samples another process owns. Its results are plain data (:meth:`CpuStage.pack`),
so they cross process boundaries, and keyed randomness makes a sample's result the same
wherever it is computed.

A chunk runs sample by sample (each sample through every operator, while its data is in the
caches), except where decoding is deferred to the GPU: that stage only reads, parses headers
and draws windows, microseconds a sample, so it runs node by node, and an operator with a
``run_chunk(inputs, args, ctxs)`` method (per-sample results, as ``run_sample`` gives them
one at a time) takes the whole chunk in one call. Each operator call carries what staging decided
for that operator (:meth:`~raypipe.graph.StagedGraph.op_kwargs`: a decoder's plan), so the stage
runs its own staging's way whatever other stagings of the same graph decided.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .batch_buffers import BatchOutputs
from .errors import DecodeError, SampleError
from .graph import DataNode, OpNode, StagedGraph
from .keyed_random import SampleContext
from .operator import Skip
from .profile import COUNTED, SAMPLE, Profile


@dataclass(frozen=True)
class SkippedSample:
    """A sample dropped by an operator with ``on_error="skip"``."""

    epoch: int
    sample_index: int
    source: str
    reason: str


class CpuStage:
    """Runs samples through ``graph.host_nodes``; results are ``{DataNode: value}`` per sample."""

    def __init__(self, graph: StagedGraph, seed: int, source_of: Callable[[int], str] | None = None):
        self.graph = graph
        self.seed = seed
        self.source_of = source_of or numbered_sample
        self.in_place = {
            node: node.outputs[0]
            for node in graph.host_nodes
            if len(node.outputs) == 1
            and node.outputs[0] in graph.outputs
            and node.outputs[0] not in graph.to_device
            and hasattr(node.op, "run_sample_into")
        }
        self.by_node = bool(graph.deferred)
        self._kwargs = {node: graph.op_kwargs(node) for node in graph.host_nodes}
        self.profile: Profile | None = None  # set to collect time per operator
        self._labels = [node.label for node in graph.host_nodes]
        self._labels_and_sample = [*self._labels, SAMPLE]

    def run_chunk(
        self,
        ctxs: Sequence[SampleContext],
        first: int,
        outputs: BatchOutputs | None,
        stop: threading.Event | None = None,
    ) -> list:
        """:meth:`run_sample` for consecutive samples from batch position ``first``; raises the
        first sample error. A set ``stop`` leaves the rest of the chunk undone."""
        if self.by_node:
            return self._run_by_node(ctxs, first, outputs, stop)
        results = []
        for offset, ctx in enumerate(ctxs):
            if stop is not None and stop.is_set():
                break
            results.append(self.run_sample(ctx, first + offset, outputs))
        return results

    def run_sample(
        self, ctx: SampleContext, position: int, outputs: BatchOutputs | None
    ) -> dict[DataNode, Any] | SkippedSample:
        """One sample through the host subgraph. The last operator of a host output writes into
        the sample's row of the batch array (``outputs``) where it can."""
        env: dict[DataNode, Any] = {}
        profile = self.profile
        turn = profile.timing_turn() if profile is not None else COUNTED
        timed = turn != COUNTED
        began = time.perf_counter() if timed else 0.0
        for done, node in enumerate(self.graph.host_nodes):
            inputs = [env[d] for d in node.inputs]
            args = {k: env[d] for k, d in node.arg_inputs.items()}
            kwargs = self._kwargs[node]
            called = time.perf_counter() if timed else 0.0
            try:
                if outputs is not None and node in self.in_place:
                    allocate = outputs.allocator(self.in_place[node], position)
                    out = node.op.run_sample_into(inputs, args, ctx, allocate, **kwargs)
                else:
                    out = node.op.run_sample(inputs, args, ctx, **kwargs)
                if timed:
                    profile.add("cpu", node.label, time.perf_counter() - called, turn)
            except Exception as exc:
                if profile is not None and not timed:
                    profile.count("cpu", self._labels[:done])
                raise self.sample_error(node.label, ctx, exc) from exc
            if isinstance(out, Skip):
                if profile is not None and not timed:
                    profile.count("cpu", self._labels[: done + 1])
                return SkippedSample(ctx.epoch, ctx.sample_index, self.source_of(ctx.sample_index), out.reason)
            if len(node.outputs) == 1:
                env[node.outputs[0]] = out
            else:
                for d, value in zip(node.outputs, out):
                    env[d] = value
        if timed:
            profile.add("cpu", SAMPLE, time.perf_counter() - began, turn)
        elif profile is not None:
            profile.count("cpu", self._labels_and_sample)
        return {d: env[d] for d in self.graph.host_results}

    def _run_by_node(
        self,
        ctxs: Sequence[SampleContext],
        first: int,
        outputs: BatchOutputs | None,
        stop: threading.Event | None,
    ) -> list:
        """:meth:`run_chunk` node by node: each operator runs over the chunk's samples before the
        next one starts; a skipped sample leaves the chunk for the operators after."""
        profile = self.profile
        turn = profile.timing_turn() if profile is not None else COUNTED
        timed = turn != COUNTED
        began = time.perf_counter() if timed else 0.0
        live = list(ctxs)
        positions = list(range(len(ctxs)))
        columns: dict[DataNode, list] = {}
        results: list = [None] * len(ctxs)
        for node in self.graph.host_nodes:
            if stop is not None and stop.is_set():
                return []
            if not live:
                return results  # every sample skipped
            called = time.perf_counter() if timed else 0.0
            outs = self._run_node(node, live, positions, columns, first, outputs)
            if timed:
                profile.add("cpu", node.label, time.perf_counter() - called, turn, len(live))
            elif profile is not None:
                profile.count("cpu", [node.label], len(live))
            if Skip in map(type, outs):
                outs, live, positions = self._drop_skipped(outs, live, positions, columns, results)
            if len(node.outputs) == 1:
                columns[node.outputs[0]] = outs
            else:
                columns.update(zip(node.outputs, map(list, zip(*outs))))
        if not live:
            return results
        if timed:
            profile.add("cpu", SAMPLE, time.perf_counter() - began, turn, len(live))
        elif profile is not None:
            profile.count("cpu", [SAMPLE], len(live))
        order = self.graph.host_results
        for position, values in zip(positions, zip(*(columns[d] for d in order))):
            results[position] = dict(zip(order, values))
        return results

    def _run_node(
        self,
        node: OpNode,
        live: list[SampleContext],
        positions: list[int],
        columns: dict[DataNode, list],
        first: int,
        outputs: BatchOutputs | None,
    ) -> list:
        """``node``'s results for the ``live`` samples: in one ``run_chunk`` call where the operator
        has one, else (and, to find which sample failed and how, when that call raises) per sample."""
        inputs = [columns[d] for d in node.inputs]
        args = {k: columns[d] for k, d in node.arg_inputs.items()}
        kwargs = self._kwargs[node]
        run_chunk = getattr(node.op, "run_chunk", None)
        if run_chunk is not None and node not in self.in_place:
            try:
                return run_chunk(inputs, args, live, **kwargs)
            except Exception:
                pass  # the samples run again, one by one, below
        results = []
        for k, ctx in enumerate(live):
            sample_inputs = [column[k] for column in inputs]
            sample_args = {name: column[k] for name, column in args.items()}
            try:
                if outputs is not None and node in self.in_place:
                    allocate = outputs.allocator(self.in_place[node], first + positions[k])
                    results.append(node.op.run_sample_into(sample_inputs, sample_args, ctx, allocate, **kwargs))
                else:
                    results.append(node.op.run_sample(sample_inputs, sample_args, ctx, **kwargs))
            except Exception as exc:
                raise self.sample_error(node.label, ctx, exc) from exc
        return results

    def _drop_skipped(
        self, outs: list, live: list, positions: list[int], columns: dict[DataNode, list], results: list
    ) -> tuple[list, list, list[int]]:
        """Record the samples ``outs`` skipped in ``results`` and take them out of the chunk."""
        keep = [k for k, out in enumerate(outs) if not isinstance(out, Skip)]
        for k, out in enumerate(outs):
            if isinstance(out, Skip):
                ctx = live[k]
                results[positions[k]] = SkippedSample(
                    ctx.epoch, ctx.sample_index, self.source_of(ctx.sample_index), out.reason
                )
        for d, column in columns.items():
            columns[d] = [column[k] for k in keep]
        return [outs[k] for k in keep], [live[k] for k in keep], [positions[k] for k in keep]

    def sample_error(self, label: str, ctx: SampleContext, exc: Exception) -> SampleError:
        """The error naming operator ``label``, the sample and its source."""
        source = self.source_of(ctx.sample_index)
        cls = DecodeError if isinstance(exc, DecodeError) else SampleError
        return cls(
            f"operator {label} failed on sample {ctx.sample_index} ({source}), epoch {ctx.epoch}: {exc}",
            sample_index=ctx.sample_index,
            source=source,
        )

    def pack(self, results: list) -> list:
        """Results as plain data for another process: each sample a list of values in
        ``graph.host_results`` order, or a :class:`SkippedSample`."""
        order = self.graph.host_results
        return [r if isinstance(r, SkippedSample) else [r[d] for d in order] for r in results]

    def unpack(self, packed: list) -> list:
        """The inverse of :meth:`pack` on the side that owns the graph."""
        order = self.graph.host_results
        return [p if isinstance(p, SkippedSample) else dict(zip(order, p)) for p in packed]

    def run_packed(self, epoch: int, indices: Sequence[int]) -> list:
        """Samples ``indices`` of ``epoch`` as plain data (what a CPU helper ships)."""
        ctxs = [SampleContext(self.seed, epoch, int(i)) for i in indices]
        return self.pack(self.run_chunk(ctxs, 0, None))


def numbered_sample(index: int) -> str:
    """The source of a sample when there is no reader to name it."""
    return f"sample {index}"
