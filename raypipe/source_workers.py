"""Worker processes for ``external_source(parallel=True)``: DALI's Python workers, which take the
sources off the pipeline process's GIL.

``py_num_workers`` processes are started with ``py_start_method`` ("fork", "spawn" or
"forkserver": with the last two the sources must pickle) when the pipeline is built. A per-sample
source's batch is split among all workers; a batch callable's batches go to the workers in turn;
an iterable or generator keeps one worker of its own (its state lives there), so it computes one
batch at a time. Each source runs ``prefetch_queue_depth`` batches ahead. A worker writes its
result's arrays into a shared memory segment and sends only their names, shapes and dtypes through
its pipe; the pipeline's process copies them out and unlinks the segment.

The workers stop with their pool: :meth:`SourceWorkerPool.close` (the pipeline's ``close()``), a
finalizer when the pool is collected with its pipeline, and an exit hook for pools still alive at
interpreter exit; a worker whose pipe closes (its pipeline's process died) exits by itself.
"""

from __future__ import annotations

import atexit
import multiprocessing
import traceback
import weakref
from multiprocessing import resource_tracker, shared_memory
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from .errors import PipelineDefinitionError, SampleError
from .sample_info import SampleInfo
from .source_callback import CALLABLE, SourceCallback

Outputs = list[list[np.ndarray]]
_LIVE: weakref.WeakSet[SourceWorkerPool] = weakref.WeakSet()
_JOIN_S = 2.0


def _unpicklable(ops: list[Any], start_method: str) -> PipelineDefinitionError | None:
    """The error naming the first source a worker started by ``start_method`` cannot be handed (it
    pickles the sources), when that is why starting one failed; else None."""
    for op in ops:
        try:
            ForkingPickler.dumps(op.callback)
        except Exception as exc:
            source = op.callback.source
            name = getattr(source, "__qualname__", type(source).__qualname__)
            return PipelineDefinitionError(
                f"external_source(parallel=True): py_start_method={start_method!r} hands each source to its "
                f"worker processes by pickling, and source {name!r} cannot be pickled ({exc}); define it at a "
                "module's top level (not a lambda, nor a function inside another), or use py_start_method='fork'"
            )
    return None


class SourceWorkerPool:
    """Worker processes running the parallel external sources ``ops`` of one pipeline."""

    def __init__(self, ops: list[Any], batch_size: int, num_workers: int, start_method: str):
        self.batch_size = batch_size
        self._start_method = start_method
        self._ops = {id(op): k for k, op in enumerate(ops)}
        self._depth = [op.prefetch_queue_depth for op in ops]
        sources = [(op.callback, op.num_outputs, op.multi) for op in ops]
        context = multiprocessing.get_context(start_method)
        resource_tracker.ensure_running()  # one tracker, shared by the workers: segments never leak
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        for w in range(num_workers):
            ours, theirs = context.Pipe()
            proc = context.Process(target=_work, args=(theirs, sources), name=f"raypipe-source-worker-{w}", daemon=True)
            try:
                proc.start()
            except Exception as exc:  # none is left half-started; a source that cannot be pickled is named
                theirs.close()
                ours.close()
                _shut_down(self._procs, self._conns, {})
                unpicklable = _unpicklable(ops, start_method) if start_method != "fork" else None
                if unpicklable is not None:
                    raise unpicklable from exc
                raise
            theirs.close()
            self._conns.append(ours)
            self._procs.append(proc)
        self._stateful = [op.callback.kind != CALLABLE for op in ops]
        self._batch = [op.batch for op in ops]
        self._next_task = 0
        self._results: dict[int, tuple] = {}
        self._discarded: set[int] = set()
        self._scheduled: list[dict[int, list[int]]] = [{} for _ in ops]  # per source: iteration -> task ids
        self._epoch = 0
        self._largest: dict[tuple[int, int], tuple[int, int]] = {}  # (source, share) -> most bytes, their samples
        self._finalizer = weakref.finalize(self, _shut_down, self._procs, self._conns, self._results)
        _LIVE.add(self)

    def restart(self, epoch: int) -> None:
        """Ask for ``epoch`` from its first batch on. Batches computed ahead by stateless sources
        are dropped; a stateful source's stay, in order, as the new epoch's first batches."""
        self._epoch = epoch
        for k, scheduled in enumerate(self._scheduled):
            if self._stateful[k]:
                self._scheduled[k] = {i: tasks for i, (_, tasks) in enumerate(sorted(scheduled.items()))}
                continue
            for tasks in scheduled.values():
                self._discard(tasks)
            scheduled.clear()

    def receive(self, op: Any, iteration: int, first: int) -> Outputs:
        """Batch ``iteration`` of ``op`` (its first sample ``first``), scheduling the batches after
        it up to the source's prefetch depth; StopIteration at the end of the data."""
        if not self._finalizer.alive:
            raise PipelineDefinitionError("the pipeline's external source workers were stopped (it was closed)")
        k = self._ops[id(op)]
        scheduled = self._scheduled[k]
        for lead in range(self._depth[k]):
            if iteration + lead not in scheduled:
                scheduled[iteration + lead] = self._schedule(k, iteration + lead, first + lead * self.batch_size)
        tasks = scheduled.pop(iteration)
        replies = [self._wait(t) for t in tasks]
        stopped = [r for r in replies if r[0] == "stop"]
        failed = [r for r in replies if r[0] == "error"]
        for reply in replies:
            if reply[0] == "ok" and (stopped or failed):
                _read_segment(reply[1], reply[2])  # freed, not used
        if failed:
            raise SampleError(f"external_source (parallel) failed in a worker process:\n{failed[0][1]}")
        if stopped:
            if not self._stateful[k]:  # a rewound iterable's batches after its end open the next epoch
                for tasks_after in scheduled.values():
                    self._discard(tasks_after)
                scheduled.clear()
            raise StopIteration
        for share, reply in enumerate(replies):
            size = _segment_bytes(reply[2])
            if size > self._largest.get((k, share), (0, 0))[0]:
                self._largest[k, share] = size, max(len(samples) for samples in reply[2])
        parts = [_read_segment(r[1], r[2]) for r in replies]
        return [[s for part in parts for s in part[o]] for o in range(len(parts[0]))]

    def shm_statistics(self) -> dict[str, list[int]]:
        """DALI's ``external_source_shm_statistics``: per source and share of a batch a worker
        computes, the most shared memory one result took (``capacities``, bytes) and that per sample
        (``per_sample_capacities``). A result's segment is made for it and freed once read."""
        largest = [self._largest[key] for key in sorted(self._largest)]
        return {
            "capacities": [size for size, _ in largest],
            "per_sample_capacities": [size // max(1, samples) for size, samples in largest],
        }

    def _schedule(self, k: int, iteration: int, first: int) -> list[int]:
        """Send batch ``iteration`` of source ``k`` to the workers; the ids of its tasks."""
        workers = len(self._conns)
        if self._stateful[k]:
            return [self._send(k % workers, (k, "batch", iteration, self._epoch))]
        if self._batch[k]:
            return [self._send(iteration % workers, (k, "batch", iteration, self._epoch))]
        bounds = np.linspace(0, self.batch_size, min(workers, self.batch_size) + 1).astype(int)
        return [
            self._send(w, (k, "samples", iteration, self._epoch, first, int(lo), int(hi)))
            for w, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))
        ]

    def _send(self, worker: int, task: tuple) -> int:
        task_id = self._next_task
        self._next_task += 1
        self._conns[worker].send((task_id, *task))
        return task_id

    def _wait(self, task_id: int) -> tuple:
        while task_id not in self._results:
            ready = wait(self._conns, timeout=1.0)
            for conn in ready:
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    raise SampleError(f"an external source worker process exited unexpectedly{self._hint()}") from None
                self._keep(reply)
            dead = [p for p in self._procs if not p.is_alive()]
            if not ready and dead:
                raise SampleError(
                    f"external source worker {dead[0].name} exited with code {dead[0].exitcode}{self._hint()}"
                )
        return self._results.pop(task_id)

    def _hint(self) -> str:
        """What to check when a worker died: a spawned one imports the main script again."""
        if self._start_method == "fork":
            return " (its error, if any, is printed above)"
        return (
            f" (its error, if any, is printed above; with py_start_method={self._start_method!r} each worker "
            'imports the main script again: build and run the pipeline under `if __name__ == "__main__":`)'
        )

    def _keep(self, reply: tuple) -> None:
        task_id, rest = reply[0], reply[1:]
        if task_id in self._discarded:
            self._discarded.discard(task_id)
            if rest[0] == "ok":
                _read_segment(rest[1], rest[2])
            return
        self._results[task_id] = rest

    def _discard(self, tasks: list[int]) -> None:
        for task_id in tasks:
            reply = self._results.pop(task_id, None)
            if reply is None:
                self._discarded.add(task_id)
            elif reply[0] == "ok":
                _read_segment(reply[1], reply[2])

    def close(self) -> None:
        """Stop the workers and free the segments of results never taken; idempotent."""
        self._finalizer()
        _LIVE.discard(self)


def _shut_down(procs: list, conns: list[Connection], results: dict[int, tuple]) -> None:
    """Ask each worker to exit (after the tasks it was sent), end those that do not, and free the
    segments of every result not taken: those received and those still in the pipes (batches
    computed ahead), so that dropping a pipeline leaves nothing in shared memory."""
    for conn in conns:
        try:
            conn.send(None)
        except (OSError, ValueError):
            pass
    for proc in procs:
        proc.join(_JOIN_S)
        if proc.is_alive():
            proc.terminate()
            proc.join(_JOIN_S)
    untaken = list(results.values())
    results.clear()
    for conn in conns:
        try:
            while conn.poll():
                untaken.append(conn.recv()[1:])
        except (EOFError, OSError):
            pass
        conn.close()
    for reply in untaken:
        if reply[0] == "ok":
            _unlink(reply[1])


def _unlink(name: str) -> None:
    """Free a segment nobody will read."""
    try:
        segment = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    segment.close()
    segment.unlink()


def _stop_live_pools() -> None:
    for pool in list(_LIVE):
        pool.close()


atexit.register(_stop_live_pools)


def _work(conn: Connection, sources: list[tuple[SourceCallback, int, bool]]) -> None:
    """A worker's loop: compute the tasks it is sent, in order, until told to stop."""
    from .operators.external_source import split_batch, split_samples

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        task_id, k, kind, iteration, epoch, *span = task
        callback, count, multi = sources[k]
        try:
            if kind == "batch":
                outputs = split_batch(callback.next_batch(iteration, epoch), count, multi)
            else:
                first, lo, hi = span
                infos = [SampleInfo(first + i, i, iteration, epoch) for i in range(lo, hi)]
                outputs = split_samples([callback.sample(info) for info in infos], count, multi)
            reply = (task_id, "ok", *_write_segment(outputs))
        except StopIteration:
            reply = (task_id, "stop")
        except BaseException as exc:  # the pipeline re-raises it, naming the source
            reply = (task_id, "error", "".join(traceback.format_exception(exc)))
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


def _write_segment(outputs: Outputs) -> tuple[str, list]:
    """Copy per-output lists of arrays into a new shared memory segment: its name and, per output,
    each array's (offset, shape, dtype)."""
    sizes = [a.nbytes for samples in outputs for a in samples]
    segment = shared_memory.SharedMemory(create=True, size=max(1, sum(sizes)))
    layout, offset = [], 0
    for samples in outputs:
        entries = []
        for array in samples:
            np.ndarray(array.shape, array.dtype, buffer=segment.buf, offset=offset)[...] = array
            entries.append((offset, array.shape, array.dtype.str))
            offset += array.nbytes
        layout.append(entries)
    segment.close()
    return segment.name, layout


def _segment_bytes(layout: list) -> int:
    """The bytes of the arrays a segment written by :func:`_write_segment` holds."""
    return sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for out in layout for _, shape, dtype in out)


def _read_segment(name: str, layout: list) -> Outputs:
    """The arrays of a segment written by :func:`_write_segment`, copied out; the segment is unlinked."""
    segment = shared_memory.SharedMemory(name=name)
    buffer = segment.buf
    try:
        return [
            [np.ndarray(shape, np.dtype(dtype), buffer=buffer, offset=offset).copy() for offset, shape, dtype in out]
            for out in layout
        ]
    finally:
        del buffer
        segment.close()
        segment.unlink()
