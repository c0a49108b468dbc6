"""Feeding a pipeline's external sources in one process, as DALI does.

Before each batch the caller's ``run()`` asks every external source with a ``source`` for its next
batch (per sample for ``batch=False``, from worker processes for ``parallel=True``), then calls the
pipeline's ``iter_setup()`` and takes what ``feed_input`` gave the others: the caller's thread, in
DALI's order, up to the pipeline's prefetch depth ahead. A StopIteration from any of them ends the
epoch: the batches fed before it are still returned, then ``run()`` raises StopIteration until
``reset()`` starts the next epoch (``SampleInfo.epoch_idx`` and ``BatchInfo.epoch_idx`` count them).

The executor's dispatch thread takes the fed batches in order (:meth:`SourceFeeder.specs`): it
hands each operator its samples and runs the batch as samples ``idx_in_epoch`` of the epoch. Beside
a reader (DALI runs both), the reader's batches run, and each takes the next fed batch as it enters
the CPU stage (:meth:`_PairedSpecs.admit`): the reader decides the samples and where its epochs end,
the sources give one batch per batch run, and a source's StopIteration ends ``run()`` as in DALI.
It holds the pipeline only weakly and polls, so a stopped executor, a closed or dropped pipeline, or
a new start of feeding never leaves it waiting.
"""

from __future__ import annotations

import collections
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .batch_spec import BatchSpec
from .errors import ArgumentError, PipelineDefinitionError
from .graph import DataNode, OpNode, StagedGraph
from .operators.external_source import ExternalSource
from .sample_info import SampleInfo
from .source_workers import SourceWorkerPool
from .tensor_list import TensorList

_POLL = 0.05
_END = object()

Outputs = list[list[np.ndarray]]


@dataclass
class FedBatch:
    """One batch of every external source: its place in the epoch and each source's outputs."""

    epoch: int
    iteration: int
    first: int
    size: int
    outputs: dict[OpNode, Outputs]


class SourceFeeder:
    """The external sources of one staged graph and the batches fed to them so far."""

    def __init__(
        self,
        nodes: list[OpNode],
        batch_size: int,
        py_num_workers: int,
        py_start_method: str,
        reader: str | None = None,
        relayout: Callable[[dict[DataNode, str]], None] | None = None,
    ):
        self.nodes = nodes
        self._relayout = relayout  # gives sources without a layout of their own that of the batches they return
        self.batch_size = batch_size
        self.reader = reader  # the label of the reader whose batches the sources go beside; None without one
        # sources with a callback, the parallel ones first (DALI's order of calls)
        self.pulled = sorted((n for n in nodes if n.op.callback is not None), key=lambda n: not n.op.parallel)
        self.pushed = [n for n in nodes if n.op.callback is None]
        self._parallel = [n.op for n in self.pulled if n.op.parallel]
        self._workers = (py_num_workers, py_start_method)
        self.pool: SourceWorkerPool | None = None  # started when feeding starts (a served pipeline feeds none)
        self._live: _FedSpecs | None = None
        self._pending: dict[OpNode, collections.deque[_Fed]] = {n: collections.deque() for n in self.pushed}
        self._last: dict[OpNode, Outputs] = {}
        self._generation = 0
        self._start(0)

    def start_workers(self) -> None:
        """Start the worker processes of the parallel sources, if there are any and none run."""
        if self._parallel and self.pool is None:
            self.pool = SourceWorkerPool(self._parallel, self.batch_size, *self._workers)

    def _start(self, epoch: int) -> None:
        self.epoch = epoch
        self.ended = False
        self._iteration = self._first = self._ahead = 0
        self._stash: dict[OpNode, Outputs] | None = None
        self._queue: queue.Queue = queue.Queue()
        for node in self.nodes:
            node.op.drop()
        if self.pool is not None:
            self.pool.restart(epoch)

    def node(self, data_node: DataNode | str, caller: str = "feed_input") -> OpNode:
        """The external source fed by ``feed_input(data_node)``: its output, its ``name``, or (unnamed)
        its label; ``caller`` names the method in the error when there is none."""
        for node in self.nodes:
            if data_node is node.outputs[0] or (isinstance(data_node, str) and data_node in (node.name, node.label)):
                return node
        raise ArgumentError(f"{caller}: the pipeline has no external source {data_node!r}")

    def feed_input(self, data_node: DataNode | str, data: Any) -> None:
        """Queue a batch for an external source without a ``source`` (DALI's ``feed_input``)."""
        node = self.node(data_node)
        if node.op.callback is not None:
            raise ArgumentError(f"feed_input: external source {node.label} has a source; it cannot also be fed")
        self._pending[node].append(_Fed(node.op.fed_batches(data)))

    def specs(self, epoch: int, owner: Any, reader_specs: Iterator[BatchSpec] | None = None) -> Iterator[BatchSpec]:
        """Start feeding the sources' ``epoch`` from its beginning; the batches as the dispatch thread
        runs them: the fed batches, or beside a reader ``reader_specs``, each paired with the next fed
        batch. Batches fed for an earlier start are dropped; ``owner`` (held weakly) going away ends them."""
        self._generation += 1
        self.start_workers()
        self._start(epoch)
        args = (self, self._generation, self._queue, weakref.ref(owner))
        self._live = _FedSpecs(*args) if reader_specs is None else _PairedSpecs(*args, reader_specs)
        return self._live

    @property
    def driving(self) -> bool:
        """True while the executor runs the fed batches (not batches someone drives by index, as the
        service's pipeline actor does)."""
        return self._live is not None and not self._live.stopped

    def stop(self) -> None:
        """End the batches the dispatch thread waits for, and stop the worker processes."""
        self._generation += 1
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def fill(self, depth: int, iter_setup: Callable[[], None]) -> None:
        """Feed batches until ``depth`` wait to be run or the epoch ends (the caller's thread); nothing
        while the executor runs batches it was not fed."""
        while self.driving and not self.ended and self._ahead < depth:
            batch = self._next_batch(iter_setup)
            if batch is None:
                return
            self._queue.put(batch)
            self._ahead += 1

    def consumed(self) -> None:
        """A fed batch was returned by ``run()``."""
        self._ahead = max(0, self._ahead - 1)

    def _next_batch(self, iter_setup: Callable[[], None]) -> FedBatch | None:
        """The sources' next batch; None when the epoch ended or fed data is still missing."""
        outputs = self._stash
        if outputs is None:
            outputs, ended = {}, False
            for node in self.pulled:  # every source is asked, even after one ended (as DALI does)
                try:
                    outputs[node] = self._pull(node)
                except StopIteration:
                    ended = True
            try:
                if not ended:
                    iter_setup()
            except StopIteration:
                ended = True
            if ended:
                self._end()
                return None
        missing = [n for n in self.pushed if not self._ready(n) and n not in self._last]
        if missing:
            if self._ahead == 0:
                names = ", ".join(n.label for n in missing)
                raise PipelineDefinitionError(
                    f"no data was fed to external source {names}: call pipe.feed_input(name, data) before run(), "
                    "or in the pipeline's iter_setup()"
                )
            self._stash = outputs
            return None
        self._stash = None
        for node in self.pushed:
            if self._ready(node):
                self._last[node] = self._pending[node][0].take()
                if not node.op.repeat_last:
                    outputs[node] = self._last.pop(node)
                    continue
            outputs[node] = self._last[node]
        sizes = {len(o[0]) for o in outputs.values()}
        if len(sizes) > 1:
            raise ArgumentError(f"external sources gave batches of different sizes {sorted(sizes)} for one iteration")
        size = sizes.pop() if sizes else self.batch_size
        if self.reader is not None and size != self.batch_size:
            raise ArgumentError(
                f"an external source gave a batch of {size} samples beside reader {self.reader}, whose batches "
                f"have {self.batch_size}: beside a reader every source batch has the batch size"
            )
        if size > self.batch_size:
            raise ArgumentError(
                f"an external source gave a batch of {size} samples; the batch size is {self.batch_size}"
            )
        batch = FedBatch(self.epoch, self._iteration, self._first, size, outputs)
        self._iteration += 1
        self._first += size
        return batch

    def _ready(self, node: OpNode) -> bool:
        """Whether fed data has a batch for ``node`` (fed data that has given all its batches is dropped)."""
        pending = self._pending[node]
        while pending and not pending[0].ready():
            pending.popleft()
        return bool(pending)

    def _pull(self, node: OpNode) -> Outputs:
        op: ExternalSource = node.op
        if op.parallel:
            return op.checked(self.pool.receive(op, self._iteration, self._first))
        callback = op.callback
        if callback.batch:
            data = callback.next_batch(self._iteration, self.epoch)
            self._take_layouts(node, data)
            return op.batch_outputs(data)
        infos = [SampleInfo(self._first + i, i, self._iteration, self.epoch) for i in range(self.batch_size)]
        return op.sample_outputs([callback.sample(info) for info in infos])

    def _take_layouts(self, node: OpNode, data: Any) -> None:
        """A returned ``TensorList``'s layout becomes its output's where the source gave none, as in DALI."""
        if self._relayout is None:
            return
        batches = [data] if len(node.outputs) == 1 or not isinstance(data, (tuple, list)) else list(data)
        given = {
            out: batch.layout()
            for out, batch, own in zip(node.outputs, batches, node.op.layouts)
            if isinstance(batch, TensorList) and batch.layout() and not own
        }
        if given:
            self._relayout(given)

    def _end(self) -> None:
        self.ended = True
        self._queue.put(_END)


class _Fed:
    """What one ``feed_input`` gave a source: the batches it makes, taken one at a time (one batch for
    an external source; for ``experimental.inputs.video`` a video's sequences, decoded as asked for)."""

    def __init__(self, batches: Iterator[Outputs]):
        self._batches = batches
        self._next: Outputs | None = None

    def ready(self) -> bool:
        """Whether a batch is left (making it now)."""
        if self._next is None:
            self._next = next(self._batches, None)
        return self._next is not None

    def take(self) -> Outputs:
        """The next batch (after :meth:`ready` said there is one)."""
        batch, self._next = self._next, None
        return batch


class _FedSpecs(Iterator[BatchSpec]):
    """The fed batches of one start of feeding, for the dispatch thread."""

    def __init__(self, feeder: SourceFeeder, generation: int, fed: queue.Queue, owner: weakref.ref):
        self._feeder = weakref.ref(feeder)
        self._generation = generation
        self._fed = fed
        self._owner = owner
        self._stopped = threading.Event()

    @property
    def stopped(self) -> bool:
        """True once the executor that ran these batches stopped."""
        return self._stopped.is_set()

    def watch_stop(self, stopped: threading.Event) -> None:
        """End when ``stopped`` is set (the executor running these batches stops)."""
        self._stopped = stopped

    def _next_fed(self) -> FedBatch | None:
        """The next fed batch, waiting for it; None when the sources ended, the executor stopped,
        the owner went away or feeding started again."""
        while True:
            feeder = self._feeder()
            if self._stopped.is_set() or self._owner() is None or feeder is None:
                return None
            if feeder._generation != self._generation:
                return None
            del feeder
            try:
                item = self._fed.get(timeout=_POLL)
            except queue.Empty:
                continue
            return None if item is _END else item

    def __next__(self) -> BatchSpec:
        item = self._next_fed()
        if item is None:
            raise StopIteration
        for node, outputs in item.outputs.items():
            node.op.hold(item.epoch, item.iteration, outputs)
        return BatchSpec(item.epoch, item.iteration, np.arange(item.first, item.first + item.size))


class _PairedSpecs(_FedSpecs):
    """A reader's batches, each given the sources' next fed batch as it enters the CPU stage."""

    def __init__(
        self, feeder: SourceFeeder, generation: int, fed: queue.Queue, owner: weakref.ref, reader_specs: Iterator
    ):
        super().__init__(feeder, generation, fed, owner)
        self._reader_specs = reader_specs

    def __next__(self) -> BatchSpec:
        return next(self._reader_specs)

    def admit(self, spec: BatchSpec) -> bool:
        """Hand the next fed batch to the sources as ``spec``'s; False when there is none (the sources
        ended, or the batches stopped): then ``spec`` and the batches after it do not run."""
        item = self._next_fed()
        if item is None:
            return False
        if item.size != len(spec.sample_indices):
            raise ArgumentError(
                f"an external source gave {item.size} samples for batch {spec.index} of epoch {spec.epoch}, "
                f"which has {len(spec.sample_indices)}"
            )
        for node, outputs in item.outputs.items():
            node.op.hold(spec.epoch, spec.index, outputs)
        return True


def feeder_for(staged: StagedGraph, batch_size: int, py_num_workers: int, py_start_method: str) -> SourceFeeder | None:
    """The feeder of ``staged``'s external sources; None without any. Beside a reader, its batches
    run and the sources give one batch for each."""
    nodes = [n for n in (*staged.host_nodes, *staged.gpu_nodes) if isinstance(n.op, ExternalSource)]
    if not nodes:
        return None
    reader = staged.reader.label if staged.reader is not None else None
    return SourceFeeder(nodes, batch_size, py_num_workers, py_start_method, reader, staged.relayout)
