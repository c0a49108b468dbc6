"""LMDB databases as Caffe and Caffe2 lay them out (a folder holding ``data.mdb``): random access
by key index for the readers, and a writer that grows the map as it fills.

Reads use one long-lived read transaction per thread (``threading.local``), which measured
faster than a transaction per call: 0.8-1.5 against 1.1-2.0 us per 200-byte value from 2
threads, 11-12 against 12-16 us per 110 KB value copied out. Values are parsed from buffers into
the map (:meth:`LmdbStore.apply`), so the parser copies only what it outputs."""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

import lmdb
import numpy as np

from ..errors import ReaderError
from ..storage.urls import is_url

T = TypeVar("T")

# lmdb refuses to open one environment twice in a process: stores of the same database share it,
# and the last one to close closes it. Keyed by process, so a forked child opens its own.
_SHARED: dict[tuple[int, str], list] = {}
_SHARED_LOCK = threading.RLock()  # re-entrant: a store's finalizer may run under GC inside _acquire


def _acquire(path: str, readahead: bool, max_readers: int) -> tuple[lmdb.Environment, tuple[int, str]]:
    key = (os.getpid(), os.path.realpath(path))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            entry = _SHARED[key] = [_open(path, readahead, max_readers), 0]
        entry[1] += 1
        return entry[0], key


def _release(key: tuple[int, str]) -> None:
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _SHARED[key]
            entry[0].close()


def _open(path: str, readahead: bool, max_readers: int) -> lmdb.Environment:
    if is_url(path):
        raise ReaderError(
            f"LMDB {path!r} is on an object store: LMDB is memory-mapped and needs a local copy. Copy the folder "
            "to each node (e.g. `aws s3 cp --recursive`) and read it there, or convert it to a sharded format that "
            "reads from buckets (`raypipe convert --format webdataset|tfrecord|recordio`)"
        )
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        what = "is not an LMDB folder (no data.mdb)" if os.path.isdir(path) else "does not exist"
        raise ReaderError(f"LMDB {path!r} {what}")
    try:
        return lmdb.open(
            path,
            readonly=True,
            lock=False,
            readahead=readahead,
            max_readers=max_readers,
            subdir=True,
            create=False,
        )
    except lmdb.Error as exc:
        raise ReaderError(f"LMDB {path!r} cannot be opened: {exc}") from None


class _Mapping:
    """One process's open environment of a store, its threads' read transactions, and the arrays
    that view values in its map (:meth:`view`). It is released (transactions ended, the
    environment let go of) once it is closed and its last view is gone, so a view never outlives
    the memory it shows."""

    def __init__(self, path: str, readahead: bool, max_readers: int) -> None:
        self.env, self._key = _acquire(path, readahead, max_readers)
        self.pid = os.getpid()
        self.txns: list[lmdb.Transaction] = []
        self._views: dict[int, weakref.ref] = {}  # by id: a weak reference to an array is unhashable
        self._gone = self._view_gone  # one bound method for every view's weak reference
        self._lock = threading.Lock()
        self._closed = False

    def view(self, value: memoryview) -> np.ndarray:
        """``value`` (a buffer into the map) as a read-only uint8 array, without a copy; the map stays
        until the array and every array made from it are gone. Called only while a read is in
        flight, so never after :meth:`close`."""
        array = np.frombuffer(value, np.uint8)
        ref = weakref.ref(array, self._gone)
        self._views[id(ref)] = ref
        return array

    def close(self) -> None:
        """Release now, or when the last view is gone (kept alive until then)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._views:
                _PENDING.add(self)
                return
        self._release()

    def _view_gone(self, ref: weakref.ref) -> None:
        with self._lock:
            self._views.pop(id(ref), None)
            last = self._closed and not self._views
        if last:
            _PENDING.discard(self)
            self._release()

    def _release(self) -> None:
        if self.pid != os.getpid():
            return  # a forked child's copy: the parent's environment is not this process's to close
        for txn in self.txns:
            txn.abort()
        self.txns = []
        _release(self._key)


# Closed mappings whose views are still alive: held here, as their store may be gone.
_PENDING: set[_Mapping] = set()


class LmdbStore:
    """Read-only access to the values of one LMDB in key order, from any number of threads.

    The environment opens lazily in each process (and again after :meth:`close`), shared with
    the other stores of the same database in the process (the first one's ``readahead``
    applies); the key list is read once. :meth:`close` waits for the reads in flight, and the
    map stays while an array viewing a value in it (:meth:`apply`'s ``view``) is alive, so a
    buffer never outlives its map. The kernel's read-ahead stays on by default: image values
    span many pages, and with it a cold LMDB read 10x faster here in key order and in random
    order alike (``benchmarks/RESULTS.md``)."""

    def __init__(self, path: str, readahead: bool = True, max_readers: int = 4096) -> None:
        self.path = os.fspath(path)
        self.readahead, self.max_readers = readahead, max_readers
        self._keys: list[bytes] | None = None
        self._map: _Mapping | None = None
        self._generation = 0
        self._active = 0
        self._cond = threading.Condition()
        self._local = threading.local()
        self._finalizer: weakref.finalize | None = None

    def _mapping(self) -> _Mapping:
        mapping = self._map
        if mapping is not None and mapping.pid == os.getpid():
            return mapping
        with self._cond:
            if self._map is None or self._map.pid != os.getpid():
                if self._finalizer is not None:
                    self._finalizer.detach()  # a forked child's copy of the parent's mapping
                self._map = _Mapping(self.path, self.readahead, self.max_readers)
                self._finalizer = weakref.finalize(self, self._map.close)
                self._generation += 1
            return self._map

    def _txn(self, mapping: _Mapping) -> lmdb.Transaction:
        local = self._local
        if getattr(local, "generation", None) != self._generation:
            local.txn = mapping.env.begin(buffers=True)
            local.generation = self._generation
            with self._cond:
                mapping.txns.append(local.txn)
        return local.txn

    @property
    def keys(self) -> list[bytes]:
        """Every key in key order (the order Caffe and DALI read in)."""
        if self._keys is None:
            with self._mapping().env.begin() as txn:
                self._keys = list(txn.cursor().iternext(keys=True, values=False))
        return self._keys

    def __len__(self) -> int:
        return len(self.keys)

    def apply(self, index: int, parse: Callable[[memoryview, Callable[[memoryview], np.ndarray]], T]) -> T:
        """``parse(value, view)`` of key ``index``: ``value`` is a buffer into the map, valid only
        during the call, and ``view(buffer)`` makes a read-only uint8 array of a part of
        it that stays valid as long as the array lives (no copy); ``parse`` copies what else it
        keeps."""
        key = self.keys[index]
        with self._cond:
            self._active += 1
        try:
            mapping = self._mapping()
            value = self._txn(mapping).get(key)
            if value is None:
                raise ReaderError(f"LMDB {self.path!r}: key {key!r} (index {index}) has no value")
            return parse(value, mapping.view)
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    def get(self, index: int) -> bytes:
        """A copy of the value of key ``index``."""
        return self.apply(index, lambda value, _: bytes(value))

    def digest(self) -> str:
        """A hash of the key list (and so of the count)."""
        h = hashlib.sha256(len(self.keys).to_bytes(8, "little"))
        for key in self.keys:
            h.update(len(key).to_bytes(4, "little"))
            h.update(key)
        return h.hexdigest()[:16]

    def close(self) -> None:
        """End every thread's transaction and let go of the environment once the reads in
        flight are done and no array views a value (then, not before); the next read reopens it."""
        with self._cond:
            self._cond.wait_for(lambda: not self._active)
            if self._finalizer is not None:
                self._finalizer()  # closes the mapping
            self._map, self._finalizer = None, None
            self._generation += 1


class LmdbWriter:
    """Writes key/value pairs into a new LMDB at ``path`` (replacing one there; with ``append``,
    adding to it, a key written before being overwritten), committing every thousand values
    and doubling the map whenever it fills.

    Values are written straight into the map (``writemap``: 40-110 us per 110 KB value here
    against 340 us through LMDB's write buffers), so the file is as large as the map until
    :meth:`close` truncates it to the pages used."""

    def __init__(self, path: str, map_size: int = 1 << 30, commit_every: int = 1024, append: bool = False) -> None:
        self.path = os.fspath(path)
        self.append = append
        os.makedirs(self.path, exist_ok=True)
        for name in () if append else ("data.mdb", "lock.mdb"):
            if os.path.exists(os.path.join(self.path, name)):
                os.remove(os.path.join(self.path, name))
        self._env = lmdb.open(
            self.path, map_size=map_size, subdir=True, sync=False, metasync=False, writemap=True, map_async=True
        )
        self._pending: dict[bytes, bytes] = {}
        self.commit_every = commit_every
        self.samples = self.bytes = 0

    def put(self, key: bytes, value: bytes) -> None:
        """Queue one value; a key given twice raises ValueError (it would lose a sample)."""
        if self._env is None:
            raise ValueError(f"LMDB writer for {self.path!r} is closed")
        if key in self._pending or (not self.append and self._committed(key)):
            raise ValueError(f"LMDB {self.path!r}: key {key!r} was added twice")
        self._pending[key] = value
        if len(self._pending) >= self.commit_every:
            self._commit()

    def _committed(self, key: bytes) -> bool:
        with self._env.begin() as txn:
            return txn.get(key) is not None

    def _commit(self) -> None:
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    for key, value in self._pending.items():
                        txn.put(key, value)
                break
            except lmdb.MapFullError:
                self._env.set_mapsize(self._env.info()["map_size"] * 2)
        self.samples += len(self._pending)
        self.bytes += sum(len(v) for v in self._pending.values())
        self._pending = {}

    def close(self) -> tuple[int, int]:
        """Commit, flush to disk and close; the number of values and their bytes."""
        if self._env is not None:
            self._commit()
            used = (self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"]
            self._env.sync(True)
            self._env.close()
            self._env = None
            os.truncate(os.path.join(self.path, "data.mdb"), used)
        return self.samples, self.bytes
