"""The engine under a :class:`~raypipe.pipeline.Pipeline`: its staged graph on a device and the
executor that runs it, with what the distributed service drives and nothing of DALI's surface.

A pipeline actor drives it with explicit batches (:meth:`Engine.drive`), shares its CPU stage with
CPU helpers (:meth:`Engine.set_cpu_helpers`) and hands it a shared-memory allocator
(:meth:`Engine.set_host_allocator`); a CPU helper only builds CPU stages (:meth:`Engine.cpu_stage`).
The executor is made when batches are first driven, so an engine that only builds CPU stages starts
no executor. The executor's threads never reference the engine: a dropped engine (with its
pipeline) is freed at once and a finalizer stops them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from . import device_check
from .aligned_readers import check_aligned
from .backend import DeviceContext
from .batch_buffers import Allocator
from .batch_spec import BatchSpec
from .blas_threads import limit_host_blas
from .cpu_stage import CpuStage
from .errors import ArgumentError, PipelineDefinitionError
from .executor import BatchResult, Executor
from .gpu_decode import nvimgcodec_available
from .graph import Graph, StagedGraph, defining, placed, stage
from .offload import RemoteWorker
from .profile import Profile
from .stage_threads import cpu_stage_threads
from .types import Constant, ScalarConstant

#: Defines a pipeline's graph: wires operators and returns the outputs (``define_graph``).
GraphFunction = Callable[[], Any]


def staged_graph(define: GraphFunction, on_gpu: bool, decode_on_gpu: bool, batch_size: int = 1) -> StagedGraph:
    """Define the graph, stage it with this split and open its readers, checking that several read
    in step (:func:`~raypipe.aligned_readers.check_aligned`). Operators that need the
    pipeline's batch size (``bind_batch_size``: external sources asked for samples by index) get it."""
    graph = Graph()
    with defining(graph):
        outputs = define()
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        outputs = [constant_output(out) for out in outputs]
    staged = stage(graph, outputs, on_gpu=on_gpu, decode_on_gpu=decode_on_gpu)
    for node in graph.nodes:
        bind = getattr(node.op, "bind_batch_size", None)
        if bind is not None:
            bind(batch_size)
    for reader in staged.readers:
        reader.op.prepare()
    check_aligned(staged.readers)
    return staged


def constant_output(out: Any) -> Any:
    """A pipeline output as DALI takes it: a number, array or list becomes a ``constant`` (int32 and
    float32 as ``types.Constant`` makes them); anything else is left for :func:`stage` to judge."""
    out = placed(out)
    if isinstance(out, ScalarConstant):
        return Constant(out.value, dtype=out.dtype, device="cpu")
    if isinstance(out, (int, float, np.number, np.ndarray, list)) and not isinstance(out, bool):
        return Constant(out, device="cpu")
    return out


class Engine:
    """A graph staged for ``device`` (defined by ``define``) and its executor, made on first use.

    ``seed`` keys every sample's randomness; ``num_threads`` run the CPU stage, with up to
    ``cpu_size`` batches in it and ``gpu_size`` waiting for the GPU stage; ``batch_size`` is the
    pipeline's (what operators asked for samples by index place them with)."""

    def __init__(
        self,
        define: GraphFunction,
        device: DeviceContext,
        *,
        seed: int,
        num_threads: int,
        cpu_size: int,
        gpu_size: int,
        batch_size: int = 1,
    ):
        self.device = device
        self.seed = seed
        self.num_threads = num_threads
        self.cpu_size = cpu_size
        self.gpu_size = gpu_size
        self._define = define
        self._split = {
            "on_gpu": device.batched,
            "decode_on_gpu": nvimgcodec_available(device.device_id)
            if device.on_gpu
            else device.batched and device_check.simulated_decode(),
        }
        self._batch_size = batch_size
        self.staged = staged_graph(define, **self._split, batch_size=batch_size)
        #: The CPU stage's threads (fewer than ``num_threads`` where the GPU decodes: :mod:`raypipe.stage_threads`).
        self.cpu_threads = cpu_stage_threads(num_threads, bool(self.staged.deferred))
        self._executor: Executor | None = None
        self._profile: Profile | None = None
        self._workers: tuple[dict[str, RemoteWorker], float] = ({}, 60.0)
        self._allocator: tuple[Allocator, int] | None = None

    @property
    def executor(self) -> Executor | None:
        """The executor running the staged graph; None until batches are driven."""
        return self._executor

    @property
    def running(self) -> bool:
        """True while the executor's stages run (from :meth:`drive` until :meth:`close`)."""
        return self._executor is not None and self._executor.running

    def cpu_split(self) -> dict[str, bool]:
        """Where this engine's CPU stage ends (``on_gpu``: a GPU runs the gpu operators;
        ``decode_on_gpu``: mixed decoders decode there): a CPU helper builds the same stage."""
        return dict(self._split)

    def preload(self) -> None:
        """Import what the CPU stage's operators load on their first call (torch for host resizing
        and FFTs: a second or more): a pipeline actor or CPU helper does it in the background while
        its rank gets ready, instead of inside its first batch."""
        for node in self.staged.host_nodes:
            node.op.preload()

    def cpu_stage(self, split: dict[str, bool]) -> CpuStage:
        """The CPU stage of this engine's graph as an engine with ``split`` (:meth:`cpu_split`) has
        it: what a CPU helper runs for that engine's samples. Needs no device and makes no executor."""
        limit_host_blas()
        staged = staged_graph(self._define, **split, batch_size=self._batch_size)
        reader = staged.reader.op if staged.reader is not None else None
        return CpuStage(staged, self.seed, reader.source_of if reader is not None else None)

    def drive(self, specs: Iterable[BatchSpec], sequential: bool = False, replace_skipped: bool = True) -> None:
        """Run ``specs`` from now on, dropping batches prefetched for earlier ones; :meth:`next`
        returns them in order and raises StopIteration after the last. ``sequential`` says the
        batches read the data mostly in order (a buffer shuffle, or none): container readers then
        read whole extents ahead instead of one record at a time. With ``replace_skipped`` every
        batch keeps its size: a sample skipped by an ``on_error="skip"`` operator is replaced by a
        kept sample of its batch (:mod:`raypipe.replacement`), flagged as padding in the result;
        without it (a pipeline reading its own order, as DALI) the batch is shorter."""
        self._made_executor().start(iter(specs), sequential=sequential, replace_skipped=replace_skipped)

    def next(self) -> BatchResult:
        """The next driven batch; re-raises a sample's error; StopIteration after the last."""
        if not self.running:
            raise PipelineDefinitionError("engine: no batches are driven; call drive() first")
        return self._executor.next()

    def set_cpu_helpers(self, workers: dict[str, RemoteWorker], unit_timeout_s: float = 60.0) -> None:
        """Share the CPU stage with remote workers (``{name: (epoch, indices) -> Future}``, see
        :mod:`raypipe.offload`); ``{}`` keeps it local. A unit a worker has not returned after
        ``unit_timeout_s`` goes to another."""
        self._workers = (workers, unit_timeout_s)
        if self._executor is not None:
            self._executor.set_remote_workers(workers, unit_timeout_s)

    def set_host_allocator(self, allocate: Allocator, spare: int = 0) -> None:
        """Make the host batch arrays (those operators write samples into, and large stacked
        outputs) with ``allocate(shape, dtype)`` from the next batch on, keeping ``spare`` more of
        them for reuse than the queues need. A pipeline actor passes its shared-memory allocator
        (:mod:`actors.host_ring`) and as many spares as its rank may hold batches, so finished
        batches reach the rank uncopied."""
        self._allocator = (allocate, spare)
        if self._executor is not None:
            self._executor.set_allocator(allocate, spare)

    def offload_stats(self) -> dict[str, Any]:
        """Units of samples run locally and by each CPU helper, reassignments, bytes received."""
        return self._executor.offload_stats() if self._executor is not None else {}

    def queue_stats(self) -> dict[str, dict[str, int]]:
        """How full the executor's queues are now (see :meth:`raypipe.executor.Executor.queue_stats`);
        all empty before batches are driven."""
        if self._executor is not None:
            return self._executor.queue_stats()
        sizes = {"cpu": self.cpu_size, "gpu": self.gpu_size, "ready": 1}
        return {name: {"used": 0, "size": size} for name, size in sizes.items()}

    def enable_profiling(self) -> None:
        """Collect wall time per stage and per operator from now on (see :mod:`raypipe.profile`)."""
        self._profile = Profile()
        if self._executor is not None:
            self._executor.profile = self._profile

    def profile(self) -> dict[str, Any]:
        """What :meth:`enable_profiling` collected: per (stage, operator) calls, total seconds and
        mean ms, and the executor's per-sample overhead in microseconds."""
        if self._profile is None:
            raise ArgumentError("pipeline: call enable_profiling() before profile()")
        return self._profile.report()

    def memory_stats(self) -> dict[str, Any]:
        """The device's memory (see :meth:`raypipe.backend.DeviceContext.memory_stats`)."""
        return self.device.memory_stats()

    def close(self) -> None:
        """Stop the executor's threads and release its cached device memory and the readers' open
        files; idempotent, and :meth:`drive` starts them again."""
        if self._executor is not None:
            self._executor.close()
        else:
            for reader in self.staged.readers:
                reader.op.close()

    def _made_executor(self) -> Executor:
        """The executor, made now if it was not, with the helpers, allocator and profile set so far."""
        if self._executor is None:
            reader = self.staged.reader.op if self.staged.reader is not None else None
            executor = Executor(
                self.staged,
                seed=self.seed,
                num_threads=self.num_threads,
                cpu_threads=self.cpu_threads.threads,
                cpu_size=self.cpu_size,
                gpu_size=self.gpu_size,
                device=self.device,
                source_of=reader.source_of if reader is not None else None,
            )
            executor.profile = self._profile
            executor.set_remote_workers(*self._workers)
            if self._allocator is not None:
                executor.set_allocator(*self._allocator)
            weakref.finalize(self, executor.close)
            self._executor = executor
        return self._executor
