"""The CPU stage of a staged graph: every sample through the host subgraph, alone.

The executor runs it on its thread pool; a CPU helper (``actors/cpu_helper.py``) runs the
same stage, built from the same pipeline with the same split, for samples another process
owns. Its results are plain data (:meth:`CpuStage.pack`), so they cross process boundaries,
and keyed randomness makes a sample's result the same wherever it is computed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .batch_buffers import BatchOutputs
from .errors import DecodeError, SampleError
from .graph import DataNode, StagedGraph
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
            called = time.perf_counter() if timed else 0.0
            try:
                if outputs is not None and node in self.in_place:
                    out = node.op.run_sample_into(inputs, args, ctx, outputs.allocator(self.in_place[node], position))
                else:
                    out = node.op.run_sample(inputs, args, ctx)
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
