"""Fetch-ahead for object stores: the reads a reader was told of (``will_read``) are fetched before
they are asked for, many requests in flight, with bounded memory.

An object store answers each request in 10-100 ms, about the time a CPU thread spends decoding a
JPEG; a reader that fetched on demand would wait that long per sample. A :class:`Prefetcher`
starts up to ``max_in_flight`` fetches of announced keys at once, keeps what they return until it
is taken, and starts no more while what it holds and fetches would pass ``max_bytes``. A key
announced more than ``stale_after`` keys before the newest announcement ends was not read where it was
expected (the executor re-seeked): it is dropped. A key announced again before it is read (a
dataset smaller than the look-ahead, read epoch after epoch) is fetched again once it is read."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

IN_FLIGHT = 64
KEPT_MB = 256.0
STALE_AFTER = 8192  # keys: four times the executor's read-ahead


class Prefetcher:
    """Fetches announced keys ahead with ``fetch(key) -> array``; thread-safe. The bounds default to
    ``RAYPIPE_STORAGE_IN_FLIGHT`` (64 requests) and ``RAYPIPE_STORAGE_PREFETCH_MB`` (256 MiB)."""

    def __init__(
        self,
        fetch: Callable[[Hashable], np.ndarray],
        *,
        max_in_flight: int | None = None,
        max_bytes: int | None = None,
        stale_after: int = STALE_AFTER,
    ):
        self._fetch = fetch
        if max_in_flight is None:
            max_in_flight = int(os.environ.get("RAYPIPE_STORAGE_IN_FLIGHT", IN_FLIGHT))
        if max_bytes is None:
            max_bytes = int(float(os.environ.get("RAYPIPE_STORAGE_PREFETCH_MB", KEPT_MB)) * (1 << 20))
        self.max_in_flight, self.max_bytes, self.stale_after = max(1, max_in_flight), max_bytes, stale_after
        self._lock = threading.Lock()
        self._queued: deque[tuple[int, Hashable, int]] = deque()  # (announced as, key, expected bytes)
        self._queued_keys: set[Hashable] = set()
        self._again: dict[Hashable, int] = {}  # announcements of a key beyond the one queued or held
        self._entries: OrderedDict[Hashable, tuple[int, int, Future]] = OrderedDict()  # key: (announced, bytes, fetch)
        self._announced = 0
        self._in_flight = 0
        self._bytes = 0  # held and expected in flight
        self._pool: ThreadPoolExecutor | None = None
        self.stats = {"prefetched": 0, "prefetch_hits": 0, "direct_fetches": 0, "prefetch_dropped": 0}
        self.peak = {"in_flight_peak": 0, "bytes_held_peak": 0}

    def want(self, keys: Iterable[Hashable], sizes: Iterable[int] | None = None) -> None:
        """Fetch ``keys`` ahead (``sizes``: their expected bytes, when known), in this order."""
        keys = list(keys)
        sizes = iter(sizes) if sizes is not None else None
        with self._lock:
            self._drop_stale(self._announced + len(keys) - self.stale_after)
            for key in keys:
                expected = int(next(sizes)) if sizes is not None else 0
                self._announced += 1
                if key in self._entries or key in self._queued_keys:
                    self._again[key] = self._again.get(key, 0) + 1
                    continue
                self._queued.append((self._announced, key, expected))
                self._queued_keys.add(key)
            self._pump()

    def take(self, key: Hashable) -> np.ndarray:
        """The bytes of ``key``: fetched ahead (waiting for a fetch in flight), or fetched now."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self.stats["prefetch_hits"] += 1
                again = self._again.pop(key, 0)
                if again:
                    if again > 1:
                        self._again[key] = again - 1
                    self._queued.append((self._announced, key, entry[1]))
                    self._queued_keys.add(key)
        if entry is None:
            with self._lock:
                self.stats["direct_fetches"] += 1
            return self._fetch(key)
        try:
            return entry[2].result()
        finally:
            with self._lock:
                self._bytes -= entry[1]
                self._pump()

    def in_flight(self) -> dict[str, int]:
        """Requests in flight and bytes held or expected now, and the peaks of both."""
        with self._lock:
            return {"in_flight": self._in_flight, "bytes_held": self._bytes, **self.peak}

    def close(self) -> None:
        """Drop every announcement and what was fetched; stop the fetch threads."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._queued.clear()
            self._queued_keys.clear()
            self._again.clear()
            self._entries.clear()
            self._bytes = 0
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._in_flight = 0

    def _drop_stale(self, oldest: int) -> None:
        """Drop the keys announced before position ``oldest`` (those in flight finish first)."""
        while self._queued and self._queued[0][0] < oldest:
            key = self._queued.popleft()[1]
            self._queued_keys.discard(key)
            self._again.pop(key, None)
            self.stats["prefetch_dropped"] += 1
        for key in [k for k, (announced, _, f) in self._entries.items() if announced < oldest and f.done()]:
            self._bytes -= self._entries.pop(key)[1]
            self.stats["prefetch_dropped"] += 1

    def _pump(self) -> None:
        """Start queued fetches while the bounds allow (called with the lock held)."""
        while self._queued and self._in_flight < self.max_in_flight and self._room():
            announced, key, expected = self._queued.popleft()
            self._queued_keys.discard(key)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="raypipe-fetch")
            self._in_flight += 1
            self._bytes += expected
            future = self._pool.submit(self._run, key, expected)
            self._entries[key] = (announced, expected, future)
            self.stats["prefetched"] += 1
            self.peak["in_flight_peak"] = max(self.peak["in_flight_peak"], self._in_flight)
            self.peak["bytes_held_peak"] = max(self.peak["bytes_held_peak"], self._bytes)

    def _room(self) -> bool:
        """Whether the bytes held and expected leave room for another fetch (always, holding none)."""
        return self._bytes < self.max_bytes or not self._entries

    def _run(self, key: Hashable, expected: int) -> np.ndarray:
        try:
            data = self._fetch(key)
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._pool is not None:
                    self._pump()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[1] != data.nbytes:  # the bytes it holds, not those expected
                self._entries[key] = (entry[0], data.nbytes, entry[2])
                self._bytes += data.nbytes - entry[1]
                self.peak["bytes_held_peak"] = max(self.peak["bytes_held_peak"], self._bytes)
        return data
