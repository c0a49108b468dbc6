"""Records inside container files (TFRecord, RecordIO, tar shards): where each one lies, and
reading them by random access or, when the coming samples are close together, in large
sequential reads with read-ahead.

A :class:`RecordTable` says where record ``i`` lies (file, offset, size). :class:`RecordFiles`
reads it: one ``pread`` per record, or, for batches announced with :meth:`RecordFiles.will_read`
(the reader does so when the pipeline reads in order: a reader's own order, a service's buffer
shuffle, or DALI's ``read_ahead=True``), whole *extents* (runs of consecutive records of about
``extent_bytes``) read in file order on one read-ahead thread, the samples sliced out of them.
Extents are kept up to ``cache_bytes``, least recently used first out.

Files may be object-store URLs (:mod:`raypipe.storage`): an extent is then one byte-range request,
``EXTENTS_IN_FLIGHT`` of them at once, and under a global shuffle each announced record is one
ranged request fetched ahead (:class:`~raypipe.storage.prefetch.Prefetcher`).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import ReaderError
from ..storage import store
from ..storage.prefetch import Prefetcher
from ..storage.urls import is_url

EXTENT_BYTES = 4 << 20
CACHE_BYTES = 256 << 20
EXTENTS_IN_FLIGHT = 8  # extents requested at once from an object store (one thread reads local files)


@dataclass(frozen=True)
class RecordTable:
    """Where every record lies: ``paths[file_index[i]]`` at ``offsets[i]``, ``sizes[i]`` bytes."""

    paths: tuple[str, ...]
    file_index: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray

    @classmethod
    def concat(cls, paths: Sequence[str], per_file: Sequence[tuple[np.ndarray, np.ndarray]]) -> RecordTable:
        """One table over several files, given each file's ``(offsets, sizes)`` in order."""
        counts = [len(o) for o, _ in per_file]
        return cls(
            tuple(paths),
            np.repeat(np.arange(len(paths), dtype=np.int32), counts),
            np.concatenate([np.asarray(o, np.int64) for o, _ in per_file]) if per_file else np.zeros(0, np.int64),
            np.concatenate([np.asarray(s, np.int64) for _, s in per_file]) if per_file else np.zeros(0, np.int64),
        )

    def __len__(self) -> int:
        return len(self.offsets)

    def where(self, index: int) -> str:
        """``file record k (offset o)`` for error messages; ``k`` counts within the file."""
        f = int(self.file_index[index])
        first = int(np.searchsorted(self.file_index, f))
        return f"{self.paths[f]} record {index - first} (offset {int(self.offsets[index])})"

    def digest(self) -> str:
        """A hash of the layout (file names, offsets, sizes), independent of the folder."""
        h = hashlib.sha256()
        for p in self.paths:
            h.update(os.path.basename(p).encode() + b"\0")
        for a in (self.file_index, self.offsets, self.sizes):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]


class RecordFiles:
    """Reads records of a :class:`RecordTable`; thread-safe; files open lazily in each process."""

    def __init__(self, table: RecordTable, *, extent_bytes: int = EXTENT_BYTES, cache_bytes: int = CACHE_BYTES):
        self.table = table
        self.cache_bytes = cache_bytes
        self._extent_of, self._extent_start, self._extent_end, self._extent_file = _extents(table, extent_bytes)
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        self._cache: OrderedDict[int, Future] = OrderedDict()
        self._cached_bytes = 0
        self._io: ThreadPoolExecutor | None = None
        self.stats = {"direct_reads": 0, "extent_reads": 0, "extent_bytes": 0, "extent_hits": 0}
        self._remote = np.fromiter((is_url(p) for p in table.paths), bool, len(table.paths))
        self._records = Prefetcher(self._fetch_record) if self._remote.any() else None
        weakref.finalize(self, _release, self._fds, self._cache)

    @property
    def num_extents(self) -> int:
        return len(self._extent_start)

    def read(self, index: int) -> np.ndarray:
        """The bytes of record ``index`` (a view into a cached extent, or a new array)."""
        return next(self.records([index]))

    def records(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        """The bytes of records ``indices``, each as :meth:`read` gives it: the cached extents
        looked up under one lock and the records' places taken from the table for all at once (a
        chunk's records cost one Python step each, not a dozen), each record read when the caller
        asks for it, so that it is still in the CPU's caches when parsed."""
        idx = np.asarray(indices, dtype=np.int64)
        extents = self._extent_of[idx].tolist()
        with self._lock:
            futures = [self._cache.get(e) for e in extents]
            hits = 0
            for extent, future in zip(extents, futures):
                if future is not None:
                    self._cache.move_to_end(extent)
                    hits += 1
            self.stats["extent_hits"] += hits
            self.stats["direct_reads"] += len(extents) - hits
        t = self.table
        places = zip(idx.tolist(), t.file_index[idx].tolist(), t.offsets[idx].tolist(), t.sizes[idx].tolist())
        for (index, f, offset, size), extent, future in zip(places, extents, futures):
            if future is not None:
                start = offset - int(self._extent_start[extent])
                yield future.result()[start : start + size]
            elif self._records is not None and self._remote[f]:
                yield self._records.take(index)
            else:
                yield self._pread(f, offset, size, index)

    @property
    def remote(self) -> bool:
        """Whether some of the files are object-store URLs."""
        return self._records is not None

    def will_read_records(self, indices: Sequence[int]) -> None:
        """Fetch the object-store records ``indices`` ahead, one ranged read each (random access);
        records whose extent is read ahead or kept are not fetched again."""
        if self._records is None or len(indices) == 0:
            return
        idx = np.asarray(indices, dtype=np.int64)
        idx = idx[self._remote[self.table.file_index[idx]]]
        with self._lock:
            if self._cache:
                idx = idx[~np.isin(self._extent_of[idx], np.fromiter(self._cache, np.int64, len(self._cache)))]
        self._records.want(idx.tolist(), self.table.sizes[idx].tolist())

    def in_flight(self) -> dict[str, int]:
        """Object-store records: requests in flight and bytes held now, and their peaks."""
        return self._records.in_flight() if self._records is not None else {}

    def _fetch_record(self, index: int) -> np.ndarray:
        t = self.table
        return self._pread(int(t.file_index[index]), int(t.offsets[index]), int(t.sizes[index]), index)

    def will_read(self, indices: Sequence[int]) -> None:
        """Read the extents holding ``indices`` ahead, in file order, and keep them."""
        if len(indices) == 0:
            return
        extents = np.unique(self._extent_of[np.asarray(indices, dtype=np.int64)])
        with self._lock:
            missing = [int(e) for e in extents if int(e) not in self._cache]
            if self._io is None:
                workers = EXTENTS_IN_FLIGHT if self._records is not None else 1
                self._io = ThreadPoolExecutor(workers, thread_name_prefix="raypipe-read-ahead")
                weakref.finalize(self, self._io.shutdown, wait=False, cancel_futures=True)
            for e in missing:
                size = int(self._extent_end[e] - self._extent_start[e])
                self._evict(size)
                self._cache[e] = self._io.submit(self._read_extent, e)
                self._cached_bytes += size

    def close(self) -> None:
        """Close the files, drop cached extents and stop the read-ahead thread."""
        with self._lock:
            io, self._io = self._io, None
            self._cache.clear()
            self._cached_bytes = 0
        if io is not None:
            io.shutdown(wait=True, cancel_futures=True)
        if self._records is not None:
            self._records.close()
        _release(self._fds, self._cache)

    def _evict(self, incoming: int) -> None:
        while self._cache and self._cached_bytes + incoming > self.cache_bytes:
            e, _ = self._cache.popitem(last=False)
            self._cached_bytes -= int(self._extent_end[e] - self._extent_start[e])

    def _read_extent(self, extent: int) -> np.ndarray:
        start, end = int(self._extent_start[extent]), int(self._extent_end[extent])
        first = int(np.searchsorted(self._extent_of, extent))
        data = self._pread(int(self._extent_file[extent]), start, end - start, first)
        with self._lock:
            self.stats["extent_reads"] += 1
            self.stats["extent_bytes"] += end - start
        return data

    def _fd(self, f: int) -> int:
        fd = self._fds.get(f)
        if fd is None:
            with self._lock:
                fd = self._fds.get(f)
                if fd is None:
                    path = self.table.paths[f]
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except OSError as exc:
                        raise ReaderError(f"cannot open {path!r}: {exc.strerror or exc}") from None
                    self._fds[f] = fd
        return fd

    def _pread(self, f: int, offset: int, size: int, index: int) -> np.ndarray:
        if self._remote[f]:
            return store.read_range(self.table.paths[f], offset, offset + size)
        data = np.empty(size, np.uint8)
        fd = self._fd(f)
        got = 0
        while got < size:
            n = os.preadv(fd, [data[got:]], offset + got)
            if n == 0:
                raise ReaderError(
                    f"{self.table.where(index)}: the file ends at byte {offset + got}, "
                    f"{size - got} bytes short of the record (truncated file, or an index that does not match it)"
                )
            got += n
        return data


def _extents(table: RecordTable, extent_bytes: int) -> tuple[np.ndarray, ...]:
    """Group consecutive records of a file into extents of about ``extent_bytes``: the extent of
    every record, and each extent's start, end and file."""
    n = len(table)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return np.zeros(0, np.int32), empty, empty, np.zeros(0, np.int32)
    bucket = table.offsets // max(1, extent_bytes)
    new = np.ones(n, bool)
    new[1:] = (table.file_index[1:] != table.file_index[:-1]) | (bucket[1:] != bucket[:-1])
    new[1:] |= table.offsets[1:] < table.offsets[:-1]
    extent_of = np.cumsum(new, dtype=np.int64) - 1
    firsts = np.flatnonzero(new)
    ends = table.offsets + table.sizes
    start = np.minimum.reduceat(table.offsets, firsts)
    end = np.maximum.reduceat(ends, firsts)
    return extent_of.astype(np.int32), start, end, table.file_index[firsts]


def _release(fds: dict[int, int], cache: OrderedDict) -> None:
    cache.clear()
    for fd in list(fds.values()):
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
