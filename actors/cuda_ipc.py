"""CUDA IPC for batches made on a GPU, through a ring of reusable device buffers.

The pipeline actor copies each device output into a slot of a ring (:class:`Exporter`) and
ships a small :class:`IpcArray`; the rank's process on the same GPU maps that slot once
(:class:`Importer`), copies the batch device-to-device into its own tensor on a side stream
and releases the batch once that copy has run (:class:`CopiedReleases`), after which the slot
may be reused. This replaces the device -> host -> object store
-> device round trip when actor and rank share a GPU (matched by the GPU's UUID, which also
tells that they share a node).

A slot is never reused before the rank releases the batch that holds it; when every slot is
held, :meth:`Exporter.export` returns None and the caller ships that output through host
memory. Each slot's buffer is cudaMalloc'ed whole (IPC shares allocations, not a pool's
sub-blocks) and only grows; every growth is a new *generation* of the slot with a new IPC
handle, so each side gets or opens a handle once per (slot, generation), not once per batch.

Sizing: the loader keeps ``prefetch`` requests in flight and releases batch k before it asks
for batch k + prefetch, so ``prefetch`` batches are held at most; the ring holds
``(prefetch + 1) * outputs`` slots (one batch of slack), the loader passing ``prefetch + 1``
with every request so a restarted actor or a new loader gets the right size. When the rank
starts a new iteration it abandons what it had in flight and asks the actor to ``reset``.

:class:`SlotRing` is the bookkeeping alone (no CUDA, tested on any machine); the exporter and
importer need cupy and a CUDA device, torch on the importer's side.
"""

from __future__ import annotations

import collections
import operator
import uuid
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from raypipe.backend import gpu_available, is_device_array
from raypipe.errors import ArgumentError, RaypipeError
from raypipe.plugin.device_copy import torch_dtype


@dataclass(frozen=True)
class IpcArray:
    """A C-contiguous device array in slot ``slot`` (generation ``generation``) of the ring of
    exporter ``exporter``, which another process on the same GPU can open with ``handle``."""

    exporter: str
    slot: int
    generation: int
    handle: bytes
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class Slot:
    """One slot of a :class:`SlotRing` as handed out by ``acquire``: its index, its capacity in
    bytes and its generation (bumped on every growth; 0 means never allocated)."""

    index: int
    capacity: int
    generation: int


class SlotRing:
    """Which of ``size`` buffers are free, which token holds which, and how big each must be.

    A token (any hashable, e.g. the batch's ``(rank, epoch, k)``) may hold several slots, one
    per output of its batch, and gives them all back with one ``release``. ``release`` is
    idempotent: releasing a token that holds nothing (released before, dropped by ``reset``,
    or acquired by an actor that has since restarted) frees nothing and returns 0, because
    releases arrive from another process and a late duplicate must not fail the actor.
    """

    def __init__(self, size: int):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ArgumentError(f"SlotRing: size must be a positive int, got {size!r}")
        self._capacity = [0] * size
        self._generation = [0] * size
        self._free = set(range(size))
        self._held: dict[Hashable, list[int]] = {}

    @property
    def size(self) -> int:
        """The number of slots."""
        return len(self._capacity)

    @property
    def free(self) -> int:
        """The number of slots no token holds."""
        return len(self._free)

    def held_by(self, token: Hashable) -> tuple[int, ...]:
        """The slot indices ``token`` holds, in the order it acquired them."""
        return tuple(self._held.get(token, ()))

    def slot(self, index: int) -> Slot:
        """Slot ``index`` as it is now."""
        return Slot(index, self._capacity[index], self._generation[index])

    def acquire(self, token: Hashable, nbytes: int) -> Slot | None:
        """A free slot of at least ``nbytes`` for ``token``, or None when every slot is held.

        Prefers the smallest allocated free slot that fits; otherwise grows the smallest free
        slot (never-allocated ones first) to ``max(nbytes, 1)`` bytes and bumps its generation,
        which tells the owner to reallocate it and consumers to drop their mapping of it."""
        try:
            hash(token)
        except TypeError:
            raise ArgumentError(f"SlotRing.acquire: token must be hashable, got {token!r}") from None
        try:
            nbytes = operator.index(nbytes)
        except TypeError:
            raise ArgumentError(f"SlotRing.acquire: nbytes must be an int, got {nbytes!r}") from None
        if nbytes < 0:
            raise ArgumentError(f"SlotRing.acquire: nbytes must be >= 0, got {nbytes}")
        if not self._free:
            return None
        fitting = [i for i in self._free if self._generation[i] and self._capacity[i] >= nbytes]
        if fitting:
            index = min(fitting, key=lambda i: (self._capacity[i], i))
        else:
            index = min(self._free, key=lambda i: (self._capacity[i], i))
            self._capacity[index] = max(nbytes, 1)
            self._generation[index] += 1
        self._free.remove(index)
        self._held.setdefault(token, []).append(index)
        return self.slot(index)

    def release(self, token: Hashable) -> int:
        """Free every slot ``token`` holds; returns how many (0 when it holds none)."""
        indices = self._held.pop(token, [])
        self._free.update(indices)
        return len(indices)

    def reset(self) -> int:
        """Free every held slot; returns how many. Only on the consumer's word that it abandoned
        its in-flight batches (it starts a new iteration): a slot freed while the consumer still
        copies from it could be overwritten. Capacities and generations stay, so consumers keep
        their mappings."""
        count = self.size - len(self._free)
        self._held.clear()
        self._free = set(range(self.size))
        return count


def device_uuid(device_index: int) -> bytes | None:
    """The UUID of CUDA device ``device_index`` in this process, or None without a usable GPU."""
    if not gpu_available():
        return None
    import cupy

    return bytes(cupy.cuda.runtime.getDeviceProperties(device_index)["uuid"])


def use_ipc(array: Any, producer_uuid: bytes | None, consumer_uuid: bytes | None) -> bool:
    """Ship ``array`` by IPC only when it is on a GPU and the consumer uses that same GPU."""
    return is_device_array(array) and producer_uuid is not None and producer_uuid == consumer_uuid


def _free_buffers(buffers: list[Any], handles: dict[int, tuple[int, bytes]]) -> None:
    """Drop every slot's ``cupy.cuda.Memory`` (its destructor calls cudaFree)."""
    handles.clear()
    buffers[:] = [None] * len(buffers)


class Exporter:
    """The actor's side: a ring of ``ring_size`` device buffers that batches are copied into.

    ``ring_size`` counts slots: ``(prefetch + 1) * outputs`` for a loader with ``prefetch``
    requests in flight and ``outputs`` device outputs per batch (the default, 3, is the
    loader's default prefetch of 2 plus one, for one output). Needs cupy only on the first
    ``export``. The buffers are freed by ``close()`` or when the exporter is dropped.
    """

    def __init__(self, ring_size: int = 3):
        self.ring = SlotRing(ring_size)
        self.exporter_id = uuid.uuid4().hex
        self.handles_made = 0
        self._device_id: int | None = None
        self._buffers: list[Any] = [None] * ring_size
        self._handles: dict[int, tuple[int, bytes]] = {}
        self._finalizer = weakref.finalize(self, _free_buffers, self._buffers, self._handles)
        self._finalizer.atexit = False  # process exit frees device memory; CUDA calls then can fail

    @property
    def size(self) -> int:
        """The number of slots."""
        return self.ring.size

    def export(self, array: Any, token: Hashable) -> IpcArray | None:
        """Copy the cupy ``array`` into a free slot held by ``token`` on the current cupy stream,
        wait for that stream (the consumer must see finished data) and describe it; None when
        every slot is held (ship through host memory instead). Kept until ``release(token)``."""
        if not is_device_array(array):
            raise ArgumentError(f"Exporter.export: expects a cupy array, got {type(array).__name__}")
        if not self._finalizer.alive:
            raise RaypipeError("Exporter.export: the exporter is closed")
        device_id = array.device.id
        if self._device_id is not None and device_id != self._device_id:
            raise ArgumentError(
                f"Exporter.export: this ring lives on CUDA device {self._device_id}, the array is on {device_id}"
            )
        slot = self.ring.acquire(token, array.nbytes)
        if slot is None:
            return None
        try:
            import cupy

            with array.device:
                handle = self._buffer(slot)
                memory = cupy.cuda.MemoryPointer(self._buffers[slot.index], 0)
                target = cupy.ndarray(array.shape, array.dtype, memory)
                target[...] = array
                cupy.cuda.get_current_stream().synchronize()
        except BaseException:
            self.ring.release(token)  # the batch fails as a whole: its other outputs never leave either
            raise
        self._device_id = device_id
        return IpcArray(
            self.exporter_id,
            slot.index,
            slot.generation,
            handle,
            tuple(array.shape),
            np.dtype(array.dtype).str,
            int(array.nbytes),
        )

    def _buffer(self, slot: Slot) -> bytes:
        """The IPC handle of ``slot``'s buffer, allocating it (and getting its handle) once per
        generation; the superseded generation is freed first."""
        import cupy

        cached = self._handles.get(slot.index)
        if cached is not None and cached[0] == slot.generation:
            return cached[1]
        self._handles.pop(slot.index, None)
        self._buffers[slot.index] = None
        memory = cupy.cuda.Memory(slot.capacity)
        handle = cupy.cuda.runtime.ipcGetMemHandle(memory.ptr)
        self._buffers[slot.index] = memory
        self._handles[slot.index] = (slot.generation, handle)
        self.handles_made += 1
        return handle

    def release(self, token: Hashable) -> int:
        """The consumer has its copy of ``token``'s outputs: their slots may be reused. Returns
        the number of slots freed (0 for a token that holds none; see :class:`SlotRing`)."""
        return self.ring.release(token)

    def reset(self) -> int:
        """Free every slot: the rank re-seeks and abandons its in-flight batches. Call it on the
        rank's request (ordered after its earlier requests), not on the actor's own re-seeks,
        which can happen while the rank copies a batch (see :meth:`SlotRing.reset`)."""
        return self.ring.reset()

    def close(self) -> None:
        """Free every buffer; later exports raise. Safe to call twice."""
        self.ring.reset()
        self._finalizer()


def _close_mappings(mappings: dict[int, tuple[int, int, int]]) -> None:
    """Unmap every opened handle (``slot -> (generation, pointer, device)``)."""
    while mappings:
        import cupy

        _, (_, pointer, device) = mappings.popitem()
        with cupy.cuda.Device(device):
            cupy.cuda.runtime.ipcCloseMemHandle(pointer)


class CopiedReleases:
    """Batches whose copies out of the ring are queued, released (``release(key)``) in order once
    the event after each copy has passed: the rank never waits on the host for its copies, and the
    actor never overwrites a slot a queued copy still reads. The one batch of slack in the ring
    covers a release that comes one batch late."""

    def __init__(self, release: Callable[[Hashable], Any]):
        self._release = release
        self._pending: collections.deque[tuple[Hashable, Any]] = collections.deque()

    def add(self, key: Hashable, copied: Any) -> None:
        """Release ``key`` once ``copied`` (an event with ``query()`` and ``synchronize()``) has passed."""
        self._pending.append((key, copied))
        self.sweep()

    def sweep(self) -> None:
        """Release the batches whose copies have run."""
        while self._pending and self._pending[0][1].query():
            self._release(self._pending.popleft()[0])

    def flush(self) -> None:
        """Wait for every queued copy and release its batch (at the end of a pass)."""
        while self._pending:
            key, copied = self._pending.popleft()
            copied.synchronize()
            self._release(key)

    def __len__(self) -> int:
        return len(self._pending)


class Importer:
    """The rank's side: maps each (slot, generation) of one exporter once and copies batches out.

    Follows one exporter at a time (one importer per loader): an :class:`IpcArray` from another
    exporter (the actor restarted or resized its ring) unmaps everything of the previous one,
    and a new generation of a slot unmaps that slot's previous generation. Mappings are closed
    by ``close()`` or when the importer is dropped.
    """

    def __init__(self) -> None:
        self.handles_opened = 0
        self.last_copy: Any = None  # a torch CUDA event after the latest copy out of the ring
        self._streams: dict[int, Any] = {}
        self._exporter: str | None = None
        self._mappings: dict[int, tuple[int, int, int]] = {}
        self._finalizer = weakref.finalize(self, _close_mappings, self._mappings)
        self._finalizer.atexit = False  # process exit unmaps everything; CUDA calls then can fail

    @property
    def open_slots(self) -> int:
        """How many slot buffers are mapped now."""
        return len(self._mappings)

    def to_torch(self, ipc: IpcArray, device_index: int) -> Any:
        """A new torch tensor on ``cuda:device_index`` holding ``ipc``'s data, copied device-to-device
        on this importer's side stream; torch's current stream waits for that copy on the device (the
        host does not wait, so the training loop keeps its run-ahead). The batch may be released once
        :attr:`last_copy` (an event after the copy) has passed."""
        if not isinstance(ipc, IpcArray):
            raise ArgumentError(f"Importer.to_torch: expects an IpcArray, got {type(ipc).__name__}")
        if not self._finalizer.alive:
            raise RaypipeError("Importer.to_torch: the importer is closed")
        import cupy
        import torch

        side = self._side_stream(device_index)
        with torch.cuda.stream(side):  # allocated for the side stream, where it is written
            out = torch.empty(ipc.shape, dtype=torch_dtype(ipc.dtype), device=f"cuda:{device_index}")
        if out.numel() * out.element_size() != ipc.nbytes:
            raise ArgumentError(
                f"Importer.to_torch: shape {ipc.shape} of {ipc.dtype} does not make the {ipc.nbytes} bytes shipped"
            )
        with cupy.cuda.Device(device_index):
            pointer = self._pointer(ipc, device_index)
            cupy.cuda.runtime.memcpyAsync(
                out.data_ptr(), pointer, ipc.nbytes, cupy.cuda.runtime.memcpyDeviceToDevice, side.cuda_stream
            )
        copied = torch.cuda.Event()
        copied.record(side)
        current = torch.cuda.current_stream(device_index)
        current.wait_event(copied)
        out.record_stream(current)  # freed by the training code: reused only after its work on it
        self.last_copy = copied
        return out

    def _side_stream(self, device_index: int) -> Any:
        import torch

        stream = self._streams.get(device_index)
        if stream is None:
            stream = self._streams[device_index] = torch.cuda.Stream(device=device_index)
        return stream

    def _pointer(self, ipc: IpcArray, device_index: int) -> int:
        """The mapped address of ``ipc``'s slot, opening its handle on first use."""
        import cupy

        if ipc.exporter != self._exporter:
            _close_mappings(self._mappings)
            self._exporter = ipc.exporter
        mapped = self._mappings.get(ipc.slot)
        if mapped is not None:
            generation, pointer, device = mapped
            if ipc.generation < generation:
                raise RaypipeError(
                    f"Importer: slot {ipc.slot} generation {ipc.generation} was superseded by generation {generation}"
                )
            if ipc.generation == generation:
                if device != device_index:
                    raise ArgumentError(
                        f"Importer: slot {ipc.slot} is mapped on CUDA device {device}, asked for {device_index}"
                    )
                return pointer
            del self._mappings[ipc.slot]
            with cupy.cuda.Device(device):
                cupy.cuda.runtime.ipcCloseMemHandle(pointer)
        pointer = cupy.cuda.runtime.ipcOpenMemHandle(ipc.handle, cupy.cuda.runtime.cudaIpcMemLazyEnablePeerAccess)
        self._mappings[ipc.slot] = (ipc.generation, pointer, device_index)
        self.handles_opened += 1
        return pointer

    def close(self) -> None:
        """Unmap every opened handle; later imports raise. Safe to call twice."""
        self._finalizer()
