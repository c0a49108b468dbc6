"""Sharing the CPU stage with remote workers: a batch's chunks of samples go into one queue,
and the executor's CPU threads and remote workers (CPU helper actors) pull from it.

A remote worker is a callable ``(epoch, sample_indices) -> Future`` whose result is the packed
output of :meth:`~raypipe.cpu_stage.CpuStage.run_packed` for those samples. Each worker has a
few *slots* (proxy threads here, each with one unit in flight), so its network round trips
overlap. Whoever is free takes the next unit, which balances the load by itself. A unit whose
worker is lost (:class:`WorkerLost`: dead, restarting, or slower than ``unit_timeout_s``) goes back
to the front of the queue for another worker or a local thread; a duplicate result that arrives
late is dropped. A sample error from a worker is the unit's error, as it would be locally.
Results are the same wherever a unit runs: randomness is keyed per sample.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from .batch_buffers import BatchOutputs
from .cpu_stage import CpuStage
from .errors import RaypipeError
from .keyed_random import SampleContext

RemoteWorker = Callable[[int, Sequence[int]], Future]
_POLL = 0.05
_BACKOFF_S = 1.0


class WorkerLost(RaypipeError):
    """A remote worker died, is restarting or did not answer in time: its unit goes elsewhere."""


@dataclass
class Unit:
    """Consecutive samples of one batch, from batch position ``first``."""

    epoch: int
    ctxs: list[SampleContext]
    first: int
    outputs: BatchOutputs
    future: Future = field(default_factory=Future)


class Offload:
    """The queue of units and the proxy threads of the remote workers."""

    def __init__(self, stage: CpuStage, slots_per_worker: int = 2, unit_timeout_s: float = 60.0):
        self._stage = stage
        self.slots_per_worker = slots_per_worker
        self.unit_timeout_s = unit_timeout_s
        self._queue: collections.deque[Unit] = collections.deque()
        self._cond = threading.Condition()
        self._workers: dict[str, tuple[RemoteWorker, threading.Event, list[threading.Thread]]] = {}
        self._units: dict[int, Unit] = {}
        self._local: tuple[ThreadPoolExecutor, threading.Event] | None = None
        self._stats: dict[str, Any] = {"units_local": 0, "reassigned": 0, "workers": {}}

    @property
    def active(self) -> bool:
        """True while at least one remote worker is attached."""
        return bool(self._workers)

    def set_workers(self, workers: dict[str, RemoteWorker]) -> None:
        """Attach the workers named in ``workers`` and detach the others (their units in flight
        finish or come back)."""
        for name in [n for n in self._workers if n not in workers]:
            _, stop, threads = self._workers.pop(name)
            stop.set()
            for t in threads:
                if t is not threading.current_thread():
                    t.join()
        for name, worker in workers.items():
            if name in self._workers:
                continue
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=self._proxy, args=(name, worker, stop), name=f"raypipe-offload-{name}", daemon=True
                )
                for _ in range(self.slots_per_worker)
            ]
            self._workers[name] = (worker, stop, threads)
            self._stats["workers"].setdefault(name, {"units": 0, "samples": 0, "lost": 0, "bytes": 0, "seconds": 0.0})
            for t in threads:
                t.start()

    def put(self, unit: Unit) -> None:
        """Queue ``unit`` for whoever is free first."""
        with self._cond:
            self._queue.append(unit)
            self._cond.notify()

    def take(self) -> Unit | None:
        """The next queued unit, or None (for a local thread, which never waits)."""
        with self._cond:
            while self._queue:
                unit = self._queue.popleft()
                if not unit.future.done():
                    return unit
            return None

    def run_local(self, stop: threading.Event) -> None:
        """Run the next queued unit, if any, on the calling (local CPU) thread."""
        unit = self.take()
        if unit is None:
            return
        try:
            result = self._stage.run_chunk(unit.ctxs, unit.first, unit.outputs, stop)
        except BaseException as exc:
            _settle(unit.future, exc=exc)
            return
        with self._cond:
            self._stats["units_local"] += 1
        _settle(unit.future, result=result)

    def use_local_pool(self, pool: ThreadPoolExecutor, stop: threading.Event) -> None:
        """A unit that comes back to the queue is also offered to ``pool`` (the local CPU threads,
        until ``stop``), so it does not wait for a worker when the local threads are free."""
        self._local = (pool, stop)

    def cancel_all(self) -> None:
        """Cancel every unit queued or in flight at a worker (the executor is stopping)."""
        with self._cond:
            units = list(self._queue) + list(self._units.values())
            self._queue.clear()
        for unit in units:
            unit.future.cancel()

    def close(self) -> None:
        """Detach every worker (joining their proxy threads) and cancel what is left."""
        self.cancel_all()
        self.set_workers({})

    def stats(self) -> dict[str, Any]:
        """Units run here and by each worker (with samples, bytes received, seconds waited and
        units lost), and units reassigned."""
        return {
            "units_local": self._stats["units_local"],
            "reassigned": self._stats["reassigned"],
            "workers": {n: dict(w) for n, w in self._stats["workers"].items()},
            "attached": sorted(self._workers),
            "slots_alive": sum(t.is_alive() for _, _, threads in self._workers.values() for t in threads),
        }

    def _next(self, stop: threading.Event) -> Unit | None:
        with self._cond:
            while not self._queue:
                if stop.is_set():
                    return None
                self._cond.wait(_POLL)
            unit = self._queue.popleft()
        return None if unit.future.done() else unit

    def _requeue(self, unit: Unit) -> None:
        if unit.future.done():
            return
        with self._cond:
            self._queue.appendleft(unit)
            self._stats["reassigned"] += 1
            self._cond.notify()
        if self._local is not None:
            pool, stop = self._local
            try:
                pool.submit(self.run_local, stop)
            except RuntimeError:  # the pool is shut down: the executor is stopping
                pass

    def _proxy(self, name: str, worker: RemoteWorker, stop: threading.Event) -> None:
        stats = self._stats["workers"][name]
        while not stop.is_set():
            unit = self._next(stop)
            if unit is None:
                continue
            began = time.perf_counter()
            with self._cond:
                self._units[id(unit)] = unit
            try:
                packed = _wait(worker(unit.epoch, [c.sample_index for c in unit.ctxs]), self.unit_timeout_s, stop, unit)
            except WorkerLost:
                with self._cond:
                    stats["lost"] += 1
                self._requeue(unit)
                stop.wait(_BACKOFF_S)
                continue
            except BaseException as exc:
                _settle(unit.future, exc=exc)
                continue
            finally:
                with self._cond:
                    self._units.pop(id(unit), None)
            if packed is None:  # stopped, or the unit was cancelled meanwhile
                self._requeue(unit)
                continue
            with self._cond:
                stats["units"] += 1
                stats["samples"] += len(packed)
                stats["bytes"] += _nbytes(packed)
                stats["seconds"] += time.perf_counter() - began
            _settle(unit.future, result=self._stage.unpack(packed))


def _wait(future: Future, timeout_s: float, stop: threading.Event, unit: Unit) -> list | None:
    """The worker's result; None when stopped or the unit is settled elsewhere; WorkerLost when
    it takes longer than ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return future.result(timeout=_POLL)
        except FutureTimeout:
            if stop.is_set() or unit.future.done():
                return None
            if time.monotonic() > deadline:
                raise WorkerLost(f"no answer within {timeout_s:.0f} s") from None


def _settle(future: Future, result: Any = None, exc: BaseException | None = None) -> None:
    """Complete ``future`` unless it already is (cancelled, or done by another worker)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass


def _nbytes(packed: list) -> int:
    total = 0
    for sample in packed:
        if isinstance(sample, list):
            total += sum(getattr(v, "nbytes", 0) for v in sample)
    return total
