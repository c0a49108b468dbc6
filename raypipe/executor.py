"""The staged executor: CPU, Mixed and GPU stages working on different batches at once.

* CPU stage: every sample of a batch runs through the host subgraph (cpu
  operators and the host part of mixed decoders; without a GPU, every operator
  that can run per sample) on a pool of ``cpu_threads`` threads; up to
  ``cpu_size`` batches are in flight.
* Mixed stage: gathers a batch's samples, drops skipped ones, decodes deferred
  decoders' batches on the GPU (nvImageCodec) and moves what the GPU stage needs
  to the device (one asynchronous copy from a reused pinned buffer), all on its
  copy stream, then records a CUDA event.
* GPU stage: makes its compute stream wait for that event and runs the batched
  operators on it; up to ``gpu_size`` batches wait for it. The batch's outputs are
  handed out once an event recorded after its kernels has passed: the host waits
  only there, never between operators or stages.

A skipped sample leaves its batch shorter, or, when started with ``replace_skipped``
(a service's batches), its slot is filled by position with a kept sample
(:func:`raypipe.replacement.fill_skipped`), written into the batch arrays the
executor allocated, so a whole batch stays in its allocator's memory.

Queues between the stages are bounded, so prefetching never runs away: besides
the batch the caller holds, at most ``cpu_size + gpu_size + 2`` batches exist
(``cpu_size`` in the CPU stage, ``gpu_size`` waiting for the GPU stage, one in
it and one finished).

Lifetime: the threads hold the executor, never its owner, so a dropped
:class:`~raypipe.engine.Engine` (with its pipeline) is collected and its finalizer stops them.
Live executors sit in a weak registry that an exit hook stops (as DALI does),
so interpreter exit neither waits on nor races with running stages.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import DeviceContext
from .batch_buffers import Allocator, BatchOutputs, BufferPool
from .batch_spec import BatchSpec
from .blas_threads import limit_host_blas
from .cpu_stage import CpuStage, SkippedSample, numbered_sample
from .errors import DecodeError, DeviceError, SampleError
from .gpu_decode import GpuImageDecoder, code_stream_maker, code_streams_in, decode_into_buffer, decoder_count
from .graph import DataNode, StagedGraph
from .kernels.launch import Packed
from .keyed_random import SampleContext
from .offload import Offload, RemoteWorker, Unit
from .profile import Profile
from .replacement import Replacement, replacement
from .sample_contexts import SampleContexts
from .tensor_list import TensorList

_POLL = 0.05
READ_AHEAD_SAMPLES = 2048  # how far ahead of the CPU stage the reader hears of the coming samples
READ_AHEAD_BATCHES = 64  # and at most this many batches ahead (tiny batches: not hundreds of epochs)
_LIVE: weakref.WeakSet[Executor] = weakref.WeakSet()
_STAGE_THREAD = threading.local()


def _mark_stage_thread() -> None:
    """Flag the calling thread as a stage or CPU-pool thread, which ``stop()`` must not join."""
    _STAGE_THREAD.active = True


def _stop_live_executors() -> None:
    """Stop every executor still running when the interpreter exits.

    Registered with threading's exit hooks, not ``atexit``: those run first, and later-registered
    ones before ``concurrent.futures``' own, which joins the CPU pools only after they have decoded
    every queued sample."""
    for executor in list(_LIVE):
        executor.stop()


threading._register_atexit(_stop_live_executors)


@dataclass
class BatchResult:
    """One finished batch: the outputs and where they came from."""

    outputs: tuple[TensorList, ...]
    spec: BatchSpec
    sample_indices: list[int]
    is_pad: list[bool]
    skipped: list[SkippedSample] = field(default_factory=list)
    done: Any = field(default=None, repr=False, compare=False)  # CUDA event after the batch's kernels


@dataclass(frozen=True)
class _InCpuStage:
    """A batch from the dispatcher to the Mixed stage: its spec, the futures of its chunks (or
    offloaded units), and the batch arrays its samples are written into."""

    spec: BatchSpec
    futures: list[Future]
    outputs: BatchOutputs


@dataclass(frozen=True)
class _Staged:
    """A batch from the Mixed stage to the GPU stage: the positions of its kept samples, its
    skipped samples and how their slots are filled (None: they are not), the host results by data
    node, the device inputs, the event after the copy-stream work that made them, and the batch
    arrays."""

    spec: BatchSpec
    positions: list[int]
    skipped: list[SkippedSample]
    filling: Replacement | None
    host: dict[DataNode, list]
    device: dict[DataNode, Any]
    ready: Any
    outputs: BatchOutputs


class _Failure:
    """An error on its way from a stage to ``next()``."""

    def __init__(self, error: BaseException):
        self.error = error


def _attempt(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or a :class:`_Failure` with what it raised.

    The error's traceback keeps this frame and, through it, the caller's: neither may hold
    the failure in a variable, or the error, and the pipeline frame it is re-raised through,
    would sit in a reference cycle that only the garbage collector frees."""
    try:
        return fn(*args)
    except BaseException as exc:
        return _Failure(exc)


class Executor:
    """Runs a staged graph over a stream of :class:`BatchSpec` with bounded prefetch."""

    def __init__(
        self,
        graph: StagedGraph,
        *,
        seed: int,
        num_threads: int,
        cpu_size: int,
        gpu_size: int,
        device: DeviceContext,
        source_of: Callable[[int], str] | None = None,
        cpu_threads: int | None = None,
    ):
        self._graph = graph
        self._seed = seed
        self._num_threads = num_threads  # nvImageCodec's host threads
        self._cpu_threads = num_threads if cpu_threads is None else cpu_threads
        self._cpu_size = cpu_size
        self._gpu_size = gpu_size
        self._device = device
        self._stage = CpuStage(graph, seed, source_of)
        self._source_of = self._stage.source_of
        self._threads: list[threading.Thread] = []
        self._pool: ThreadPoolExecutor | None = None
        self._decoder: GpuImageDecoder | None = None
        self._decoders = decoder_count() if graph.deferred else 1  # a bad setting fails here, not on batch 1
        #: Whether the CPU stage's threads make the deferred samples' code streams (else the Mixed stage).
        self._code_streams_here = bool(graph.deferred) and code_streams_in() == "cpu"
        self._code_stream = code_stream_maker() if self._code_streams_here else None
        if graph.deferred:
            decode_into_buffer()
        self._buffers = BufferPool(self._pool_capacity(0))
        self._readers = [node.op for node in graph.readers]
        self._profile: Profile | None = None
        self._offload: Offload | None = None

    @property
    def profile(self) -> Profile | None:
        """Where wall time per stage and operator is collected (None: not collected)."""
        return self._profile

    @profile.setter
    def profile(self, profile: Profile | None) -> None:
        self._profile = self._stage.profile = profile

    def set_remote_workers(self, workers: dict[str, RemoteWorker], unit_timeout_s: float = 60.0) -> None:
        """Share the CPU stage with ``workers`` (see :mod:`raypipe.offload`); an empty dict keeps
        it local. Takes effect from the next batch queued."""
        if self._offload is None:
            if not workers:
                return
            self._offload = Offload(self._stage, unit_timeout_s=unit_timeout_s)
            if self._threads:
                self._offload.use_local_pool(self._pool, self._stop)
        self._offload.set_workers(workers)

    def offload_stats(self) -> dict[str, Any]:
        """Units of samples run here and by each remote worker (see :meth:`Offload.stats`)."""
        return self._offload.stats() if self._offload is not None else {}

    def _pool_capacity(self, spare: int) -> int:
        """Batch arrays kept for reuse: one per batch the queues hold, four more (the caller's and
        the batches on their way), and ``spare`` for batches held elsewhere."""
        return self._cpu_size + self._gpu_size + 4 + spare

    def set_allocator(self, allocate: Allocator, spare: int = 0) -> None:
        """Make host batch arrays with ``allocate`` from the next one on, keeping ``spare`` more of
        them for reuse (see :meth:`raypipe.engine.Engine.set_host_allocator`)."""
        self._buffers.set_allocator(allocate, self._pool_capacity(spare))

    def queue_stats(self) -> dict[str, dict[str, int]]:
        """How full each bounded queue is now, ``{"used", "size"}`` in batches: ``cpu`` (batches in
        the CPU stage, up to ``cpu_size``), ``gpu`` (assembled, waiting for the GPU stage) and
        ``ready`` (finished, waiting for the caller). Full queues before a stage say it is the
        slow one; empty ones after it say the same."""
        running = bool(self._threads)
        used = {
            "cpu": self._dispatched - self._gathered if running else 0,
            "gpu": self._device_q.qsize() if running else 0,
            "ready": self._out_q.qsize() if running else 0,
        }
        sizes = {"cpu": self._cpu_size, "gpu": self._gpu_size, "ready": 1}
        return {name: {"used": used[name], "size": sizes[name]} for name in sizes}

    @property
    def device(self) -> DeviceContext:
        """Where the Mixed and GPU stages run."""
        return self._device

    def start(self, specs: Iterator[BatchSpec], *, sequential: bool = True, replace_skipped: bool = False) -> None:
        """Begin processing ``specs`` in the background. ``sequential``: the batches read the data
        mostly in order (the reader hears it with :meth:`will_read`, and container readers read
        ahead); ``replace_skipped``: fill skipped samples' slots with kept samples of the batch
        instead of leaving the batch shorter."""
        self.stop()
        self._stop = threading.Event()
        watch = getattr(specs, "watch_stop", None)  # a spec source that waits (fed external sources) polls it
        if watch is not None:
            watch(self._stop)
        self._finished = False
        self._replace_skipped = replace_skipped
        self._slots = threading.Semaphore(self._cpu_size)
        # batches into and out of the CPU stage, each counted by one thread (the dispatcher, the Mixed stage)
        self._dispatched = self._gathered = 0
        self._pending: queue.Queue = queue.Queue()
        self._device_q: queue.Queue = queue.Queue(self._gpu_size)
        self._out_q: queue.Queue = queue.Queue(1)
        limit_host_blas()
        self._pool = ThreadPoolExecutor(
            self._cpu_threads, thread_name_prefix="raypipe-cpu", initializer=_mark_stage_thread
        )
        if self._offload is not None:
            self._offload.use_local_pool(self._pool, self._stop)
        self._threads = [
            threading.Thread(
                target=self._dispatch, args=(iter(specs), sequential), name="raypipe-dispatch", daemon=True
            ),
            threading.Thread(target=self._mixed_stage, name="raypipe-mixed", daemon=True),
            threading.Thread(target=self._gpu_stage, name="raypipe-gpu", daemon=True),
        ]
        _LIVE.add(self)
        for t in self._threads:
            t.start()

    @property
    def running(self) -> bool:
        """True once started and until stopped."""
        return bool(self._threads)

    def next(self) -> BatchResult:
        """The next finished batch; re-raises a sample's error; StopIteration when specs run out."""
        if self._finished:
            raise StopIteration
        began = time.perf_counter()
        item = self._get(self._out_q)
        if self.profile is not None:
            self.profile.add("caller", "wait for a batch", time.perf_counter() - began)
        if isinstance(item, _Failure):
            try:
                raise item.error
            finally:
                del item  # this frame joins the error's traceback: it must not hold the error
        if item is None:
            self._finished = True
            raise StopIteration
        if item.done is not None:
            item.done.synchronize()
        return item

    def stop(self) -> None:
        """Stop the stages and drop prefetched batches; idempotent.

        Queued samples are cancelled, so this waits for at most the samples being decoded
        and one poll period. Called from a stage thread (a finalizer run by the garbage
        collector there), it only signals: the threads end by themselves.
        """
        threads, self._threads = self._threads, []
        if not threads:
            return
        _LIVE.discard(self)
        self._stop.set()
        if self._offload is not None:
            self._offload.cancel_all()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if getattr(_STAGE_THREAD, "active", False):
            return
        for t in threads:
            t.join()
        self._pool.shutdown(wait=True)
        # prefetched batches and errors (whose tracebacks hold executor frames) go with the queues
        self._pending, self._device_q, self._out_q = queue.Queue(), queue.Queue(), queue.Queue(1)

    def close(self) -> None:
        """:meth:`stop`, then release the GPU decoder and the device's cached memory and pinned
        buffers; ``start()`` allocates them again. From a stage thread it only stops: the resources
        then go with the executor."""
        self.stop()
        if getattr(_STAGE_THREAD, "active", False):
            return
        if self._decoder is not None:
            self._decoder.close()
            self._decoder = None
        self._buffers.clear()
        if self._offload is not None:
            self._offload.close()
            self._offload = None
        for reader in self._readers:
            reader.close()
        self._device.release()

    def _put(self, q: queue.Queue, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                q.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, q: queue.Queue) -> Any:
        while True:
            try:
                return q.get(timeout=_POLL)
            except queue.Empty:
                if self._stop.is_set():
                    raise RuntimeError("the pipeline was stopped") from None

    def _dispatch(self, specs: Iterator[BatchSpec], sequential: bool) -> None:
        _mark_stage_thread()
        # a spec source that pairs each batch with data fed beside it (external sources beside a
        # reader) admits it as it enters the CPU stage, after the reader heard of it: False ends them
        admit = getattr(specs, "admit", None)
        try:
            for spec in self._announced(specs, sequential):
                if admit is not None and not admit(spec):
                    break
                while not self._slots.acquire(timeout=_POLL):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                self._dispatched += 1
                self._submit(spec)
        except BaseException as exc:
            self._pending.put(_Failure(exc))
        self._pending.put(None)

    def _announced(self, specs: Iterator[BatchSpec], sequential: bool) -> Iterator[BatchSpec]:
        """``specs``, each announced to every reader (:meth:`will_read`) about ``READ_AHEAD_SAMPLES``
        samples (at most ``READ_AHEAD_BATCHES`` batches) before it is processed, so that a
        container reader's sequential reads run ahead of the CPU stage instead of stalling it."""
        if not self._readers:
            yield from specs
            return
        ahead: collections.deque[BatchSpec] = collections.deque()
        announced = 0  # samples of the specs in ``ahead``
        for spec in specs:
            for reader in self._readers:
                reader.will_read(spec.sample_indices, sequential)
            ahead.append(spec)
            announced += len(spec.sample_indices)
            if announced > READ_AHEAD_SAMPLES or len(ahead) > READ_AHEAD_BATCHES:
                announced -= len(ahead[0].sample_indices)
                yield ahead.popleft()
        while ahead:
            yield ahead.popleft()

    def _submit(self, spec: BatchSpec) -> None:
        """Queue a batch's samples on the CPU pool in chunks (a call of its own so that this thread
        keeps no reference to the futures, and to the errors they may hold, while it waits for a slot).

        A chunk of a few samples per task, not one task per sample: each task costs the pool's
        queue and a future under the GIL, which the CPU threads otherwise contend for."""
        outputs = BatchOutputs(self._buffers, len(spec.sample_indices))
        seed, epoch, batch = self._seed, spec.epoch, spec.index
        ctxs = [SampleContext(seed, epoch, i, batch, j) for j, i in enumerate(spec.sample_indices.tolist())]
        step = chunk_size(len(ctxs), self._cpu_threads, cheap=self._stage.by_node)
        if self._offload is not None and self._offload.active:
            units = [
                Unit(spec.epoch, ctxs[first : first + step], first, outputs) for first in range(0, len(ctxs), step)
            ]
            for unit in units:
                self._offload.put(unit)
                self._pool.submit(self._offload.run_local, self._stop)
            self._pending.put(_InCpuStage(spec, [u.future for u in units], outputs))
            return
        run = self._run_chunk if self._code_streams_here else self._stage.run_chunk
        futures = [
            self._pool.submit(run, ctxs[first : first + step], first, outputs, self._stop)
            for first in range(0, len(ctxs), step)
        ]
        self._pending.put(_InCpuStage(spec, futures, outputs))

    def _run_chunk(self, ctxs: list[SampleContext], first: int, outputs: BatchOutputs, stop: threading.Event) -> list:
        """A chunk through the CPU stage, then its deferred samples' nvImageCodec code streams, made
        here: each gives up the GIL twice, which costs the Mixed stage, the GPU pipeline's bottleneck,
        a wait each time it takes the GIL back (``RAYPIPE_GPU_CODE_STREAMS=mixed`` leaves them to it)."""
        results = self._stage.run_chunk(ctxs, first, outputs, stop)
        began = time.perf_counter()
        for result in results:
            if not isinstance(result, SkippedSample):
                for d in self._graph.deferred:
                    result[d] = result[d].with_code_stream(self._code_stream)
        if self.profile is not None:
            self.profile.add("cpu", "code streams for the GPU decoder", time.perf_counter() - began, calls=len(results))
        return results

    def _mixed_stage(self) -> None:
        _mark_stage_thread()
        with self._device.stage_thread():
            while not self._stop.is_set() and self._mixed_step():
                pass

    def _mixed_step(self) -> bool:
        """Move one batch from the CPU stage to the GPU stage; False ends the stage. One call per batch,
        so this thread holds no delivered batch or error while it waits for the next."""
        item = self._get_or_stop(self._pending)
        if item is _STOPPED:
            return False
        if item is None:
            self._put(self._device_q, None)
            return False
        if isinstance(item, _Failure):
            return self._put(self._device_q, item)
        began = time.perf_counter()
        delivered = self._put(self._device_q, _attempt(self._gather, item))
        if self.profile is not None:
            self.profile.add("mixed", "wait for samples, move the batch", time.perf_counter() - began)
        self._gathered += 1
        self._slots.release()
        return delivered

    def _gather(self, batch: _InCpuStage) -> _Staged | _Failure:
        """Wait for a batch's samples: the first sample's error, or the batch staged for the GPU.
        ``exception()`` hands the error over without raising it through, and so into, this frame."""
        for f in batch.futures:
            if f.exception() is not None:
                return _Failure(f.exception())
        return self._assemble(batch.spec, [r for f in batch.futures for r in f.result()], batch.outputs)

    def _assemble(self, spec: BatchSpec, results: list, outputs: BatchOutputs) -> _Staged:
        """The batch ready for the GPU stage: kept positions, skipped samples, how they are replaced
        (None: not), host results, device inputs and the event after the copy-stream work that made
        them."""
        kept = [(p, r) for p, r in enumerate(results) if not isinstance(r, SkippedSample)]
        skipped = [r for r in results if isinstance(r, SkippedSample)]
        graph = self._graph
        with self._device.on_copy_stream():
            began = time.perf_counter()
            decoded = self._decode_deferred(spec, kept, skipped)
            if decoded and self.profile is not None:
                self.profile.add("mixed", "decode on the GPU (host time)", time.perf_counter() - began)
            host = {d: [r[d] for _, r in kept] for d in graph.host_results}
            for d, samples in host.items():
                _check_one_type(d, samples, [spec.sample_indices[p] for p, _ in kept], self._source_of)
            moved = [d for d in graph.to_device if d not in decoded]
            device = dict(zip(moved, self._device.upload([host[d] for d in moved])))
            device.update(decoded)
            ready = self._device.record_copies()
        positions = [p for p, _ in kept]
        filling = None
        if self._replace_skipped and skipped:  # raises when every sample was skipped
            filling = replacement(spec, positions, [s.sample_index for s in skipped], [s.source for s in skipped])
        return _Staged(spec, positions, skipped, filling, host, device, ready, outputs)

    def _decode_deferred(self, spec: BatchSpec, kept: list[tuple[int, dict]], skipped: list) -> dict[DataNode, list]:
        """Decode the deferred decoders' samples in one batched GPU call per decoder. A sample that
        fails raises its error naming it, or, with ``on_error="skip"``, leaves ``kept`` for ``skipped``."""
        if not self._graph.deferred:
            return {}
        if self._decoder is None:
            hw_load = self._graph.deferred[0].producer.op.hw_decoder_load
            self._decoder = GpuImageDecoder(
                self._device.device_id,
                self._num_threads,
                hw_load,
                self._decoders,
                on_host=not self._device.on_gpu,
                batch_hint=len(spec.sample_indices),
            )
        stream = self._device.copy_stream
        try:
            decoded = {
                d: d.producer.op.decode_on_device(self._decoder, [r[d] for _, r in kept], stream)
                for d in self._graph.deferred
            }
        except DeviceError as exc:
            indices = [int(spec.sample_indices[p]) for p, _ in kept[:8]]
            raise DeviceError(
                f"batch {spec.index} of epoch {spec.epoch} (samples {indices}{'...' if len(kept) > 8 else ''}) "
                f"failed on GPU {self._device.device_id}: {exc}"
            ) from exc
        failed: dict[int, tuple[DataNode, DecodeError]] = {}
        for d, values in decoded.items():
            if isinstance(values, Packed):  # every sample decoded into the batch's buffer
                continue
            for i, value in enumerate(values):
                if isinstance(value, DecodeError):
                    failed.setdefault(i, (d, value))
        if not failed:
            return decoded
        for i, (d, error) in sorted(failed.items()):
            ctx = SampleContext(self._seed, spec.epoch, int(spec.sample_indices[kept[i][0]]))
            if d.producer.op.on_error != "skip":
                raise self._stage.sample_error(d.producer.label, ctx, error) from error
            skipped.append(SkippedSample(ctx.epoch, ctx.sample_index, self._source_of(ctx.sample_index), str(error)))
        kept[:] = [k for i, k in enumerate(kept) if i not in failed]
        return {
            d: [v for i, v in enumerate(values.samples() if isinstance(values, Packed) else values) if i not in failed]
            for d, values in decoded.items()
        }

    def _gpu_stage(self) -> None:
        _mark_stage_thread()
        with self._device.stage_thread():
            xp = self._device.xp
            while not self._stop.is_set() and self._gpu_step(xp):
                pass

    def _gpu_step(self, xp: Any) -> bool:
        """Run one batch through the GPU stage; False ends the stage (one call per batch, as
        :meth:`_mixed_step`)."""
        item = self._get_or_stop(self._device_q)
        if item is _STOPPED:
            return False
        if item is None:
            self._put(self._out_q, None)
            return False
        return self._put(self._out_q, item if isinstance(item, _Failure) else _attempt(self._run_gpu, xp, item))

    def _run_gpu(self, xp: Any, batch: _Staged) -> BatchResult:
        """One batch through the GPU operators: a constant number of Python steps per operator
        whatever the batch size (per-sample identities stay one array, :class:`SampleContexts`).
        The kept samples run; a ``filling`` then puts kept samples in the skipped samples' slots of
        each output."""
        spec, positions, host, filling = batch.spec, batch.positions, batch.host, batch.filling
        kept = np.asarray(positions, dtype=np.int64)
        ctxs = SampleContexts(self._seed, spec.epoch, spec.sample_indices[kept], spec.index, kept)
        indices = ctxs.sample_indices.tolist()
        env = dict(batch.device)
        self._device.wait_for_copies(batch.ready)
        with self._device.on_compute_stream():
            for node in self._graph.gpu_nodes:
                on_host = node.device == "cpu"  # a host batch step: numpy on the gathered host samples
                inputs = [_batch_input(d, env, host, np if on_host else xp) for d in node.inputs]
                args = {k: host[d] for k, d in node.arg_inputs.items()}
                try:
                    called = time.perf_counter()
                    op_xp = np if on_host else xp
                    out = node.op.run_batch(op_xp, inputs, args, ctxs) if ctxs else _empty(len(node.outputs))
                    if self.profile is not None:
                        self.profile.add("gpu", node.label, time.perf_counter() - called)
                except Exception as exc:
                    raise SampleError(
                        f"operator {node.label} failed on the batch of samples {indices[:8]}"
                        f"{'...' if len(indices) > 8 else ''}, epoch {spec.epoch}: {exc}"
                    ) from exc
                results = host if on_host else env
                if len(node.outputs) == 1:
                    results[node.outputs[0]] = out
                else:
                    for d, value in zip(node.outputs, out):
                        results[d] = value
            results = tuple(
                self._output(d, env, host, xp, positions, batch.outputs, filling) for d in self._graph.outputs
            )
        if filling is not None:
            indices, is_pad = filling.sample_indices, filling.is_pad
        else:
            is_pad = (kept >= spec.num_real).tolist()
        return BatchResult(
            outputs=results,
            spec=spec,
            sample_indices=indices,
            is_pad=is_pad,
            skipped=batch.skipped,
            done=self._device.record_compute(),
        )

    def _output(
        self,
        d: DataNode,
        env: dict,
        host: dict,
        xp: Any,
        positions: list[int],
        outputs: BatchOutputs,
        filling: Replacement | None,
    ) -> TensorList:
        """Output ``d`` of a batch: the GPU stage's result for device data, else the host samples
        (gpu-labelled outputs of operators that ran on the host when there is no GPU), as the batch
        array they were written into where they were. With a ``filling``, every slot of the
        planned batch: a skipped sample's slot holds a copy of its kept sample, in that batch array
        (or the pooled array the samples are stacked into), so the batch stays in the pool's memory."""
        layout = self._graph.layouts.get(d, "")
        if d.device == "gpu" and d in env:
            batch = TensorList.from_samples(env[d], "gpu", layout, xp)
            return batch if filling is None else _take(batch, filling.rows, xp)
        if filling is None:
            dense = outputs.dense(d, positions, host[d])
        else:
            dense = outputs.filled(d, positions, host[d], filling.sources)
        if dense is not None:
            return TensorList(dense, d.device, layout)
        samples = host[d] if filling is None else [host[d][r] for r in filling.rows]
        return TensorList.from_samples(samples, d.device, layout, allocate=self._buffers.stack_target)

    def _get_or_stop(self, q: queue.Queue) -> Any:
        while not self._stop.is_set():
            try:
                return q.get(timeout=_POLL)
            except queue.Empty:
                continue
        return _STOPPED


_STOPPED = object()


def _check_one_type(d: DataNode, samples: list, sample_indices: list[int], source_of: Callable[[int], str]) -> None:
    """Refuse a batch whose samples differ in dtype or number of dimensions, as DALI refuses it (a
    batch is one tensor list): one set comprehension, and the samples named only when it fails."""
    if not samples or not isinstance(samples[0], (np.ndarray, np.generic)):  # encoded images for the GPU decoder
        return
    if len({(s.dtype, s.ndim) for s in samples}) <= 1:
        return
    first = samples[0]
    other = next(i for i, s in enumerate(samples) if (s.dtype, s.ndim) != (first.dtype, first.ndim))

    def described(i: int) -> str:
        index, source = sample_indices[i], source_of(sample_indices[i])
        named = source if source == numbered_sample(index) else f"sample {index} ({source})"
        return f"{named} is {samples[i].dtype} of ndim {samples[i].ndim}"

    raise SampleError(
        f"operator {d.name} gave samples of different types in one batch: {described(0)}, "
        f"{described(other)}; every sample of a batch must have one dtype and one number of "
        "dimensions (as in DALI); cast or reshape them in the pipeline",
        sample_index=sample_indices[other],
        source=source_of(sample_indices[other]),
    )


def chunk_size(batch_size: int, num_threads: int, cheap: bool = False) -> int:
    """Samples per CPU-pool task: about four tasks per thread and batch, so threads stay balanced,
    and at most 16 samples, so a stop waits for little. A ``cheap`` stage (microseconds a sample:
    :attr:`CpuStage.by_node`) gives each thread its share of the batch, up to 64 samples, in one
    task: its operators' per-call costs, which dominate there, are spread over more samples."""
    if cheap:
        return max(1, min(64, -(-batch_size // num_threads)))
    return max(1, min(16, -(-batch_size // (4 * num_threads))))


def _take(batch: TensorList, rows: list[int], xp: Any) -> TensorList:
    """The samples ``rows`` of ``batch``, in that order (one gather on the device for a dense batch)."""
    if batch.is_dense_tensor():
        return TensorList(batch.dense_array()[xp.asarray(rows)], batch.device, batch.layout())
    return TensorList([batch.at(r) for r in rows], batch.device, batch.layout())


def _batch_input(d: DataNode, env: dict, host: dict, xp: Any) -> Any:
    """Input ``d`` of a batched operator running with ``xp``: the GPU stage's result, or the host
    samples (moved to the device when a GPU operator consumes a host batch step's output)."""
    if d in env:
        return env[d]
    samples = host[d]
    if xp is np:
        return samples
    return xp.asarray(samples) if isinstance(samples, np.ndarray) else [xp.asarray(s) for s in samples]


def _empty(num_outputs: int) -> list | tuple[list, ...]:
    return [] if num_outputs == 1 else tuple([] for _ in range(num_outputs))
