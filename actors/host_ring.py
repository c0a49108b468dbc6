"""Host batches from the pipeline actor to its rank through shared memory, without a copy.

Returning a batch from an actor copies it into Ray's object store: for a 38.5 MB float32
ResNet-50 batch that costs the actor 10-16 ms of CPU (fresh store pages, Ray's copy threads),
about a sixth of what the pipeline spends making the batch on this machine. Instead the
actor's pipeline writes its batch arrays straight into shared memory (:class:`Exporter`
is its batch allocator, :meth:`raypipe.engine.Engine.set_host_allocator`), and the
actor ships a small :class:`HostArray` naming the segment; the rank's process on the same
machine maps the segment once and builds the batch on it (:class:`Importer`).

Segments are ``memfd`` files: anonymous, freed by the kernel when the last descriptor and
mapping go, so a killed actor leaks nothing. The rank opens one through
``/proc/<actor pid>/fd/<fd>`` (same user, same machine); every segment starts with a header
naming its exporter and serial, checked when the rank first maps it, and the rank first
checks a probe segment (:class:`Channel`) before it asks for batches this way. Where that
fails (another machine, another PID namespace, no ``memfd``), batches keep going through
the object store.

Lifetime: the actor holds a shipped batch array until the rank releases its token, so the
pipeline's buffer pool does not reuse it. On the rank, the batch is a view of a per-batch
lease array whose finalizer queues the token once the batch and every view, slice or torch
tensor made from it are gone; the loader hands the queued tokens back with its next request.
A batch the rank keeps is therefore never overwritten; the pool makes other arrays meanwhile,
and when it may keep no more, a batch goes through the object store.
"""

from __future__ import annotations

import collections
import mmap
import os
import struct
import threading
import uuid
import weakref
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from raypipe.errors import RaypipeError

#: Smaller arrays are not worth a segment (Ray sends them inline with the reply).
MIN_BYTES = 1 << 20
#: Bytes before a segment's data: the header, then padding to a page.
DATA_OFFSET = mmap.PAGESIZE
#: Segment mappings a rank keeps open for reuse (a pool replaces segments only when shapes change).
MAPPINGS_KEPT = 64
_MAGIC = b"RAYPIPE-HOSTRING"
_HEADER = struct.Struct("<16s16sQ")  # magic, exporter id, serial


def supported() -> bool:
    """True where segments can be made and opened by another process (Linux: memfd and /proc)."""
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


@dataclass(frozen=True)
class Channel:
    """How a rank reaches an exporter: its id, its process and the descriptor of a probe
    segment that holds only the header (serial 0)."""

    exporter: str
    pid: int
    probe_fd: int


@dataclass(frozen=True)
class HostArray:
    """A C-contiguous array at byte ``offset`` of segment ``serial`` (descriptor ``fd`` in process
    ``pid``) of exporter ``exporter``, held for the rank under ``token`` until it releases it."""

    exporter: str
    pid: int
    fd: int
    serial: int
    size: int
    offset: int
    shape: tuple[int, ...]
    dtype: str
    token: int


@dataclass
class _Segment:
    fd: int
    address: int
    size: int


def _close(fd: int, closed: collections.deque, serial: int) -> None:
    """A segment's array is gone: close its descriptor (its mapping goes with the array) and
    note the serial for the exporter to forget. Runs wherever the array was dropped, so it
    touches nothing but the descriptor and a thread-safe deque."""
    try:
        os.close(fd)
    except OSError:
        pass
    closed.append(serial)


class Exporter:
    """The actor's side: allocates batch arrays in segments, ships and holds them.

    ``allocate`` is thread-safe (the pipeline's CPU threads call it); ``export``, ``release``
    and ``channel`` run on the actor's request thread."""

    def __init__(self) -> None:
        if not supported():
            raise RaypipeError("host ring: shared-memory segments need Linux (memfd_create and /proc)")
        self.exporter_id = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._segments: dict[int, _Segment] = {}
        self._closed: collections.deque = collections.deque()
        self._serial = 0
        self._tokens = 0
        self._held: dict[int, np.ndarray] = {}
        self._probe_fd, self._probe = self._segment(0, 0)
        self.allocated = 0  # segments made
        self.exported = 0  # arrays shipped through segments
        self.exported_bytes = 0
        self.not_in_ring = 0  # host arrays (of at least MIN_BYTES) shipped another way
        self._finalizer = weakref.finalize(self, _close, self._probe_fd, collections.deque(), 0)

    def _forget_closed(self) -> None:
        """Drop the segments whose arrays are gone (call with the lock held)."""
        while self._closed:
            self._segments.pop(self._closed.popleft(), None)

    def _segment(self, serial: int, nbytes: int) -> tuple[int, mmap.mmap]:
        fd = os.memfd_create(f"raypipe-batch-{serial}")
        try:
            os.ftruncate(fd, DATA_OFFSET + nbytes)
            mapping = mmap.mmap(fd, DATA_OFFSET + nbytes)
        except BaseException:
            os.close(fd)
            raise
        _HEADER.pack_into(mapping, 0, _MAGIC, bytes.fromhex(self.exporter_id), serial)
        return fd, mapping

    def channel(self) -> Channel:
        """What a rank needs to check that it can map this exporter's segments."""
        return Channel(self.exporter_id, os.getpid(), self._probe_fd)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A new array of ``shape`` and ``dtype`` in a segment of its own (``np.empty`` for small
        arrays, or when no segment can be made); its segment closes when the array is gone."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < MIN_BYTES:
            return np.empty(shape, dtype)
        with self._lock:
            self._serial += 1
            serial = self._serial
        try:
            fd, mapping = self._segment(serial, nbytes)
        except OSError:
            return np.empty(shape, dtype)
        array = np.ndarray(shape, dtype, buffer=mapping, offset=DATA_OFFSET)
        segment = _Segment(fd, array.ctypes.data - DATA_OFFSET, DATA_OFFSET + nbytes)
        with self._lock:
            self._forget_closed()
            # a dead segment whose finalizer has not run yet may have left its range to this one
            for stale in [k for k, s in self._segments.items() if _overlap(s, segment)]:
                del self._segments[stale]
            self._segments[serial] = segment
            self.allocated += 1
        weakref.finalize(array, _close, fd, self._closed, serial)
        return array

    def export(self, array: np.ndarray) -> HostArray | None:
        """Describe the host ``array`` when it lies in one of this exporter's segments (and is
        C-contiguous), holding it until its token is released; None otherwise."""
        if not (isinstance(array, np.ndarray) and array.flags.c_contiguous) or array.nbytes == 0:
            return None
        address = array.ctypes.data
        with self._lock:
            self._forget_closed()
            found = next(
                ((serial, s) for serial, s in self._segments.items() if s.address <= address < s.address + s.size),
                None,
            )
        if found is None:
            if array.nbytes >= MIN_BYTES:
                self.not_in_ring += 1
            return None
        serial, segment = found
        self._tokens += 1
        self._held[self._tokens] = array
        self.exported += 1
        self.exported_bytes += array.nbytes
        return HostArray(
            self.exporter_id,
            os.getpid(),
            segment.fd,
            serial,
            segment.size,
            address - segment.address,
            tuple(array.shape),
            array.dtype.str,
            self._tokens,
        )

    def release(self, tokens: Iterable[Hashable]) -> int:
        """The rank no longer uses these tokens' arrays: the pool may reuse them. Unknown tokens
        (released before, or from a previous life of the actor) are ignored; returns how many
        were held."""
        return sum(self._held.pop(t, None) is not None for t in tokens)

    @property
    def held(self) -> int:
        """Arrays shipped and not yet released."""
        return len(self._held)

    def stats(self) -> dict[str, int]:
        """Segments made and live, arrays and bytes shipped through them, arrays held for the rank,
        and large host arrays that had to go another way."""
        with self._lock:
            self._forget_closed()
            live = len(self._segments)
        return {
            "segments_made": self.allocated,
            "segments_live": live,
            "exported": self.exported,
            "exported_bytes": self.exported_bytes,
            "held": self.held,
            "not_in_ring": self.not_in_ring,
        }

    def close(self) -> None:
        """Drop every held array and the probe; segments close as their arrays go. Idempotent."""
        self._held.clear()
        self._finalizer()
        self._probe.close()


def _overlap(a: _Segment, b: _Segment) -> bool:
    return a.address < b.address + b.size and b.address < a.address + a.size


class _Lease(np.ndarray):
    """The root of one shipped batch on the rank: every view, slice and tensor of the batch
    keeps it alive, and its finalizer hands the batch's token back."""


def _open(pid: int, fd: int, size: int) -> mmap.mmap:
    """Map segment ``fd`` of process ``pid`` shared and writable, as Ray maps its object store: a
    batch's arrays are read-only, but a tensor made from one can still be changed in place, which
    must neither fault (a read-only mapping) nor leave private page copies in a mapping that later
    batches reuse (copy-on-write). The write lands in the actor's array, which the actor does not
    touch until the rank has released the batch, and then overwrites."""
    with open(f"/proc/{pid}/fd/{fd}", "r+b") as f:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_WRITE)


def _header(mapping: mmap.mmap) -> tuple[bytes, str, int]:
    magic, exporter, serial = _HEADER.unpack_from(mapping, 0)
    return magic, exporter.hex(), serial


class Importer:
    """The rank's side: checks channels, maps segments once and builds leased batch arrays.

    ``released()`` returns the tokens of batches that are gone, for the next request. Mappings
    follow one exporter at a time: a batch from another exporter (the actor restarted) drops
    the previous one's mappings, which stay valid for the batches still in use."""

    def __init__(self) -> None:
        self._verified: dict[str, int] = {}  # exporter id -> pid
        self._refused: dict[str, str] = {}  # exporter id -> why the rank cannot map its segments
        self._exporter: str | None = None
        self._mappings: collections.OrderedDict[int, mmap.mmap] = collections.OrderedDict()
        self._released: collections.deque = collections.deque()
        self.mapped = 0

    def check(self, channel: Channel) -> str | None:
        """Try ``channel``'s probe segment; None when this process can map the exporter's segments,
        else why not (kept: a refused exporter is not tried again)."""
        if channel.exporter in self._verified:
            return None
        if channel.exporter in self._refused:
            return self._refused[channel.exporter]
        why = None
        if not supported():
            why = "this process cannot map memfd segments (not Linux)"
        else:
            try:
                mapping = _open(channel.pid, channel.probe_fd, DATA_OFFSET)
            except (OSError, ValueError) as exc:
                why = f"cannot map the actor's probe segment: {exc}"
            else:
                magic, exporter, serial = _header(mapping)
                mapping.close()
                if (magic, exporter, serial) != (_MAGIC, channel.exporter, 0):
                    why = "the actor's probe segment is not visible here (another machine or PID namespace)"
        if why is None:
            self._verified[channel.exporter] = channel.pid
        else:
            self._refused[channel.exporter] = why
        return why

    def to_array(self, host: HostArray) -> np.ndarray:
        """The batch ``host`` as a read-only array on the shared segment; its token is queued for
        release once it and everything made from it are gone."""
        if host.exporter != self._exporter:
            self._mappings = collections.OrderedDict()
            self._exporter = host.exporter
        mapping = self._mappings.get(host.serial)
        if mapping is not None:
            self._mappings.move_to_end(host.serial)
        else:
            try:
                mapping = _open(host.pid, host.fd, host.size)
            except (OSError, ValueError) as exc:
                raise RaypipeError(
                    f"host ring: cannot map segment {host.serial} of the pipeline actor (pid {host.pid}): {exc}"
                ) from exc
            magic, exporter, serial = _header(mapping)
            if (magic, exporter, serial) != (_MAGIC, host.exporter, host.serial):
                raise RaypipeError(
                    f"host ring: /proc/{host.pid}/fd/{host.fd} is not segment {host.serial} of exporter "
                    f"{host.exporter} (found {exporter}, serial {serial})"
                )
            self._mappings[host.serial] = mapping
            self.mapped += 1
            if len(self._mappings) > MAPPINGS_KEPT:  # the batches on it keep their mapping alive
                self._mappings.popitem(last=False)
        lease = np.ndarray.__new__(_Lease, host.shape, np.dtype(host.dtype), buffer=mapping, offset=host.offset)
        weakref.finalize(lease, self._released.append, (host.exporter, host.token))
        array = lease.view(np.ndarray)
        array.flags.writeable = False  # as batches from the object store are
        return array

    def released(self, exporter: str) -> list[int]:
        """The tokens of ``exporter``'s batches that are gone since the last call (others dropped)."""
        tokens = []
        while self._released:
            owner, token = self._released.popleft()
            if owner == exporter:
                tokens.append(token)
        return tokens
