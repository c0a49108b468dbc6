"""``Pipeline`` and ``pipeline_def``: define a graph, build it, run it batch by batch."""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import json
import os
import sys
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import autograph, graph_context, pipeline_serial
from .aligned_readers import combined_digest
from .backend import DeviceContext
from .batch_spec import BatchSpec
from .device_report import device_report
from .engine import Engine, GraphFunction, constant_output
from .errors import ArgumentError, PipelineDefinitionError, did_you_mean
from .executor import BatchResult, SkippedSample
from .graph import DataNode, OpNode, StagedGraph, current_graph, defining
from .graph_context import RecordedGraph, Recording
from .graph_dot import dot_text
from .operator import Operator
from .operators.get_property import origin_reader
from .pipeline_options import DECLARATIONS, parse
from .position import make_state, read_state
from .source_feed import SourceFeeder, feeder_for
from .tensor_list import TensorList
from .types import DALIDataType

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


def keep(edge: DataNode) -> None:
    """Keep ``edge``'s operator in the graph although no output needs it (``add_sink``)."""
    if not isinstance(edge, DataNode):
        raise TypeError(f"add_sink: the sink must be an operator's output (a DataNode), got {edge!r}")
    edge.producer.op.preserve = True


@dataclass(frozen=True)
class PipelineSettings:
    """What :meth:`Pipeline.current` gives while a pipeline's graph is being defined: the pipeline's
    settings (DALI's definitions read ``Pipeline.current().device_id`` for their shard, or its batch
    size). A snapshot rather than the pipeline itself, because the engine defines the graph again
    where the pipeline is not (after it is dropped, in a CPU helper's process)."""

    batch_size: int
    num_threads: int
    device_id: int | None
    seed: int
    prefetch_queue_depth: Any
    exec_pipelined: bool
    exec_async: bool
    py_num_workers: int
    py_start_method: str
    enable_checkpointing: bool

    @property
    def max_batch_size(self) -> int:
        """DALI's name for the batch size."""
        return self.batch_size

    @staticmethod
    def add_sink(edge: DataNode) -> None:
        """``Pipeline.add_sink`` while the graph is being defined (``Pipeline.current().add_sink``)."""
        keep(edge)


def _sources_of(reader: Any, sample_indices: Sequence[int]) -> Callable[[int], str]:
    """Each row's ``source_info`` from ``reader``, made when asked for."""
    return lambda row: reader.source_info(sample_indices[row])


def _defined_as_current(settings: PipelineSettings, graph_fn: Callable[[], Any]) -> Any:
    """``graph_fn()`` with ``settings`` as the current pipeline, as DALI runs a definition."""
    graph_context.push_current(settings)
    try:
        return graph_fn()
    finally:
        graph_context.pop_current()


class Pipeline:
    """DALI's pipeline: a graph of operators, run by its :attr:`engine` (:mod:`raypipe.engine`).

    Subclass it and implement :meth:`define_graph` (DALI class style), use :func:`pipeline_def`,
    or call operators inside ``with pipe:`` and name the outputs with :meth:`set_outputs` (DALI's
    graph-context style, :mod:`raypipe.graph_context`). ``device_id=None`` keeps everything on the host, and so does a
    ``device_id`` where no GPU is usable (with a :class:`~raypipe.backend.GpuUnavailableWarning`):
    mixed and gpu operators then run per sample through their host implementations, with the same
    results as ``device="cpu"``. On a GPU, ``RAYPIPE_GPU_MEMORY_MB`` bounds the pipeline's device
    memory pool (see :meth:`memory_stats`).

    Neither the engine nor its executor's threads reference the pipeline, so a dropped pipeline
    is freed at once and a finalizer stops its threads (or call :meth:`close`, or use it as a
    context manager).

    The arguments are DALI's, in DALI's order, checked by :func:`raypipe.pipeline_options.parse`.
    Those about how DALI's own executor runs take DALI's values and change no batch:
    ``exec_pipelined=False`` or ``exec_async=False`` (DALI's executors without prefetching) run
    with the least prefetching here (queue depth 1 per stage);
    ``exec_dynamic``, ``bytes_per_sample``, ``set_affinity``, ``enable_memory_stats``,
    ``max_streams`` and ``default_cuda_stream_priority`` (deprecated in DALI) are validated hints;
    ``py_num_workers`` and ``py_start_method`` size and start the worker processes of parallel
    external sources (:mod:`raypipe.source_workers`). ``enable_checkpointing`` and ``checkpoint`` are DALI's
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
        arguments = dict(locals())
        del arguments["self"]
        # what defines this pipeline, which serialize() keeps (a checkpoint is a position, not a definition)
        self._arguments = {k: v for k, v in arguments.items() if k != "checkpoint"}
        options = parse(**arguments)  # DALI's signature above; parse holds the same (a test checks)
        self.batch_size = options.batch_size
        self.num_threads = options.num_threads
        self.device_id = options.device_id
        self.seed = options.seed
        self.exec_pipelined = options.exec_pipelined
        self.exec_async = options.exec_async
        self.prefetch_queue_depth = options.prefetch_queue_depth
        self.cpu_queue_depth = options.cpu_queue_depth
        self.gpu_queue_depth = options.gpu_queue_depth
        separated = isinstance(prefetch_queue_depth, dict)
        self.exec_separated = separated  # DALI's: separate CPU and GPU prefetch queues
        # DALI's dynamic executor is its default where it can run: pipelined, asynchronous, one queue depth
        default_dynamic = True if exec_pipelined and exec_async and not separated else None
        self.exec_dynamic = options.exec_dynamic if options.exec_dynamic is not None else default_dynamic
        self.stream_policy = self.concurrency = None  # only their default is taken
        self.bytes_per_sample = options.bytes_per_sample
        self.set_affinity = options.set_affinity
        self.max_streams = -1  # deprecated and unused in DALI, which reports -1 whatever was given
        self.default_cuda_stream_priority = options.default_cuda_stream_priority
        self.enable_memory_stats = options.enable_memory_stats
        self.enable_checkpointing = options.enable_checkpointing
        self.py_num_workers = options.py_num_workers
        self.py_start_method = options.py_start_method
        self.is_restored_from_checkpoint = False
        self._checkpoint = options.checkpoint
        self._declared = options.declared
        self._per_output: list[dict[str, Any]] = []
        self._staged: StagedGraph | None = None
        self._engine: Engine | None = None
        self._epoch = 0
        self._first_batch = 0  # where the self-driven order starts in ``_epoch``
        self._last: BatchResult | None = None
        self._skipped: list[SkippedSample] = []
        self._scheduled = 0  # runs asked for by schedule_run() and not yet taken by outputs()
        self._first_iter = True  # the next schedule_run() is the first since build or reset: it prefetches
        self._recorded = RecordedGraph()  # what ``with pipe:`` blocks record (the graph-context style)
        self._graph_outputs: tuple[DataNode, ...] | None = None  # set_outputs()
        self._blocks: list[Recording | None] = []  # active with blocks / push_current: recording or not
        self._feeder: SourceFeeder | None = None  # the external sources, fed before each batch
        self._source_epoch = 0  # the external sources' epoch (SampleInfo.epoch_idx) beside a reader

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
        """Wire operators and return the pipeline's outputs (override in a subclass, or define the
        graph in a ``with pipe:`` block and call :meth:`set_outputs`)."""
        raise PipelineDefinitionError(
            f"{type(self).__name__} must implement define_graph(), or call operators inside `with pipe:` "
            "and name the outputs with pipe.set_outputs(...)"
        )

    def set_outputs(self, *outputs: DataNode) -> None:
        """DALI's graph-context style: the pipeline's outputs, made by operators called inside a
        ``with pipe:`` block of this pipeline (inside it or after it)."""
        if self._engine is not None:
            raise PipelineDefinitionError("set_outputs(): the pipeline is already built")
        if self._defines_its_graph():
            raise PipelineDefinitionError(
                f"set_outputs(): {type(self).__name__} defines its graph with define_graph() (or pipeline_def)"
            )
        for i, out in enumerate(outputs):
            if not self._recorded.owns(out):
                raise PipelineDefinitionError(
                    f"set_outputs(): output {i} ({out!r}) was not made by an operator called inside `with pipe:` "
                    "of this pipeline"
                )
        self._graph_outputs = tuple(outputs)

    def _defines_its_graph(self) -> bool:
        """Whether the graph comes from :meth:`define_graph` (a subclass's, or ``pipeline_def``'s)."""
        return type(self).define_graph is not Pipeline.define_graph

    def _records(self) -> bool:
        """Whether a ``with`` block records operators into this pipeline: its graph is not defined
        (no define_graph, no outputs set, not built)."""
        return not self._defines_its_graph() and self._graph_outputs is None and self._engine is None

    @staticmethod
    def current() -> Pipeline | None:
        """The pipeline of the innermost active ``with pipe:`` block (or :meth:`push_current`) in
        this thread; while a graph is being defined (``define_graph``, a ``pipeline_def`` function),
        that pipeline's :class:`PipelineSettings`, as DALI sets it; None otherwise."""
        return graph_context.current()

    @staticmethod
    def push_current(pipeline: Pipeline) -> Pipeline | None:
        """Make ``pipeline`` current, as entering ``with pipeline:`` does; return the previous one."""
        previous = graph_context.push_current(pipeline)
        pipeline._blocks.append(Recording(pipeline._recorded) if pipeline._records() else None)
        return previous

    @staticmethod
    def pop_current() -> None:
        """Restore the pipeline current before the last :meth:`push_current`."""
        pipeline = graph_context.current()
        graph_context.pop_current()
        if pipeline is not None:
            block = pipeline._blocks.pop()
            if block is not None:
                block.stop()

    @property
    def engine(self) -> Engine:
        """The engine under this pipeline (built on first use): what the distributed service drives
        (:meth:`Engine.drive`), shares with CPU helpers and builds their CPU stages from. A
        class-style pipeline's engine builds CPU stages only while the pipeline is referenced."""
        self.build()
        return self._engine

    def build(self) -> None:
        """Define, check and stage the graph and open the reader; prefetching starts with
        the first ``run()``."""
        if self._engine is not None:
            return
        engine = Engine(
            self._graph_function(),
            DeviceContext(self.device_id),
            seed=self.seed,
            num_threads=self.num_threads,
            cpu_size=self.cpu_queue_depth,
            gpu_size=self.gpu_queue_depth,
            batch_size=self.batch_size,
        )
        self._feeder = feeder_for(engine.staged, self.batch_size, self.py_num_workers, self.py_start_method)
        self._device_report = device_report(engine.device, engine.staged, self.device_id, engine.cpu_threads)
        self._per_output = _per_output(self._declared, len(engine.staged.outputs))
        self._staged, self._engine = engine.staged, engine
        #: the reader each output's data began as (its samples' source_info), None for the others
        self._origins = [origin_reader(out) for out in engine.staged.outputs]
        if self._checkpoint is not None:
            try:
                self._epoch, self._first_batch = self._position(self._checkpoint, strict=True)
            except (ArgumentError, PipelineDefinitionError):
                self._staged = self._engine = None  # not built: a failed restore must not run from the start
                raise
            self.is_restored_from_checkpoint = True

    def _graph_function(self) -> GraphFunction:
        """:meth:`define_graph` for the engine, held weakly: the engine never keeps its pipeline
        alive, so a dropped pipeline is freed at once (and its engine with it). A graph recorded in
        ``with pipe:`` blocks is replayed (the engine holds the recording, not the pipeline)."""
        if self._graph_outputs is not None:
            return functools.partial(self._recorded.replay, self._graph_outputs)
        method = weakref.WeakMethod(self.define_graph)

        def define() -> Any:
            graph_fn = method()
            if graph_fn is None:
                raise PipelineDefinitionError("the pipeline that defines this engine's graph is gone")
            return graph_fn()

        return functools.partial(_defined_as_current, self.settings(), define)

    def settings(self) -> PipelineSettings:
        """This pipeline's settings, as :meth:`current` gives them while its graph is defined."""
        return PipelineSettings(
            batch_size=self.batch_size,
            num_threads=self.num_threads,
            device_id=self.device_id,
            seed=self.seed,
            prefetch_queue_depth=self.prefetch_queue_depth,
            exec_pipelined=self.exec_pipelined,
            exec_async=self.exec_async,
            py_num_workers=self.py_num_workers,
            py_start_method=self.py_start_method,
            enable_checkpointing=self.enable_checkpointing,
        )

    def run(self, cuda_stream: Any = None, /, **pipeline_inputs: Any) -> tuple[TensorList, ...]:
        """The next batch: one :class:`TensorList` per output. Keyword arguments feed the external
        sources of those names first (DALI's ``pipe.run(my_input=batch)``, :meth:`feed_input`);
        ``cuda_stream`` is accepted as a hint (GPU outputs are ready when returned)."""
        for name, data in pipeline_inputs.items():
            self.feed_input(name, data)
        self.schedule_run()
        return self.outputs()

    def start_py_workers(self) -> None:
        """DALI's early start of the worker processes of ``external_source(parallel=True)``: builds
        the pipeline and starts them now rather than at the first batch (nothing to start without
        parallel sources). The workers never use CUDA, so starting them after the pipeline's device
        is set up is safe with ``py_start_method="fork"`` as long as the sources do not use CUDA."""
        self.build()
        if self._feeder is not None:
            self._feeder.start_workers()

    def iter_setup(self) -> None:
        """Called before each batch is fed (DALI's older style, for a subclass): feed the external
        sources without a ``source`` here with :meth:`feed_input`; StopIteration ends the epoch."""

    def feed_input(
        self,
        data_node: Any,
        data: Any,
        layout: str | None = None,
        cuda_stream: Any = None,
        use_copy_kernel: bool = False,
    ) -> None:
        """Give an external source without a ``source`` (its output, or its ``name``) its next batch:
        a list of samples or an array with the batch as outer dimension; ``layout`` sets its layout
        (by default a fed ``TensorListCPU``'s own, as in DALI). The data is copied; ``cuda_stream``
        and ``use_copy_kernel`` are accepted hints."""
        self.build()
        if self._feeder is None:
            raise ArgumentError("feed_input: the pipeline has no external source")
        self._feeder.feed_input(data_node, data)
        if layout is None and isinstance(data, TensorList):
            layout = data.layout() or None
        if layout is not None:
            self._staged.relayout(dict.fromkeys(self._feeder.node(data_node).outputs, layout))

    def fed_source_names(self) -> list[str]:
        """The names of the external sources :meth:`feed_input` feeds (those without a ``source``),
        in graph order; an unnamed one by its label. Builds the pipeline."""
        self.build()
        if self._feeder is None:
            return []
        return [n.name or n.label for n in self._feeder.pushed]

    def input_feed_count(self, input_name: str) -> int:
        """How many batches the external source ``input_name`` is fed ahead, as DALI reports it: the
        prefetch queue's depth (the batches the pipeline takes from its sources before it returns one)."""
        self.build()
        if self._feeder is None:
            raise ArgumentError(f"input_feed_count: the pipeline has no external source {input_name!r}")
        self._feeder.node(input_name, "input_feed_count")
        return self.cpu_queue_depth

    def schedule_run(self) -> None:
        """DALI's split form of ``run()``: ask for one batch, taken later by :meth:`outputs` or
        :meth:`share_outputs`. Batches are prefetched anyway, so this only counts requests, as DALI
        does: the first since :meth:`build` or :meth:`reset` asks for a full prefetch queue
        (``prefetch_queue_depth`` batches; one with ``exec_pipelined=False``), the next for one each."""
        self.build()
        if self._first_iter and self.exec_pipelined:
            self._prefetch()
        else:
            self._scheduled += 1

    def empty(self) -> bool:
        """DALI's test for work scheduled and not yet taken: False while batches asked for by
        :meth:`schedule_run`, :meth:`_prefetch` or :meth:`run` (which schedules, then takes one) wait
        for :meth:`outputs`; True after :meth:`build` and :meth:`reset`."""
        return self._scheduled == 0

    def _prefetch(self) -> None:
        """DALI's (private) start of prefetching, which old iterators call before
        :meth:`share_outputs`: schedules runs up to the prefetch queue's depth."""
        self.build()
        self._first_iter = False
        self._scheduled = max(self._scheduled, self.cpu_queue_depth)

    def outputs(self) -> tuple[TensorList, ...]:
        """The batch of the oldest :meth:`schedule_run`; an error when none is scheduled."""
        if self._scheduled == 0:
            raise PipelineDefinitionError("outputs(): no run is scheduled; call schedule_run() first (or use run())")
        self._scheduled -= 1
        engine = self.engine
        if not engine.running:
            engine.drive(self._self_driven(self._epoch, self._first_batch), sequential=True, replace_skipped=False)
        if self._feeder is not None:
            self._feeder.fill(self.cpu_queue_depth, self.iter_setup)
        result = engine.next()
        if self._feeder is not None:
            self._feeder.consumed()
        self._last = result
        self._skipped.extend(result.skipped)
        if self._declared:
            _check_outputs(result.outputs, self._per_output)
        for out, origin in zip(result.outputs, self._origins, strict=True):
            if origin is not None:
                out.set_source_info(_sources_of(origin, result.sample_indices))
        return result.outputs

    def share_outputs(self) -> tuple[TensorList, ...]:
        """The same as :meth:`outputs`: every batch owns its memory here, so there is nothing to share."""
        return self.outputs()

    def release_outputs(self) -> None:
        """DALI's release of shared outputs: nothing to release here (batches own their memory)."""

    def reset(self, epoch: int | None = None) -> None:
        """Drop prefetched batches and restart at the beginning of ``epoch`` (default: the
        epoch after the last completed one, or the current one if none was returned). With
        external sources and no ``epoch``, as in DALI: the next epoch once a source ended the
        current one, nothing before."""
        self.build()
        if epoch is None and self._feeder is not None:
            if not self._feeder.ended:
                return  # as in DALI: external sources reset only after their epoch ended
            self._source_epoch = self._feeder.epoch + 1
            if self._staged.reader is not None:  # beside a reader: the sources' next epoch, the reader goes on
                self._seek(*self._next_position())
                return
            epoch = self._source_epoch
        if epoch is None:
            last = self._last
            epoch = self._epoch if last is None else last.spec.epoch + 1
        self._seek(epoch, 0)

    def _seek(self, epoch: int, batch: int) -> None:
        self._epoch, self._first_batch = epoch, batch
        self._last = None
        self._scheduled = 0
        self._first_iter = True
        self._engine.drive(self._self_driven(epoch, batch), sequential=True, replace_skipped=False)

    def state_dict(self) -> dict[str, Any]:
        """The position of the batch the next ``run()`` returns in the reader's own order (the
        position contract of :mod:`raypipe.position`; offset = samples of this shard's epoch
        already returned)."""
        epoch, batch = self._next_position()
        return make_state(self._order_fields(), epoch, batch * self.batch_size)

    def _next_position(self) -> tuple[int, int]:
        """(epoch, batch index) of the batch the next ``run()`` returns."""
        last = self._last
        if last is None:
            return self._epoch, self._first_batch
        if last.spec.last_in_epoch:
            return last.spec.epoch + 1, 0
        return last.spec.epoch, last.spec.index + 1

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue at ``state``'s position without reading the batches before it. A state from
        another dataset, seed, batch size or sharding is an error unless ``strict=False``."""
        self._seek(*self._position(state, strict))

    @property
    def restored_state(self) -> dict[str, Any] | None:
        """The state this pipeline was made to resume from (its ``checkpoint`` argument, read); None
        without one. An iterator over it reads its own fields there (``samples_in_epoch``)."""
        return copy.deepcopy(self._checkpoint)

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
        fields = {
            **reader.order_fields(),
            "dataset_digest": combined_digest(self._staged.readers),
            "seed": self.seed,
            "batch_size": self.batch_size,
        }
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
        name of every reader without ``name``. The dataset's own length is ``reader_meta()["epoch_size"]``."""
        if name is not None:
            return self._reader(name).op.meta(self.batch_size)["epoch_size_padded"]
        self._reader(None)
        return {
            reader.name or reader.op.schema.name: reader.op.meta(self.batch_size)["epoch_size_padded"]
            for reader in self._staged.readers
        }

    def output_dtype(self) -> list[DALIDataType | None]:
        """Each output's declared dtype (``output_dtype``), None where none is declared: DALI's
        ``Pipeline.output_dtype()``; builds the pipeline to count its outputs."""
        return self._declared_per_output("output_dtype")

    def output_ndim(self) -> list[int | None]:
        """Each output's declared number of dimensions (``output_ndim``), None where none is
        declared: DALI's ``Pipeline.output_ndim()``; builds the pipeline to count its outputs."""
        return self._declared_per_output("output_ndim")

    def _declared_per_output(self, name: str) -> list[Any]:
        self.build()
        return [declared.get(name) for declared in self._per_output]

    def reader_meta(self, name: str | None = None) -> dict[str, Any]:
        """DALI-style reader metadata of the reader named ``name`` (the first reader without one):
        epoch_size, shard_id, number_of_shards, padding, batches."""
        return self._reader(name).op.meta(self.batch_size)

    def batches_per_epoch(self, name: str | None = None) -> int:
        """Batches this pipeline's shard yields per epoch (equal for every shard)."""
        return self.reader_meta(name)["batches_per_epoch"]

    def dataset_digest(self, name: str | None = None) -> str:
        """A hash of the sample list of the reader named ``name`` (the first reader without one);
        position states of a pipeline with several readers hash every reader's."""
        return self._reader(name).op.digest()

    def read_stats(self, name: str | None = None) -> dict[str, int]:
        """How the reader has read so far: for container readers, ``direct_reads`` (one ``pread``
        per sample), ``extent_reads`` and ``extent_bytes`` (sequential reads ahead) and
        ``extent_hits``; empty for readers that keep no counts, and without a reader."""
        self.build()
        if name is None and self._staged.reader is None:
            return {}
        return self._reader(name).op.io_stats()

    def serialize(
        self, define_graph: Callable[[], Any] | None = None, filename: str | os.PathLike | None = None
    ) -> bytes:
        """DALI's serialized pipeline, in raypipe's own format (:mod:`raypipe.pipeline_serial`): this
        pipeline's arguments and operator calls as JSON bytes, also written to ``filename``; ``define_graph``
        (a function returning the outputs) defines the graph instead of the pipeline's own. An argument
        that is code (a Python function, a source) cannot be kept: ArgumentError naming it."""
        if define_graph is None:
            graph_fn = self._graph_function()
        else:
            graph_fn = functools.partial(_defined_as_current, self.settings(), define_graph)
        recorded = RecordedGraph()
        with defining(recorded):
            outputs = graph_fn()
            outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
            outputs = [constant_output(out) for out in outputs]
        data = pipeline_serial.dump(self._arguments, recorded.calls, outputs)
        if filename is not None:
            with open(filename, "wb") as f:
                f.write(data)
        return data

    @classmethod
    def deserialize(
        cls, serialized_pipeline: bytes | str | None = None, filename: str | os.PathLike | None = None, **kwargs: Any
    ) -> Pipeline:
        """A pipeline from what :meth:`serialize` gave (``serialized_pipeline``, or the file ``filename``);
        ``kwargs`` replace the serialized pipeline's arguments (``batch_size``, ``device_id``, ``seed``, ...),
        as in DALI. It gives the batches the serialized pipeline gives with the same arguments."""
        if (serialized_pipeline is None) == (filename is None):
            raise ArgumentError("deserialize: give serialized_pipeline or filename (one of them)")
        if filename is not None:
            with open(filename, "rb") as f:
                serialized_pipeline = f.read()
        definition = pipeline_serial.load(serialized_pipeline)
        unknown = sorted(set(kwargs) - set(PIPELINE_ARGS))
        if unknown:
            raise ArgumentError(
                f"deserialize: {unknown[0]!r} is not a pipeline argument{did_you_mean(unknown[0], PIPELINE_ARGS)}"
            )
        pipe = Pipeline(**{**definition.arguments, **kwargs})
        pipe._define_from(definition)
        return pipe

    def deserialize_and_build(self, serialized_pipeline: bytes | str) -> None:
        """DALI's older form: this pipeline, with its own arguments, takes the graph of a serialized
        pipeline (:meth:`serialize`) and is built."""
        if self._engine is not None or self._defines_its_graph() or self._graph_outputs is not None:
            raise PipelineDefinitionError("deserialize_and_build(): the pipeline already has a graph")
        self._define_from(pipeline_serial.load(serialized_pipeline))
        self.build()

    def _define_from(self, definition: pipeline_serial.Definition) -> None:
        """Replay a serialized definition's calls into this pipeline's graph and set its outputs."""
        made: list[list[DataNode]] = []

        def resolved(value: Any) -> Any:
            return made[value.call][value.output] if isinstance(value, pipeline_serial.Ref) else value

        with self:
            graph = current_graph("Pipeline.deserialize")
            for call in definition.calls:
                inputs = [resolved(v) for v in call.inputs]
                kwargs = {k: resolved(v) for k, v in call.kwargs.items()}
                made.append(graph.add(call.op_name, inputs, kwargs, call.device))
            self.set_outputs(*[resolved(ref) for ref in definition.outputs])

    def save_graph_to_dot_file(
        self, filename: str | os.PathLike, *, show_tensors: bool = False, show_ids: Any = None, use_colors: bool = False
    ) -> None:
        """Write the built graph as Graphviz DOT text (DALI's method; :mod:`raypipe.graph_dot`):
        ``show_tensors`` adds the data between operators, ``use_colors`` colours operators by device;
        ``show_ids`` has no effect (deprecated in DALI, with the same warning)."""
        self.build()
        if show_ids is not None:
            warnings.warn(
                'The argument "show_ids" is deprecated because it no longer has any effect.',
                DeprecationWarning,
                stacklevel=2,
            )
        text = dot_text(self._staged, show_tensors=show_tensors, use_colors=use_colors)
        with open(filename, "w", encoding="utf-8") as f:
            f.write(text)

    def enable_profiling(self) -> None:
        """Collect wall time per stage and per operator from now on (see :mod:`raypipe.profile`)."""
        self.engine.enable_profiling()

    def profile(self) -> dict[str, Any]:
        """What :meth:`enable_profiling` collected: per (stage, operator) calls, total seconds and
        mean ms, and the executor's per-sample overhead in microseconds."""
        return self.engine.profile()

    def device_report(self) -> dict[str, Any]:
        """Where this pipeline's parts run and why, as a plain dict (see :mod:`raypipe.device_report`):
        the device, the decoder's path (nvImageCodec on the GPU or the host) and the GPU operators'
        (batched kernels, per-sample cupy, or the host), each with the start-up check's detail."""
        self.build()
        return copy.deepcopy(self._device_report)

    def add_sink(self, edge: DataNode) -> None:
        """DALI's: keep the operator that makes ``edge`` running, and what it needs, although no
        output needs it (as ``preserve=True`` on that operator does)."""
        keep(edge)
        if self._records() and self._recorded.owns(edge):
            self._recorded.sinks.append(edge)

    def enable_api_check(self, enable: bool) -> None:
        """DALI's switch of its run-time check that ``run()`` and ``schedule_run()`` are not mixed
        with ``outputs()`` wrongly. raypipe counts scheduled runs in any mix (see
        :meth:`schedule_run`), so there is nothing to switch; ``enable`` must be a bool."""
        if not isinstance(enable, bool):
            raise ArgumentError(f"enable_api_check: enable must be a bool, got {enable!r}")

    def executor_statistics(self) -> dict[str, Any]:
        """DALI's per-operator memory figures of its older executors: ``{}`` as DALI 2.4's dynamic
        executor, its default, gives them. raypipe's memory figures are :meth:`memory_stats`
        (the GPU pool, staging and decoder memory) and its time per operator :meth:`profile`."""
        return {}

    def external_source_shm_statistics(self) -> dict[str, list[int]]:
        """DALI's shared-memory figures of the parallel external sources' worker processes:
        ``capacities`` (bytes) and ``per_sample_capacities``, the most one result of a source's
        share of a batch took (see :meth:`raypipe.source_workers.SourceWorkerPool.shm_statistics`);
        empty lists without parallel sources or before their first batch."""
        pool = self._feeder.pool if self._feeder is not None else None
        return pool.shm_statistics() if pool is not None else {"capacities": [], "per_sample_capacities": []}

    def output_stream(self) -> Any:
        """The CUDA stream the GPU stage makes its outputs on (a ``cupy.cuda.Stream``); None where
        the pipeline runs on the host."""
        return self.engine.device.compute_stream

    def memory_stats(self) -> dict[str, Any]:
        """This pipeline's GPU memory as a plain dict: ``pool_used_mb`` (held by live arrays),
        ``pool_total_mb`` (reserved by its pool), ``limit_mb`` (the budget, None when unbounded),
        ``pinned_mb`` (host staging buffers), ``decoder_reserved_mb`` (the GPU decoder's outputs, outside
        the budget: see :meth:`raypipe.backend.DeviceContext.memory_stats`) and ``device_id``; zeros on the host."""
        return self.engine.memory_stats()

    def queue_stats(self) -> dict[str, dict[str, int]]:
        """How full the executor's queues are now (see :meth:`raypipe.executor.Executor.queue_stats`)."""
        return self.engine.queue_stats()

    def reader_label(self, name: str | None = None) -> str | None:
        """How profiles and errors name the reader (``'Reader'`` or ``'readers.file'#0``); None without one."""
        self.build()
        return self._reader(name).label if self._staged.reader is not None else None

    def close(self) -> None:
        """Stop the executor's threads and release its cached device memory; idempotent, and
        ``run()`` starts them again. Stops the worker processes of parallel external sources."""
        if self._feeder is not None:
            self._feeder.stop()
        if self._engine is not None:
            self._engine.close()

    def __enter__(self) -> Pipeline:
        """Make this pipeline current (DALI's ``with pipe:``). On a pipeline whose graph is not
        defined yet the block records the operators called inside it (the graph-context style,
        then :meth:`set_outputs`); on one whose graph is defined (define_graph, pipeline_def, or
        outputs set) the block's end closes the pipeline, which DALI's does not."""
        Pipeline.push_current(self)
        return self

    def __exit__(self, *exc) -> None:
        recorded = bool(self._blocks) and self._blocks[-1] is not None
        Pipeline.pop_current()
        if not recorded:
            self.close()

    def _reader(self, name: str | None) -> OpNode:
        """The reader named ``name``, or the first reader (the one whose order they all follow)."""
        self.build()
        readers = self._staged.readers
        if not readers:
            raise PipelineDefinitionError("this pipeline has no reader")
        if name is None:
            return readers[0]
        for reader in readers:
            if reader.name == name:
                return reader
        if len(readers) == 1:
            raise ArgumentError(f"no reader named {name!r} (the pipeline's reader is {readers[0].label})")
        labels = ", ".join(r.label for r in readers)
        raise ArgumentError(f"no reader named {name!r} (the pipeline's readers are {labels})")

    def _self_driven(self, first_epoch: int, first_batch: int = 0) -> Iterator[BatchSpec]:
        reader = self._staged.reader
        if self._feeder is not None and reader is None:
            return self._feeder.specs(first_epoch, self)
        op = reader.op if reader is not None else None
        seed = op.seed if op is not None and op.seed is not None else self.seed  # a reader's own seed shuffles
        specs = _reader_batches(op, self.batch_size, seed, first_epoch, first_batch)
        if self._feeder is not None:  # external sources beside the reader: one fed batch for each of its batches
            return self._feeder.specs(self._source_epoch, self, specs)
        return specs


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

    def _graph_function(self) -> GraphFunction:
        """The decorated function with its arguments: it does not reference the pipeline, so the
        engine holds it strongly and builds CPU stages after the pipeline is gone."""
        return functools.partial(
            _defined_as_current, self.settings(), functools.partial(self._graph_fn, *self._args, **self._kwargs)
        )


#: DALI's ``nvidia.dali.pipeline.do_not_convert`` (:func:`raypipe.autograph.do_not_convert`).
do_not_convert = autograph.do_not_convert

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
    DALI's ``debug`` is accepted when False. ``enable_conditionals=True`` rewrites the function (and
    the user's functions it calls) so that ``if``, ``and``, ``or`` and ``not`` on pipeline data choose
    per sample (:mod:`raypipe.autograph`, :mod:`raypipe.conditionals`); without it they raise
    (:meth:`raypipe.graph.DataNode.__bool__`). The automatic augmentations (:mod:`raypipe.auto_aug`)
    work either way.
    """
    unknown = set(defaults) - set(PIPELINE_ARGS) - set(DEFINITION_ARGS)
    if unknown:
        first = sorted(unknown)[0]
        raise ArgumentError(
            f"pipeline_def: unknown pipeline arguments {sorted(unknown)}{did_you_mean(first, PIPELINE_ARGS)}"
        )

    def decorate(graph_fn: Callable) -> Callable:
        params = inspect.signature(graph_fn).parameters
        shadowed = set(params) & set(PIPELINE_ARGS)
        to_function = set(params)
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            to_function |= set(DECLARATIONS)

        converted: list[Callable] = []  # a list, not functools.cache: `create` pickles by value

        def rewritten() -> Callable:
            if not converted:
                converted.append(autograph.convert(graph_fn))
            return converted[0]

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
            conditionals = options.pop("enable_conditionals", False)
            if not isinstance(conditionals, bool):
                raise ArgumentError(f"enable_conditionals must be a bool, got {conditionals!r}")
            if options.pop("debug", False):
                raise ArgumentError("debug=True is not supported by raypipe (only False)")
            try:
                inspect.signature(graph_fn).bind(*args, **kwargs)
            except TypeError as exc:
                strange = [k for k in kwargs if k not in params and repr(k) in str(exc)]
                hint = did_you_mean(strange[0], [*params, *PIPELINE_ARGS]) if strange else ""
                raise ArgumentError(f"{graph_fn.__name__}: {exc}{hint}") from None
            function = rewritten() if conditionals else graph_fn
            return _FunctionPipeline(function, args, kwargs, **options)

        create.pipeline_defaults = dict(defaults)
        return create

    return decorate(fn) if fn is not None else decorate


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


#: DALI's ``nvidia.dali.pipeline.experimental``, importable as ``raypipe.pipeline.experimental``:
#: its ``pipeline_def`` is this module's (DALI's adds a debug mode, which raypipe does not have).
experimental = types.ModuleType(f"{__name__}.experimental", "DALI's pipeline.experimental: pipeline_def.")
experimental.pipeline_def = pipeline_def
sys.modules[experimental.__name__] = experimental
