"""Batch arrays written in place by the CPU stage's threads and reused across batches.

Stacking per-sample arrays costs a full copy of every batch in one thread, and a new
batch array costs page faults on first write. Instead, the last host operator of an
output writes each sample straight into its row of a batch array
(:class:`BatchOutputs`), and the arrays come from a :class:`BufferPool` that hands an
array out again only once nothing outside the pool refers to it: every numpy view
of an array keeps a reference to it (its ``base``), so a batch the caller still holds,
or any slice or tensor made from it, is never overwritten. A pool's arrays may come from
another allocator (:meth:`BufferPool.set_allocator`): a pipeline actor has them made in
shared memory its rank maps, so a finished batch reaches the rank without a copy.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Allocate = Callable[[tuple[int, ...], np.dtype], "np.ndarray | None"]
#: Makes a new batch array of a shape and dtype (``np.empty`` by default).
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


#: Host outputs whose samples are stacked into a pooled batch array: at least this many bytes
#: (smaller ones cost little to stack afresh, and would evict large arrays from the pool).
STACK_POOLED_BYTES = 1 << 20


class BufferPool:
    """Up to ``capacity`` batch arrays, each reused once it is free."""

    def __init__(self, capacity: int, allocate: Allocator = np.empty):
        self._capacity = capacity
        self._allocate = allocate
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.allocated = 0  # arrays created, for tests and statistics

    def set_allocator(self, allocate: Allocator, capacity: int | None = None) -> None:
        """Make arrays with ``allocate`` from now on, keeping up to ``capacity`` of them when given;
        the arrays kept so far are forgotten (those in use stay valid for their holders)."""
        with self._lock:
            self._allocate = allocate
            self._buffers = []
            if capacity is not None:
                self._capacity = capacity

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A free array of ``shape`` and ``dtype`` from the pool, or a new one (kept for reuse while
        the pool has room or holds a free array of another shape to replace)."""
        dtype = np.dtype(dtype)
        with self._lock:
            spare = None
            for i in range(len(self._buffers)):
                if sys.getrefcount(self._buffers[i]) > 2:  # the list's reference and the argument's
                    continue
                if self._buffers[i].shape == shape and self._buffers[i].dtype == dtype:
                    return self._buffers[i]
                spare = i
            buffer = self._allocate(shape, dtype)
            self.allocated += 1
            if len(self._buffers) < self._capacity:
                self._buffers.append(buffer)
            elif spare is not None:
                self._buffers[spare] = buffer
            return buffer

    def stack_target(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Where to stack a batch of ``shape``: a pooled array when it is large
        (:data:`STACK_POOLED_BYTES`), a new one otherwise."""
        if int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize >= STACK_POOLED_BYTES:
            return self.take(tuple(shape), dtype)
        return np.empty(shape, dtype)

    def clear(self) -> None:
        """Forget every array (those still in use stay valid for their holders)."""
        with self._lock:
            self._buffers = []


class BatchOutputs:
    """The output arrays of one batch of ``size`` samples while its samples are computed."""

    def __init__(self, pool: BufferPool, size: int):
        self._pool = pool
        self._size = size
        self._arrays: dict[Any, np.ndarray] = {}
        self._rows: dict[Any, dict[int, np.ndarray]] = {}
        self._lock = threading.Lock()

    def allocator(self, key: Any, position: int) -> Allocate:
        """A function giving sample ``position``'s row of output ``key`` for a given shape and
        dtype, or None when an earlier sample fixed another shape or dtype."""
        return lambda shape, dtype: self.row(key, position, tuple(shape), np.dtype(dtype))

    def row(self, key: Any, position: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """Row ``position`` of output ``key``'s batch array, made on the first call for ``key``."""
        with self._lock:
            array = self._arrays.get(key)
            if array is None:
                array = self._arrays[key] = self._pool.take((self._size, *shape), dtype)
                self._rows[key] = {}
            if array.shape[1:] != shape or array.dtype != dtype:
                return None
            row = self._rows[key][position] = array[position]
            return row

    def dense(self, key: Any, positions: Sequence[int], samples: Sequence[Any]) -> np.ndarray | None:
        """The batch array of output ``key`` for the kept ``positions`` when each of ``samples`` is the
        row it was given (a view for a prefix of the rows, a copy otherwise); else None."""
        if not self._written(key, positions, samples):
            return None
        array = self._arrays[key]
        if list(positions) == list(range(len(positions))):
            return array[: len(positions)] if len(positions) < self._size else array
        return array[list(positions)]

    def filled(
        self, key: Any, positions: Sequence[int], samples: Sequence[Any], sources: Sequence[int]
    ) -> np.ndarray | None:
        """The whole batch array of output ``key``, row ``j`` holding the sample written at position
        ``sources[j]`` (copied there in place when it is another row: a skipped sample's slot takes a
        kept sample), when each of ``samples`` is the row it was given at the kept ``positions``; else
        None. ``sources`` has a position per row of the array."""
        if len(sources) != self._size or not self._written(key, positions, samples):
            return None
        array = self._arrays[key]
        for row, source in enumerate(sources):
            if source != row:
                array[row] = array[source]
        return array

    def _written(self, key: Any, positions: Sequence[int], samples: Sequence[Any]) -> bool:
        """True when output ``key`` has a batch array and each of ``samples`` is the row it gave
        the kept position of the same place in ``positions``."""
        rows = self._rows.get(key)
        if not rows or len(samples) != len(positions) or not samples:
            return False
        return all(rows.get(p) is s for p, s in zip(positions, samples))
