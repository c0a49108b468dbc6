"""The staged executor: CPU, Mixed and GPU stages working on different batches at once.

* CPU stage: every sample of a batch runs through the host subgraph (cpu
  operators and the host part of mixed decoders) on a pool of ``num_threads``
  threads; up to ``cpu_size`` batches are in flight.
* Mixed stage: gathers a batch's samples, drops skipped ones, and moves what the
  GPU stage needs to the device (pinned staging buffer + CUDA stream on a GPU).
* GPU stage: runs batched operators; up to ``gpu_size`` batches wait for it.

Queues between the stages are bounded, so prefetching never runs away: besides
the batch the caller holds, at most ``cpu_size + gpu_size + 2`` batches exist
(``cpu_size`` in the CPU stage, ``gpu_size`` waiting for the GPU stage, one in
it and one finished).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .backend import DeviceContext
from .batch_spec import BatchSpec
from .errors import DecodeError, SampleError
from .graph import DataNode, StagedGraph
from .keyed_random import SampleContext
from .operator import Skip
from .tensor_list import TensorList

_POLL = 0.05


@dataclass(frozen=True)
class SkippedSample:
    """A sample dropped by an operator with ``on_error="skip"``."""

    epoch: int
    sample_index: int
    source: str
    reason: str


@dataclass
class BatchResult:
    """One finished batch: the outputs and where they came from."""

    outputs: tuple[TensorList, ...]
    spec: BatchSpec
    sample_indices: list[int]
    is_pad: list[bool]
    skipped: list[SkippedSample] = field(default_factory=list)


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


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
        source_of=lambda index: f"sample {index}",
    ):
        self._graph = graph
        self._seed = seed
        self._num_threads = num_threads
        self._cpu_size = cpu_size
        self._gpu_size = gpu_size
        self._device = device
        self._source_of = source_of
        self._threads: list[threading.Thread] = []
        self._pool: ThreadPoolExecutor | None = None

    def start(self, specs: Iterator[BatchSpec]) -> None:
        """Begin processing ``specs`` in the background."""
        self.stop()
        self._stop = threading.Event()
        self._finished = False
        self._slots = threading.Semaphore(self._cpu_size)
        self._pending: queue.Queue = queue.Queue()
        self._device_q: queue.Queue = queue.Queue(self._gpu_size)
        self._out_q: queue.Queue = queue.Queue(1)
        self._pool = ThreadPoolExecutor(self._num_threads, thread_name_prefix="raypipe-cpu")
        self._threads = [
            threading.Thread(target=self._dispatch, args=(iter(specs),), name="raypipe-dispatch", daemon=True),
            threading.Thread(target=self._mixed_stage, name="raypipe-mixed", daemon=True),
            threading.Thread(target=self._gpu_stage, name="raypipe-gpu", daemon=True),
        ]
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
        item = self._get(self._out_q)
        if isinstance(item, _Failure):
            raise item.error
        if item is None:
            self._finished = True
            raise StopIteration
        return item

    def stop(self) -> None:
        """Stop the stages and drop prefetched batches."""
        if not self._threads:
            return
        self._stop.set()
        for t in self._threads:
            t.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._threads = []

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

    def _dispatch(self, specs: Iterator[BatchSpec]) -> None:
        try:
            for spec in specs:
                while not self._slots.acquire(timeout=_POLL):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                futures = [
                    self._pool.submit(self._process_sample, SampleContext(self._seed, spec.epoch, int(i)))
                    for i in spec.sample_indices
                ]
                self._pending.put((spec, futures))
        except BaseException as exc:
            self._pending.put(_Failure(exc))
        self._pending.put(None)

    def _process_sample(self, ctx: SampleContext) -> dict[DataNode, Any] | SkippedSample:
        env: dict[DataNode, Any] = {}
        for node in self._graph.host_nodes:
            inputs = [env[d] for d in node.inputs]
            args = {k: env[d] for k, d in node.arg_inputs.items()}
            try:
                out = node.op.run_sample(inputs, args, ctx)
            except Exception as exc:
                raise self._sample_error(node.label, ctx, exc) from exc
            if isinstance(out, Skip):
                return SkippedSample(ctx.epoch, ctx.sample_index, self._source_of(ctx.sample_index), out.reason)
            if len(node.outputs) == 1:
                env[node.outputs[0]] = out
            else:
                for d, value in zip(node.outputs, out):
                    env[d] = value
        return {d: env[d] for d in self._graph.host_results}

    def _sample_error(self, label: str, ctx: SampleContext, exc: Exception) -> SampleError:
        source = self._source_of(ctx.sample_index)
        cls = DecodeError if isinstance(exc, DecodeError) else SampleError
        return cls(
            f"operator {label} failed on sample {ctx.sample_index} ({source}), epoch {ctx.epoch}: {exc}",
            sample_index=ctx.sample_index,
            source=source,
        )

    def _mixed_stage(self) -> None:
        self._device.activate()
        while not self._stop.is_set():
            item = self._get_or_stop(self._pending)
            if item is _STOPPED:
                return
            if item is None:
                self._put(self._device_q, None)
                return
            if isinstance(item, _Failure):
                self._put(self._device_q, item)
                continue
            spec, futures = item
            try:
                results = [f.result() for f in futures]
                batch = self._assemble(spec, results)
            except BaseException as exc:
                batch = _Failure(exc)
            delivered = self._put(self._device_q, batch)
            self._slots.release()
            if not delivered:
                return

    def _assemble(self, spec: BatchSpec, results: list) -> tuple:
        kept = [r for r in results if not isinstance(r, SkippedSample)]
        skipped = [r for r in results if isinstance(r, SkippedSample)]
        positions = [i for i, r in enumerate(results) if not isinstance(r, SkippedSample)]
        host = {d: [r[d] for r in kept] for d in self._graph.host_results}
        device = {}
        for d in self._graph.to_device:
            if not self._device.on_gpu:
                device[d] = host[d]
                continue
            tl = TensorList.from_samples(host[d], "cpu")
            dense = tl.is_dense_tensor() and len(tl) > 0
            device[d] = (
                list(self._device.to_device(tl.as_tensor())) if dense else [self._device.to_device(s) for s in host[d]]
            )
        return spec, positions, skipped, host, device

    def _gpu_stage(self) -> None:
        self._device.activate()
        xp = self._device.xp
        while not self._stop.is_set():
            item = self._get_or_stop(self._device_q)
            if item is _STOPPED:
                return
            if item is None:
                self._put(self._out_q, None)
                return
            if isinstance(item, _Failure):
                self._put(self._out_q, item)
                continue
            try:
                result = self._run_gpu(xp, *item)
            except BaseException as exc:
                result = _Failure(exc)
            if not self._put(self._out_q, result):
                return

    def _run_gpu(self, xp, spec: BatchSpec, positions, skipped, host, device) -> BatchResult:
        indices = [int(spec.sample_indices[p]) for p in positions]
        ctxs = [SampleContext(self._seed, spec.epoch, i) for i in indices]
        env = dict(device)
        for node in self._graph.gpu_nodes:
            inputs = [env[d] for d in node.inputs]
            args = {k: host[d] for k, d in node.arg_inputs.items()}
            try:
                out = node.op.run_batch(xp, inputs, args, ctxs) if ctxs else _empty(len(node.outputs))
            except Exception as exc:
                raise SampleError(
                    f"operator {node.label} failed on the batch of samples {indices[:8]}"
                    f"{'...' if len(indices) > 8 else ''}, epoch {spec.epoch}: {exc}"
                ) from exc
            if len(node.outputs) == 1:
                env[node.outputs[0]] = out
            else:
                for d, value in zip(node.outputs, out):
                    env[d] = value
        self._device.synchronize()
        outputs = []
        for d in self._graph.outputs:
            layout = self._graph.layouts.get(d, "")
            if d.device == "gpu":
                outputs.append(TensorList.from_samples(env[d], "gpu", layout, xp))
            else:
                outputs.append(TensorList.from_samples(host[d], "cpu", layout))
        real = spec.num_real
        return BatchResult(
            outputs=tuple(outputs),
            spec=spec,
            sample_indices=indices,
            is_pad=[p >= real for p in positions],
            skipped=skipped,
        )

    def _get_or_stop(self, q: queue.Queue) -> Any:
        while not self._stop.is_set():
            try:
                return q.get(timeout=_POLL)
            except queue.Empty:
                continue
        return _STOPPED


_STOPPED = object()


def _empty(num_outputs: int) -> list | tuple[list, ...]:
    return [] if num_outputs == 1 else tuple([] for _ in range(num_outputs))
