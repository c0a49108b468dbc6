"""``Pipeline`` and ``pipeline_def``: define a graph, build it, run it batch by batch."""

from __future__ import annotations

import functools
import inspect
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .backend import DeviceContext
from .batch_spec import BatchSpec
from .errors import ArgumentError, PipelineDefinitionError
from .executor import BatchResult, Executor, SkippedSample
from .graph import Graph, OpNode, defining, stage
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
    :func:`pipeline_def`. ``device_id=None`` keeps everything on the host; GPU
    operators then run with numpy.
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
        graph = Graph()
        with defining(graph):
            outputs = self.define_graph()
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        staged = stage(graph, outputs)
        if staged.reader is not None:
            staged.reader.op.prepare()
        self._staged = staged
        self._executor = Executor(
            staged,
            seed=self.seed,
            num_threads=self.num_threads,
            cpu_size=self.cpu_queue_depth,
            gpu_size=self.gpu_queue_depth,
            device=DeviceContext(self.device_id),
            source_of=self._source_of,
        )

    def run(self) -> tuple[TensorList, ...]:
        """The next batch: one :class:`TensorList` per output."""
        self.build()
        if not self._executor.running:
            self._executor.start(self._self_driven(self._epoch))
        result = self._executor.next()
        self._last = result
        self._skipped.extend(result.skipped)
        return result.outputs

    def drive(self, specs: Iterable[BatchSpec]) -> None:
        """Replace the reader's own order with explicit batches; ``run()`` returns them in order
        and raises StopIteration after the last. Used by the distributed service."""
        self.build()
        self._executor.start(iter(specs))

    def reset(self, epoch: int | None = None) -> None:
        """Drop prefetched batches and restart at the beginning of ``epoch`` (default: the
        epoch after the last completed one, or the current one if none was returned)."""
        self.build()
        if epoch is None:
            last = self._last
            epoch = self._epoch if last is None else last.spec.epoch + 1
        self._epoch = epoch
        self._last = None
        self._executor.start(self._self_driven(epoch))

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

    def close(self) -> None:
        """Stop the executor's threads."""
        if self._executor is not None:
            self._executor.stop()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _reader(self, name: str | None) -> OpNode:
        self.build()
        reader = self._staged.reader
        if reader is None:
            raise PipelineDefinitionError("this pipeline has no reader")
        if name is not None and reader.name != name:
            raise ArgumentError(f"no reader named {name!r} (the pipeline's reader is {reader.label})")
        return reader

    def _source_of(self, index: int) -> str:
        reader = self._staged.reader
        return reader.op.source_of(index) if reader is not None else f"sample {index}"

    def _self_driven(self, first_epoch: int) -> Iterator[BatchSpec]:
        reader = self._staged.reader
        if reader is None:
            return _unbounded(self.batch_size)
        return itertools.chain.from_iterable(
            reader.op.epoch_batches(self.batch_size, epoch, self.seed) for epoch in itertools.count(first_epoch)
        )


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
