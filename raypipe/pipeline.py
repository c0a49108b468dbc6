"""``Pipeline`` and ``pipeline_def``: define a graph, build it, run it batch by batch."""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import json
import os
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .backend import DeviceContext
from .batch_buffers import Allocator
from .batch_spec import BatchSpec
from .cpu_stage import CpuStage
from .device_report import device_report
from .errors import ArgumentError, PipelineDefinitionError
from .executor import BatchResult, Executor, SkippedSample
from .gpu_decode import nvimgcodec_available
from .graph import Graph, OpNode, StagedGraph, defining, stage
from .operator import Operator
from .position import make_state, read_state
from .profile import Profile
from .tensor_list import TensorList
from .types import CPU_ONLY_DEVICE_ID, DALIDataType

# arguments of DALI's ``pipeline_def`` (not of its Pipeline) for features raypipe does not have
DEFINITION_ARGS = ("enable_conditionals", "debug")


@dataclass(frozen=True)
class BatchInfo:
    """Where the last batch returned by ``run()`` came from: a sample index and a padding flag per
    row (a driven batch's skipped samples are replaced by kept ones, flagged as padding), and the
    samples ``on_error="skip"`` dropped from it."""

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

    The arguments are DALI's, in DALI's order. Those about how DALI's own executor runs take
    DALI's values and change no batch: ``exec_pipelined=False`` or ``exec_async=False`` (DALI's
    executors without prefetching) run with the least prefetching here (queue depth 1 per stage);
    ``exec_dynamic``, ``bytes_per_sample``, ``set_affinity``, ``enable_memory_stats``,
    ``max_streams`` and ``default_cuda_stream_priority`` (deprecated in DALI) are validated hints;
    ``py_num_workers`` and ``py_start_method`` configure DALI's workers for parallel external
    sources, which raypipe has none of. ``enable_checkpointing`` and ``checkpoint`` are DALI's
    checkpointing (:meth:`checkpoint`); ``output_dtype``, ``output_ndim`` and ``output_layout``
    declare what each output must be, checked on every batch. ``py_callback_pickler``,
    ``stream_policy`` and ``concurrency`` are accepted only at their default (None).
    """

    def __init__(
        self,
        batch_size: int = 1,
        num_threads: int = 1,
        device_id: int | None = None,
        seed: int | None = None,
        exec_pipelined: bool = True,
        prefetch_queue_depth: int | dict[str, int] = 2,
        exec_async: bool = True,
        bytes_per_sample: int = 0,
        set_affinity: bool = False,
        max_streams: int | None = None,
        default_cuda_stream_priority: int | None = None,
        *,
        enable_memory_stats: bool = False,
        enable_checkpointing: bool = False,
        checkpoint: str | bytes | None = None,
        py_num_workers: int = 1,
        py_start_method: str = "fork",
        py_callback_pickler: Any = None,
        output_dtype: DALIDataType | Sequence[DALIDataType | None] | None = None,
        output_ndim: int | Sequence[int | None] | None = None,
        output_layout: str | Sequence[str | None] | None = None,
        exec_dynamic: bool | None = None,
        experimental_exec_dynamic: bool | None = None,
        stream_policy: Any = None,
        concurrency: Any = None,
    ):
        self.batch_size = _positive_int("batch_size", batch_size)
        self.num_threads = _positive_int("num_threads", num_threads)
        if device_id == CPU_ONLY_DEVICE_ID:
            device_id = None
        if device_id is not None and (not isinstance(device_id, int) or device_id < 0):
            raise ArgumentError(f"device_id must be None or a non-negative int, got {device_id!r}")
        self.device_id = device_id
        for name, value in (
            ("py_callback_pickler", py_callback_pickler),
            ("stream_policy", stream_policy),
            ("concurrency", concurrency),
        ):
            if value is not None:
                raise ArgumentError(f"{name} is not supported by raypipe (only its default, None), got {value!r}")
        self.enable_checkpointing = _flag("enable_checkpointing", enable_checkpointing)
        self._checkpoint = _read_checkpoint(checkpoint, self.enable_checkpointing)
        self.is_restored_from_checkpoint = False
        if (seed is None or seed == -1) and self._checkpoint is not None:
            seed = self._checkpoint.get("seed", seed)  # the checkpointed pipeline's random seed
        if seed is None or seed == -1:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ArgumentError(f"seed must be a non-negative int, got {seed!r}")
        self.seed = seed
        self.exec_pipelined = _flag("exec_pipelined", exec_pipelined)
        self.exec_async = _flag("exec_async", exec_async)
        self.prefetch_queue_depth = prefetch_queue_depth
        self.cpu_queue_depth, self.gpu_queue_depth = _queue_depths(prefetch_queue_depth)
        if not (self.exec_pipelined and self.exec_async):
            if isinstance(prefetch_queue_depth, dict):
                raise ArgumentError(
                    "prefetch_queue_depth as a dict (separate queues) needs exec_pipelined=True and exec_async=True"
                )
            self.cpu_queue_depth = self.gpu_queue_depth = 1
        if experimental_exec_dynamic is not None and exec_dynamic is None:
            exec_dynamic = experimental_exec_dynamic
        self.exec_dynamic = _flag("exec_dynamic", exec_dynamic, optional=True)
        self.bytes_per_sample = _count("bytes_per_sample", bytes_per_sample)
        self.set_affinity = _flag("set_affinity", set_affinity)
        self.max_streams = None if max_streams is None else _count("max_streams", max_streams)
        if default_cuda_stream_priority is not None and not _is_int(default_cuda_stream_priority):
            raise ArgumentError(
                f"default_cuda_stream_priority must be None or an int, got {default_cuda_stream_priority!r}"
            )
        self.default_cuda_stream_priority = default_cuda_stream_priority
        self.enable_memory_stats = _flag("enable_memory_stats", enable_memory_stats)
        self.py_num_workers = _count("py_num_workers", py_num_workers)
        if py_start_method not in ("fork", "spawn"):
            raise ArgumentError(f"py_start_method must be 'fork' or 'spawn', got {py_start_method!r}")
        self.py_start_method = py_start_method
        self._declared = _declarations(output_dtype=output_dtype, output_ndim=output_ndim, output_layout=output_layout)
        self._per_output: list[dict[str, Any]] = []
        self._staged = None
        self._executor: Executor | None = None
        self._epoch = 0
        self._first_batch = 0  # where the self-driven order starts in ``_epoch``
        self._last: BatchResult | None = None
        self._skipped: list[SkippedSample] = []
        self._scheduled = 0  # runs asked for by schedule_run() and not yet taken by outputs()

    @property
    def max_batch_size(self) -> int:
        """DALI's name for the batch size (every batch here has ``batch_size`` rows)."""
        return self.batch_size

    @property
    def cpu_queue_size(self) -> int:
        """Batches the CPU stage may run ahead (DALI's name)."""
        return self.cpu_queue_depth

    @property
    def gpu_queue_size(self) -> int:
        """Batches the Mixed and GPU stages may run ahead (DALI's name)."""
        return self.gpu_queue_depth

    @property
    def num_outputs(self) -> int:
        """The number of outputs ``run()`` returns (the graph is defined on first use)."""
        self.build()
        return len(self._staged.outputs)

    def define_graph(self) -> Any:
        """Wire operators and return the pipeline's outputs (override in a subclass)."""
        raise PipelineDefinitionError(f"{type(self).__name__} must implement define_graph()")

    def build(self) -> None:
        """Define, check and stage the graph and open the reader; prefetching starts with
        the first ``run()`` (or ``drive()``)."""
        if self._staged is not None:
            return
        device = DeviceContext(self.device_id)
        self._split = {
            "on_gpu": device.batched,
            "decode_on_gpu": device.on_gpu and nvimgcodec_available(device.device_id),
        }
        staged = self._define(**self._split)
        self._device_report = device_report(device, staged, self.device_id)
        self._per_output = _per_output(self._declared, len(staged.outputs))
        self._staged = staged
        if self._checkpoint is not None:
            try:
                self._epoch, self._first_batch = self._position(self._checkpoint, strict=True)
            except (ArgumentError, PipelineDefinitionError):
                self._staged = None  # not built: a failed restore must not run from the start
                raise
            self.is_restored_from_checkpoint = True
        reader = staged.reader.op if staged.reader is not None else None
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

    def set_host_allocator(self, allocate: Allocator, spare: int = 0) -> None:
        """Make the host batch arrays (those operators write samples into, and large stacked
        outputs) with ``allocate(shape, dtype)`` from the next batch on, keeping ``spare`` more of
        them for reuse than the queues need. A pipeline actor passes its shared-memory allocator
        (:mod:`actors.host_ring`) and as many spares as its rank may hold batches, so finished
        batches reach the rank uncopied."""
        self.build()
        self._executor.set_allocator(allocate, spare)

    def offload_stats(self) -> dict[str, Any]:
        """Units of samples run locally and by each CPU helper, reassignments, bytes received."""
        self.build()
        return self._executor.offload_stats()

    def run(self) -> tuple[TensorList, ...]:
        """The next batch: one :class:`TensorList` per output."""
        self.build()
        if not self._executor.running:
            self._executor.start(self._self_driven(self._epoch, self._first_batch))
        result = self._executor.next()
        self._last = result
        self._skipped.extend(result.skipped)
        if self._declared:
            _check_outputs(result.outputs, self._per_output)
        return result.outputs

    def schedule_run(self) -> None:
        """DALI's split form of ``run()``: ask for one batch, taken later by :meth:`outputs` or
        :meth:`share_outputs`. Batches are prefetched anyway, so this only counts the request."""
        self.build()
        self._scheduled += 1

    def outputs(self) -> tuple[TensorList, ...]:
        """The batch of the oldest :meth:`schedule_run`; an error when none is scheduled."""
        if self._scheduled == 0:
            raise PipelineDefinitionError("outputs(): no run is scheduled; call schedule_run() first (or use run())")
        self._scheduled -= 1
        return self.run()

    def share_outputs(self) -> tuple[TensorList, ...]:
        """The same as :meth:`outputs`: every batch owns its memory here, so there is nothing to share."""
        return self.outputs()

    def release_outputs(self) -> None:
        """DALI's release of shared outputs: nothing to release here (batches own their memory)."""

    def drive(self, specs: Iterable[BatchSpec], sequential: bool = False) -> None:
        """Replace the reader's own order with explicit batches; ``run()`` returns them in order
        and raises StopIteration after the last. Used by the distributed service. ``sequential``
        says the batches read the data mostly in order (a buffer shuffle, or none): container
        readers then read whole extents ahead instead of one record at a time. Every batch keeps
        its size: a sample skipped by an ``on_error="skip"`` operator is replaced by a kept sample
        of its batch (:mod:`raypipe.replacement`), flagged as padding in :attr:`last_batch_info`."""
        self.build()
        self._executor.start(iter(specs), sequential=sequential, replace_skipped=True)

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
        self._scheduled = 0
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
        self._seek(*self._position(state, strict))

    def checkpoint(self, filename: str | os.PathLike | None = None) -> bytes:
        """DALI's checkpoint: :meth:`state_dict` serialized (JSON, as bytes like DALI's), and written
        to ``filename`` when given (overwriting it). A pipeline made with ``checkpoint=`` this value
        (and ``enable_checkpointing=True``) starts at the batch the next ``run()`` here returns.
        Needs ``enable_checkpointing=True``, as in DALI."""
        if not self.enable_checkpointing:
            raise ArgumentError(
                "cannot save the checkpoint: enable_checkpointing=True was not specified when creating the pipeline"
            )
        data = json.dumps(self.state_dict(), sort_keys=True).encode()
        if filename is not None:
            with open(filename, "wb") as out:
                out.write(data)
        return data

    def _position(self, state: dict[str, Any], strict: bool) -> tuple[int, int]:
        """(epoch, batch) of ``state`` in this pipeline's own order."""
        epoch, offset = read_state(state, self._order_fields(), owner="pipeline", strict=strict)
        batch = offset // self.batch_size
        if batch >= self.batches_per_epoch():
            epoch, batch = epoch + 1, 0
        return epoch, batch

    def _order_fields(self) -> dict[str, Any]:
        reader = self._reader(None).op
        fields = {**reader.order_fields(), "seed": self.seed, "batch_size": self.batch_size}
        if reader.seed is not None:
            fields["reader_seed"] = reader.seed
        return fields

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
        """Samples per epoch in the reader named ``name`` (all shards), as DALI counts them: with
        ``pad_last_batch`` every shard topped up to the largest (``epoch_size_padded``); a dict by
        name without ``name``. The dataset's own length is ``reader_meta()["epoch_size"]``."""
        reader = self._reader(name)
        padded = reader.op.meta(self.batch_size)["epoch_size_padded"]
        if name is None:
            return {reader.name or reader.op.schema.name: padded}
        return padded

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

    def device_report(self) -> dict[str, Any]:
        """Where this pipeline's parts run and why, as a plain dict (see :mod:`raypipe.device_report`):
        the device, the decoder's path (nvImageCodec on the GPU or the host) and the GPU operators'
        (batched kernels, per-sample cupy, or the host), each with the start-up check's detail."""
        self.build()
        return copy.deepcopy(self._device_report)

    def memory_stats(self) -> dict[str, Any]:
        """This pipeline's GPU memory as a plain dict: ``pool_used_mb`` (held by live arrays),
        ``pool_total_mb`` (reserved by its pool), ``limit_mb`` (the budget, None when unbounded),
        ``pinned_mb`` (host staging buffers), ``decoder_reserved_mb`` (the GPU decoder's outputs, outside
        the budget: see :meth:`raypipe.backend.DeviceContext.memory_stats`) and ``device_id``; zeros on the host."""
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
        seed = op.seed if op is not None and op.seed is not None else self.seed  # a reader's own seed shuffles
        return _reader_batches(op, self.batch_size, seed, first_epoch, first_batch)


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


#: Every argument of :class:`Pipeline` (DALI's), which ``pipeline_def`` takes too.
PIPELINE_ARGS = tuple(inspect.signature(Pipeline.__init__).parameters)[1:]


def pipeline_def(fn: Callable | None = None, **defaults: Any) -> Callable:
    """Decorator turning a graph-defining function into a pipeline factory.

    ``@pipeline_def(batch_size=64, num_threads=2, device_id=None, seed=7)`` takes any of
    :data:`PIPELINE_ARGS`; any of those can be overridden when the factory is called, the rest of
    the call's arguments go to the function. As in DALI, a function parameter of the same name as
    a pipeline argument takes that argument (with a warning). A function with ``**kwargs`` (which
    DALI refuses) gets the output declarations ``output_dtype``, ``output_ndim`` and
    ``output_layout`` (operators have an ``output_layout`` too): declare those in the decorator.
    DALI's ``enable_conditionals`` and ``debug`` are accepted when False.
    """
    unknown = set(defaults) - set(PIPELINE_ARGS) - set(DEFINITION_ARGS)
    if unknown:
        raise ArgumentError(f"pipeline_def: unknown pipeline arguments {sorted(unknown)}")

    def decorate(graph_fn: Callable) -> Callable:
        params = inspect.signature(graph_fn).parameters
        shadowed = set(params) & set(PIPELINE_ARGS)
        to_function = set(params)
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            to_function |= set(_DECLARATIONS)

        @functools.wraps(graph_fn)
        def create(*args: Any, **kwargs: Any) -> Pipeline:
            for name in sorted(shadowed & set(kwargs)):
                warnings.warn(
                    f"{graph_fn.__name__}: the argument {name!r} goes to the function; it shadows the pipeline "
                    "argument of the same name",
                    stacklevel=2,
                )
            taken = [k for k in (*DEFINITION_ARGS, *PIPELINE_ARGS) if k in kwargs and k not in to_function]
            options = {**defaults, **{k: kwargs.pop(k) for k in taken}}
            for name in DEFINITION_ARGS:
                if options.pop(name, False):
                    raise ArgumentError(f"{name}=True is not supported by raypipe (only False)")
            try:
                inspect.signature(graph_fn).bind(*args, **kwargs)
            except TypeError as exc:
                raise ArgumentError(f"{graph_fn.__name__}: {exc}") from None
            return _FunctionPipeline(graph_fn, args, kwargs, **options)

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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(name: str, value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ArgumentError(f"{name} must be a non-negative int, got {value!r}")
    return value


def _flag(name: str, value: Any, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise ArgumentError(f"{name} must be a bool{' or None' if optional else ''}, got {value!r}")
    return value


def _read_checkpoint(checkpoint: str | bytes | None, enabled: bool) -> dict[str, Any] | None:
    """The state in a checkpoint from :meth:`Pipeline.checkpoint` (None without one)."""
    if checkpoint is None:
        return None
    if not enabled:
        raise ArgumentError(
            "cannot restore the checkpoint: enable_checkpointing=True was not specified when creating the pipeline"
        )
    try:
        state = json.loads(checkpoint)
    except (TypeError, ValueError):
        state = None
    if not isinstance(state, dict):
        raise ArgumentError("checkpoint must be the value Pipeline.checkpoint() returned (or its file's content)")
    return state


# what output_dtype / output_ndim / output_layout may hold per output (None, or "" for a layout: anything)
_DECLARATIONS = {
    "output_dtype": (lambda v: isinstance(v, DALIDataType), "a types.DALIDataType"),
    "output_ndim": (lambda v: _is_int(v) and v >= 0, "a non-negative int"),
    "output_layout": (lambda v: isinstance(v, str), "a str"),
}


def _declarations(**given: Any) -> dict[str, Any]:
    """The given output declarations, validated: one value for every output or a list of them."""
    for name, value in given.items():
        ok, what = _DECLARATIONS[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(v is None or ok(v) for v in values):
            raise ArgumentError(f"{name} must be {what}, a list of those (None: any) or None, got {value!r}")
    return {name: value for name, value in given.items() if value is not None}


def _per_output(declared: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """What each of ``count`` outputs is declared to be; a list of another length is an error."""
    per: list[dict[str, Any]] = [{} for _ in range(count)]
    for name, value in declared.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value] * count
        if len(values) != count:
            raise ArgumentError(f"{name} declares {len(values)} outputs, the pipeline has {count}")
        for entry, v in zip(per, values):
            if v is not None and v != "":
                entry[name] = v
    return per


def _check_outputs(outputs: Sequence[TensorList], per_output: list[dict[str, Any]]) -> None:
    """Raise naming the first output of a batch that is not what it is declared to be."""
    for i, (out, declared) in enumerate(zip(outputs, per_output)):
        if not declared or not len(out):
            continue
        dtype = declared.get("output_dtype")
        if dtype is not None and out.at(0).dtype != dtype.numpy:
            raise PipelineDefinitionError(f"output {i} has dtype {out.at(0).dtype}, output_dtype declares {dtype}")
        ndim = declared.get("output_ndim")
        if ndim is not None and out.ndim() != ndim:
            raise PipelineDefinitionError(f"output {i} has {out.ndim()} dimensions, output_ndim declares {ndim}")
        layout = declared.get("output_layout")
        if layout is not None and out.layout() != layout:
            raise PipelineDefinitionError(f"output {i} has layout {out.layout()!r}, output_layout declares {layout!r}")
