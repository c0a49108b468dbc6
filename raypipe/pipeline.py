"""``Pipeline`` and ``pipeline_def``: define a graph, build it, run it batch by batch."""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .backend import DeviceContext
from .batch_spec import BatchSpec
from .cpu_stage import CpuStage
from .errors import ArgumentError, PipelineDefinitionError
from .executor import BatchResult, Executor, SkippedSample
from .gpu_decode import nvimgcodec_available
from .graph import Graph, OpNode, StagedGraph, defining, stage
from .operator import Operator
from .position import make_state, read_state
from .profile import Profile
from .tensor_list import TensorList

PIPELINE_ARGS = ("batch_size", "num_threads", "device_id", "seed", "prefetch_queue_depth")


@dataclass(frozen=True)
class BatchInfo:
    """Where the last batch returned by ``run()`` came from."""

    epoch: int
    index: int
    sample_indices: list[int]
    is_pad: list[bool]
    last_in_epoch: bool
    skipped: list[SkippedSample]

    @property
    def num_pad(self) -> int:
        """Entries that only top the batch up."""
        return sum(self.is_pad)


class Pipeline:
    """A graph of operators run by the staged executor.

    Subclass it and implement :meth:`define_graph` (DALI class style), or use
    :func:`pipeline_def`. ``device_id=None`` keeps everything on the host, and so does a
    ``device_id`` where no GPU is usable (with a :class:`~raypipe.backend.GpuUnavailableWarning`):
    mixed and gpu operators then run per sample through their host implementations, with the same
    results as ``device="cpu"``. On a GPU, ``RAYPIPE_GPU_MEMORY_MB`` bounds the pipeline's device
    memory pool (see :meth:`memory_stats`).

    The executor's threads never reference the pipeline, so a dropped pipeline is
    freed at once and a finalizer stops its threads (or call :meth:`close`, or use
    it as a context manager).
    """

    def __init__(
        self,
        batch_size: int = 1,
        num_threads: int = 1,
        device_id: int | None = None,
        seed: int | None = None,
        prefetch_queue_depth: int | dict[str, int] = 2,
    ):
        self.batch_size = _positive_int("batch_size", batch_size)
        self.num_threads = _positive_int("num_threads", num_threads)
        if device_id is not None and (not isinstance(device_id, int) or device_id < 0):
            raise ArgumentError(f"device_id must be None or a non-negative int, got {device_id!r}")
        self.device_id = device_id
        if seed is None or seed == -1:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
        if not isinstance(seed, int) or seed < 0:
            raise ArgumentError(f"seed must be a non-negative int, got {seed!r}")
        self.seed = seed
        self.cpu_queue_depth, self.gpu_queue_depth = _queue_depths(prefetch_queue_depth)
        self._staged = None
        self._executor: Executor | None = None
        self._epoch = 0
        self._first_batch = 0  # where the self-driven order starts in ``_epoch``
        self._last: BatchResult | None = None
        self._skipped: list[SkippedSample] = []

    def define_graph(self) -> Any:
        """Wire operators and return the pipeline's outputs (override in a subclass)."""
        raise PipelineDefinitionError(f"{type(self).__name__} must implement define_graph()")

    def build(self) -> None:
        """Define, check and stage the graph and open the reader; prefetching starts with
        the first ``run()`` (or ``drive()``)."""
        if self._staged is not None:
            return
        device = DeviceContext(self.device_id)
        self._split = {"on_gpu": device.on_gpu, "decode_on_gpu": device.on_gpu and nvimgcodec_available()}
        staged = self._define(**self._split)
        reader = staged.reader.op if staged.reader is not None else None
        self._staged = staged
        self._executor = Executor(
            staged,
            seed=self.seed,
            num_threads=self.num_threads,
            cpu_size=self.cpu_queue_depth,
            gpu_size=self.gpu_queue_depth,
            device=device,
            source_of=reader.source_of if reader is not None else None,
        )
        weakref.finalize(self, self._executor.close)

    def _define(self, on_gpu: bool, decode_on_gpu: bool) -> StagedGraph:
        """Define the graph, stage it with this split and open its reader."""
        graph = Graph()
        with defining(graph):
            outputs = self.define_graph()
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        staged = stage(graph, outputs, on_gpu=on_gpu, decode_on_gpu=decode_on_gpu)
        if staged.reader is not None:
            staged.reader.op.prepare()
        return staged

    def cpu_split(self) -> dict[str, bool]:
        """Where this pipeline's CPU stage ends (``on_gpu``: a GPU runs the gpu operators;
        ``decode_on_gpu``: mixed decoders decode there): a CPU helper builds the same stage."""
        self.build()
        return dict(self._split)

    def cpu_stage(self, split: dict[str, bool]) -> CpuStage:
        """This pipeline's CPU stage as another pipeline with ``split`` (:meth:`cpu_split`) has it:
        what a CPU helper runs for that pipeline's samples. Needs no device."""
        staged = self._define(**split)
        reader = staged.reader.op if staged.reader is not None else None
        return CpuStage(staged, self.seed, reader.source_of if reader is not None else None)

    def set_cpu_helpers(self, workers: dict[str, Any], unit_timeout_s: float = 60.0) -> None:
        """Share the CPU stage with remote workers (``{name: (epoch, indices) -> Future}``, see
        :mod:`raypipe.offload`); ``{}`` keeps it local. A unit a worker has not returned after
        ``unit_timeout_s`` goes to another."""
        self.build()
        self._executor.set_remote_workers(workers, unit_timeout_s)

    def offload_stats(self) -> dict[str, Any]:
        """Units of samples run locally and by each CPU helper, reassignments, bytes received."""
        self.build()
        return self._executor.offload_stats()

    def run(self) -> tuple[TensorList, ...]:
        """The next batch: one :class:`TensorList` per output."""
        self.build()
        if not self._executor.running:
            self._set_sequential(True)  # a reader's own order reads its shard in order
            self._executor.start(self._self_driven(self._epoch, self._first_batch))
        result = self._executor.next()
        self._last = result
        self._skipped.extend(result.skipped)
        return result.outputs

    def drive(self, specs: Iterable[BatchSpec], sequential: bool = False) -> None:
        """Replace the reader's own order with explicit batches; ``run()`` returns them in order
        and raises StopIteration after the last. Used by the distributed service. ``sequential``
        says the batches read the data mostly in order (a buffer shuffle, or none): container
        readers then read whole extents ahead instead of one record at a time."""
        self.build()
        self._set_sequential(sequential)
        self._executor.start(iter(specs))

    def _set_sequential(self, sequential: bool) -> None:
        if self._staged.reader is not None:
            self._staged.reader.op.sequential = sequential

    def reset(self, epoch: int | None = None) -> None:
        """Drop prefetched batches and restart at the beginning of ``epoch`` (default: the
        epoch after the last completed one, or the current one if none was returned)."""
        self.build()
        if epoch is None:
            last = self._last
            epoch = self._epoch if last is None else last.spec.epoch + 1
        self._seek(epoch, 0)

    def _seek(self, epoch: int, batch: int) -> None:
        self._epoch, self._first_batch = epoch, batch
        self._last = None
        self._executor.start(self._self_driven(epoch, batch))

    def state_dict(self) -> dict[str, Any]:
        """The position of the batch the next ``run()`` returns in the reader's own order (the
        position contract of :mod:`raypipe.position`; offset = samples of this shard's epoch
        already returned)."""
        last = self._last
        if last is None:
            epoch, batch = self._epoch, self._first_batch
        elif last.spec.last_in_epoch:
            epoch, batch = last.spec.epoch + 1, 0
        else:
            epoch, batch = last.spec.epoch, last.spec.index + 1
        return make_state(self._order_fields(), epoch, batch * self.batch_size)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue at ``state``'s position without reading the batches before it. A state from
        another dataset, seed, batch size or sharding is an error unless ``strict=False``."""
        epoch, offset = read_state(state, self._order_fields(), owner="pipeline", strict=strict)
        batch = offset // self.batch_size
        if batch >= self.batches_per_epoch():
            epoch, batch = epoch + 1, 0
        self._seek(epoch, batch)

    def _order_fields(self) -> dict[str, Any]:
        return {**self._reader(None).op.order_fields(), "seed": self.seed, "batch_size": self.batch_size}

    @property
    def epoch(self) -> int:
        """The epoch of the batch the next ``run()`` returns (the reader's own order)."""
        last = self._last
        if last is None:
            return self._epoch
        return last.spec.epoch + 1 if last.spec.last_in_epoch else last.spec.epoch

    @property
    def last_batch_info(self) -> BatchInfo | None:
        """Epoch, batch index, sample indices and padding of the last ``run()``."""
        r = self._last
        if r is None:
            return None
        return BatchInfo(r.spec.epoch, r.spec.index, r.sample_indices, r.is_pad, r.spec.last_in_epoch, r.skipped)

    @property
    def skipped_samples(self) -> list[SkippedSample]:
        """Every sample dropped so far by operators with ``on_error="skip"``."""
        return list(self._skipped)

    def epoch_size(self, name: str | None = None) -> int | dict[str, int]:
        """Samples in the reader named ``name`` (all shards); a dict by name without one."""
        reader = self._reader(name)
        if name is None:
            return {reader.name or reader.op.schema.name: len(reader.op)}
        return len(reader.op)

    def reader_meta(self, name: str | None = None) -> dict[str, Any]:
        """DALI-style reader metadata: epoch_size, shard_id, number_of_shards, padding, batches."""
        return self._reader(name).op.meta(self.batch_size)

    def batches_per_epoch(self, name: str | None = None) -> int:
        """Batches this pipeline's shard yields per epoch (equal for every shard)."""
        return self.reader_meta(name)["batches_per_epoch"]

    def dataset_digest(self, name: str | None = None) -> str:
        """A hash of the reader's sample list: identifies the dataset in position states."""
        return self._reader(name).op.digest()

    def read_stats(self, name: str | None = None) -> dict[str, int]:
        """How the reader has read so far: for container readers, ``direct_reads`` (one ``pread``
        per sample), ``extent_reads`` and ``extent_bytes`` (sequential reads ahead) and
        ``extent_hits``; empty for readers that keep no counts."""
        return self._reader(name).op.io_stats()

    def enable_profiling(self) -> None:
        """Collect wall time per stage and per operator from now on (see :mod:`raypipe.profile`)."""
        self.build()
        self._executor.profile = Profile()

    def profile(self) -> dict[str, Any]:
        """What :meth:`enable_profiling` collected: per (stage, operator) calls, total seconds and
        mean ms, and the executor's per-sample overhead in microseconds."""
        self.build()
        if self._executor.profile is None:
            raise ArgumentError("pipeline: call enable_profiling() before profile()")
        return self._executor.profile.report()

    def memory_stats(self) -> dict[str, Any]:
        """This pipeline's GPU memory as a plain dict: ``pool_used_mb`` (held by live arrays),
        ``pool_total_mb`` (reserved by its pool), ``limit_mb`` (the budget, None when unbounded),
        ``pinned_mb`` (host staging buffers) and ``device_id``; zeros on the host."""
        self.build()
        return self._executor.device.memory_stats()

    def queue_stats(self) -> dict[str, dict[str, int]]:
        """How full the executor's queues are now (see :meth:`raypipe.executor.Executor.queue_stats`)."""
        self.build()
        return self._executor.queue_stats()

    def reader_label(self, name: str | None = None) -> str | None:
        """How profiles and errors name the reader (``'Reader'`` or ``'readers.file'#0``); None without one."""
        self.build()
        return self._reader(name).label if self._staged.reader is not None else None

    def close(self) -> None:
        """Stop the executor's threads and release its cached device memory; idempotent, and
        ``run()`` starts them again."""
        if self._executor is not None:
            self._executor.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _reader(self, name: str | None) -> OpNode:
        self.build()
        reader = self._staged.reader
        if reader is None:
            raise PipelineDefinitionError("this pipeline has no reader")
        if name is not None and reader.name != name:
            raise ArgumentError(f"no reader named {name!r} (the pipeline's reader is {reader.label})")
        return reader

    def _self_driven(self, first_epoch: int, first_batch: int = 0) -> Iterator[BatchSpec]:
        reader = self._staged.reader
        op = reader.op if reader is not None else None
        return _reader_batches(op, self.batch_size, self.seed, first_epoch, first_batch)


def _reader_batches(
    reader: Operator | None, batch_size: int, seed: int, first_epoch: int, first_batch: int = 0
) -> Iterator[BatchSpec]:
    """The reader's own batches, epoch after epoch from ``first_epoch`` (numbered samples without a
    reader). A module function: the dispatch thread iterating it must not hold the pipeline."""
    if reader is None:
        yield from _unbounded(batch_size)
        return
    for epoch in itertools.count(first_epoch):
        yield from reader.epoch_batches(batch_size, epoch, seed)[first_batch if epoch == first_epoch else 0 :]


def _unbounded(batch_size: int) -> Iterator[BatchSpec]:
    import numpy as np

    for b in itertools.count():
        yield BatchSpec(0, b, np.arange(b * batch_size, (b + 1) * batch_size))


class _FunctionPipeline(Pipeline):
    def __init__(self, graph_fn: Callable, args: tuple, kwargs: dict, **pipeline_kwargs):
        super().__init__(**pipeline_kwargs)
        self._graph_fn = graph_fn
        self._args = args
        self._kwargs = kwargs

    def define_graph(self):
        return self._graph_fn(*self._args, **self._kwargs)


def pipeline_def(fn: Callable | None = None, **defaults: Any) -> Callable:
    """Decorator turning a graph-defining function into a pipeline factory.

    ``@pipeline_def(batch_size=64, num_threads=2, device_id=None, seed=7)``; any of
    those can be overridden when the factory is called, the rest of the call's
    arguments go to the function.
    """
    unknown = set(defaults) - set(PIPELINE_ARGS)
    if unknown:
        raise ArgumentError(f"pipeline_def: unknown pipeline arguments {sorted(unknown)}")

    def decorate(graph_fn: Callable) -> Callable:
        @functools.wraps(graph_fn)
        def create(*args: Any, **kwargs: Any) -> Pipeline:
            pipe_kwargs = dict(defaults)
            pipe_kwargs.update({k: kwargs.pop(k) for k in PIPELINE_ARGS if k in kwargs})
            try:
                inspect.signature(graph_fn).bind(*args, **kwargs)
            except TypeError as exc:
                raise ArgumentError(f"{graph_fn.__name__}: {exc}") from None
            return _FunctionPipeline(graph_fn, args, kwargs, **pipe_kwargs)

        create.pipeline_defaults = dict(defaults)
        return create

    return decorate(fn) if fn is not None else decorate


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def _queue_depths(depth: int | dict[str, int]) -> tuple[int, int]:
    if isinstance(depth, dict):
        extra = set(depth) - {"cpu_size", "gpu_size"}
        if extra or len(depth) != 2:
            raise ArgumentError(
                f"prefetch_queue_depth as a dict needs exactly 'cpu_size' and 'gpu_size', got {depth!r}"
            )
        return _positive_int("prefetch_queue_depth['cpu_size']", depth["cpu_size"]), _positive_int(
            "prefetch_queue_depth['gpu_size']", depth["gpu_size"]
        )
    d = _positive_int("prefetch_queue_depth", depth)
    return d, d
