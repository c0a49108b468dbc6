"""The device side of a pipeline: cupy when a CUDA device is usable, numpy otherwise.

GPU-stage operators are written once against the module returned by
:func:`array_module`. Without a usable GPU the executor stages mixed and gpu
operators on the host, where their fast host implementations run (see
:func:`raypipe.graph.stage`). ``RAYPIPE_DEVICE=cpu`` forces that even where a GPU
exists; ``RAYPIPE_GPU_MEMORY_MB`` bounds each pipeline's GPU memory pool.

On a GPU, :class:`DeviceContext` owns what a pipeline holds on its device: a
copy stream for the Mixed stage, a compute stream for the GPU stage, a memory
pool of its own (so a budget applies per pipeline actor) and two reused pinned
staging buffers. The stages are ordered by CUDA events on those streams, never
by a host synchronisation between operators.

DALI's ``nvidia.dali.backend`` classes that scripts test with ``isinstance`` (``TensorCPU``,
``TensorGPU``, ``TensorListCPU``, ``TensorListGPU``) are here under those names
(:mod:`raypipe.tensor`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .errors import ArgumentError
from .tensor import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU  # noqa: F401  (DALI's backend names)

MEMORY_ENV = "RAYPIPE_GPU_MEMORY_MB"
_MB = 1 << 20
_ALIGN = 256  # device offsets of packed samples: what cudaMalloc guarantees
#: The GPU decoder's memory kept mapped between batches without a budget: about six batches of
#: 256 decoded ImageNet crops, far below what the trainer sharing the GPU needs.
DECODER_KEEP_BYTES = 1 << 30


class GpuUnavailableWarning(UserWarning):
    """A pipeline asked for a GPU (``device_id`` set) where none is usable; it runs on the CPU."""


@functools.cache
def _probe_cupy() -> tuple[ModuleType | None, str]:
    """cupy when it imports and a CUDA device answers, else None and why not."""
    try:
        import cupy
    except ImportError:
        return None, "cupy is not installed"
    try:
        if not cupy.is_available():
            return None, "cupy finds no usable CUDA device or driver"
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"CUDA is not usable: {exc}"
    return cupy, ""


def _cupy_usable() -> ModuleType | None:
    return _probe_cupy()[0]


def gpu_unavailable_reason() -> str | None:
    """Why pipelines run on the host here (None when a GPU is usable)."""
    if os.environ.get("RAYPIPE_DEVICE", "").lower() == "cpu":
        return "RAYPIPE_DEVICE=cpu"
    module, reason = _probe_cupy()
    return None if module is not None else reason


def gpu_available() -> bool:
    """True when cupy imports, a CUDA device answers and ``RAYPIPE_DEVICE`` is not ``cpu``."""
    return gpu_unavailable_reason() is None


def simulated() -> bool:
    """``RAYPIPE_DEVICE=simulator`` with numba's CUDA simulator on (``NUMBA_ENABLE_CUDASIM=1``): a
    pipeline given a ``device_id`` stages its graph as on a GPU (mixed outputs to the GPU stage, every
    gpu operator batch by batch) but on numpy arrays, its kernels run by the simulator. For testing
    the GPU path's structure on machines without a GPU; tiny batches only (the simulator runs each
    GPU thread in Python)."""
    if os.environ.get("RAYPIPE_DEVICE", "").lower() != "simulator":
        return False
    from .kernels.launch import simulator_enabled

    return simulator_enabled()


def array_module(device_id: int | None) -> ModuleType:
    """The array module for a pipeline on ``device_id`` (None means CPU only)."""
    if device_id is not None and gpu_available():
        return _cupy_usable()
    return np


def is_device_array(array: Any) -> bool:
    """True for an array that lives in GPU memory."""
    return type(array).__module__.startswith("cupy")


def to_host(array: Any) -> np.ndarray:
    """Copy a device array to host memory; host arrays pass through unchanged."""
    if is_device_array(array):
        return array.get()
    return np.asarray(array)


def _outside_package() -> int:
    """The ``stacklevel`` that makes a warning issued by our caller point at the first frame outside
    raypipe (the user's ``build()`` or ``run()``), however deep inside raypipe the call came from."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        level, frame = level + 1, frame.f_back
    return level


def memory_limit_mb(value: float | None = None) -> float | None:
    """The GPU memory budget in MB: ``value``, else ``RAYPIPE_GPU_MEMORY_MB``, else None (no limit)."""
    name = "memory_limit_mb"
    if value is None:
        raw = os.environ.get(MEMORY_ENV, "").strip()
        if not raw:
            return None
        name = MEMORY_ENV
        try:
            value = float(raw)
        except ValueError:
            raise ArgumentError(f"{MEMORY_ENV} must be a positive number of MB, got {raw!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ArgumentError(f"{name} must be a positive number of MB, got {value!r}")
    return float(value)


class DeviceContext:
    """Where a pipeline's device work happens: module, device, streams, memory pool and staging.

    On the host every method is a no-op or passes data through, so the executor has one code path.
    ``device_id`` set where no GPU is usable warns once (:class:`GpuUnavailableWarning`) and runs on
    the CPU, so a script written for the cluster runs on a laptop.
    """

    def __init__(self, device_id: int | None, memory_limit: float | None = None):
        self.xp = array_module(device_id)
        self.on_gpu = self.xp is not np
        self.device_id = device_id if self.on_gpu else None
        self.memory_limit_mb = memory_limit_mb(memory_limit)
        #: whether the graph is staged as on a GPU (batched GPU stage): on a GPU, or simulated on numpy
        self.batched = self.on_gpu or (device_id is not None and simulated())
        if device_id is not None and not self.batched:
            warnings.warn(
                f"device_id={device_id} asks for a GPU but none is usable ({gpu_unavailable_reason()}): "
                "the pipeline runs on the CPU, mixed and gpu operators through their host implementations",
                GpuUnavailableWarning,
                stacklevel=_outside_package(),
            )
        self.copy_stream = self.compute_stream = None
        self._pool = self._staging = self._decoder_pool = None
        if self.on_gpu:
            cp = self.xp
            self._device = cp.cuda.Device(self.device_id)
            with self._device:
                self.copy_stream = cp.cuda.Stream(non_blocking=True)
                self.compute_stream = cp.cuda.Stream(non_blocking=True)
            self._pool = cp.cuda.MemoryPool()
            if self.memory_limit_mb is not None:
                with self._device:
                    self._pool.set_limit(size=int(self.memory_limit_mb * _MB))
            self._staging = _PinnedStaging(cp)
            self._decoder_pool = _keep_mapped(cp, self.device_id, self._decoder_keep_bytes())

    @contextlib.contextmanager
    def stage_thread(self) -> Iterator[None]:
        """For the body of a stage thread: this device is current and device arrays come from
        this pipeline's pool (cupy's allocator setting is per thread)."""
        if not self.on_gpu:
            yield
            return
        with self._device, self.xp.cuda.using_allocator(self._pool.malloc):
            yield

    def on_copy_stream(self) -> contextlib.AbstractContextManager:
        """Make the Mixed stage's stream current (decode and host-to-device copies go there)."""
        return self.copy_stream if self.on_gpu else contextlib.nullcontext()

    def on_compute_stream(self) -> contextlib.AbstractContextManager:
        """Make the GPU stage's stream current: kernels that operators launch go there."""
        return self.compute_stream if self.on_gpu else contextlib.nullcontext()

    def upload(self, groups: Sequence[Sequence[np.ndarray]]) -> list[Any]:
        """Move groups of host samples to the device in one asynchronous copy on the copy stream.

        Returns per group one dense ``(n, ...)`` device array when its samples share a shape and
        dtype, a :class:`~raypipe.kernels.launch.Packed` batch when they share only rank and dtype,
        else a list of per-sample arrays; each group is filled with one call whatever its size. On
        the host the groups pass through, except where the GPU stage is simulated
        (:attr:`batched`), which gets them packed as on a GPU."""
        if self.on_gpu:
            return self._staging.upload(groups, self.copy_stream)
        if not self.batched:
            return [list(g) for g in groups]
        layouts, total = pack_layout(groups)
        buffer = np.empty(total, np.uint8)
        return [_fill_and_place(buffer, buffer, g, layout) for g, layout in zip(groups, layouts)]

    def record_copies(self) -> Any:
        """An event after the work queued so far on the copy stream (None on the host)."""
        return _record(self.xp, self.copy_stream) if self.on_gpu else None

    def wait_for_copies(self, event: Any) -> None:
        """Make the compute stream wait for ``event`` of :meth:`record_copies` (no host wait)."""
        if event is not None:
            self.compute_stream.wait_event(event)

    def record_compute(self) -> Any:
        """An event after the work queued so far on the compute stream (None on the host).

        The copy stream waits on it too: device memory the GPU stage was reading returns to the copy
        stream's pool arena when freed, and must not be reused by a copy before those kernels end."""
        if not self.on_gpu:
            return None
        event = _record(self.xp, self.compute_stream)
        self.copy_stream.wait_event(event)
        return event

    def synchronize(self) -> None:
        """Wait for everything queued on the compute stream (a no-op on the host)."""
        if self.on_gpu:
            self.compute_stream.synchronize()

    def _decoder_keep_bytes(self) -> int:
        """How much of the decoder's stream-ordered memory stays mapped between batches."""
        return int(self.memory_limit_mb * _MB) if self.memory_limit_mb is not None else DECODER_KEEP_BYTES

    def memory_stats(self) -> dict[str, Any]:
        """This pipeline's device memory in MB: its pool (in use by arrays, held in total), the
        pool's limit (None: unbounded), the pinned staging buffers, and apart from the limit the
        GPU decoder's own memory (``decoder_reserved_mb``: the batches decode into this pool, but
        nvImageCodec allocates its work buffers, and its outputs where it refuses given ones, from
        the device's stream-ordered pool, which this context keeps mapped up to the limit, or
        :data:`DECODER_KEEP_BYTES`, between batches); zeros on the host."""
        if not self.on_gpu:
            return {
                "device_id": None,
                "pool_used_mb": 0.0,
                "pool_total_mb": 0.0,
                "limit_mb": self.memory_limit_mb,
                "pinned_mb": 0.0,
                "decoder_reserved_mb": 0.0,
            }
        with self._device:  # a cupy pool reports on the current device
            used, total = self._pool.used_bytes(), self._pool.total_bytes()
        return {
            "device_id": self.device_id,
            "pool_used_mb": used / _MB,
            "pool_total_mb": total / _MB,
            "limit_mb": self.memory_limit_mb,
            "pinned_mb": self._staging.nbytes / _MB,
            "decoder_reserved_mb": _reserved(self.xp, self._decoder_pool) / _MB,
        }

    def release(self) -> None:
        """Return cached device blocks and the pinned staging buffers (arrays still in use stay
        valid); everything is allocated again on demand."""
        if self.on_gpu:
            self.synchronize()
            self._staging.release()
            with self._device:
                self._pool.free_all_blocks()


def _keep_mapped(cp: ModuleType, device_id: int, keep_bytes: int) -> Any:
    """The device's default stream-ordered memory pool (where nvImageCodec allocates decoded images
    with ``cudaMallocAsync``), set to keep ``keep_bytes`` mapped at each synchronisation instead of
    CUDA's default 0, which unmaps and maps again every batch; None where this cupy cannot."""
    runtime = cp.cuda.runtime
    try:
        pool = runtime.deviceGetDefaultMemPool(device_id)
        runtime.memPoolSetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold, keep_bytes)
    except (AttributeError, cp.cuda.runtime.CUDARuntimeError):
        return None
    return pool


def _reserved(cp: ModuleType, pool: Any) -> int:
    """Bytes the stream-ordered ``pool`` holds mapped (0 when unknown)."""
    if pool is None:
        return 0
    runtime = cp.cuda.runtime
    try:
        return int(runtime.memPoolGetAttribute(pool, runtime.cudaMemPoolAttrReservedMemCurrent))
    except (AttributeError, cp.cuda.runtime.CUDARuntimeError):
        return 0


def _record(cp: ModuleType, stream: Any) -> Any:
    """A blocking-sync event recorded on ``stream``: a host that waits on it sleeps, not spins."""
    event = cp.cuda.Event(block=True, disable_timing=True)
    event.record(stream)
    return event


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _PinnedStaging:
    """Two reused pinned host buffers feeding asynchronous host-to-device copies: a batch is packed
    into one while the copy out of the other may still run. A buffer is refilled only after the copy
    that last read it has finished (a wait that only blocks when the device is two batches behind)."""

    def __init__(self, cp: ModuleType):
        self._cp = cp
        self._buffers: list[np.ndarray | None] = [None, None]  # views of pinned memory they keep alive
        self._copied: list[Any] = [None, None]
        self._turn = 0

    @property
    def nbytes(self) -> int:
        """Pinned bytes held."""
        return sum(b.size for b in self._buffers if b is not None)

    def upload(self, groups: Sequence[Sequence[np.ndarray]], stream: Any) -> list[Any]:
        cp = self._cp
        layouts, total = pack_layout(groups)
        if total == 0:
            return [_place(cp.empty(0, cp.uint8), g, layout, cp) for g, layout in zip(groups, layouts)]
        slot, self._turn = self._turn, self._turn ^ 1
        if self._copied[slot] is not None:
            self._copied[slot].synchronize()
        host = self._host_buffer(slot, total)
        with stream:
            device = cp.empty(total, dtype=cp.uint8)
        out = [_fill_and_place(host, device, g, layout, cp) for g, layout in zip(groups, layouts)]
        device.set(host, stream=stream)
        self._copied[slot] = _record(cp, stream)
        return out

    def _host_buffer(self, slot: int, size: int) -> np.ndarray:
        """The first ``size`` bytes of pinned buffer ``slot``, grown (by a quarter more) when short."""
        buffer = self._buffers[slot]
        if buffer is None or buffer.size < size:
            self._buffers[slot] = None  # unpin the old buffer before pinning a larger one
            capacity = size + size // 4
            pointer = self._cp.cuda.PinnedMemoryPointer(self._cp.cuda.PinnedMemory(capacity), 0)
            buffer = self._buffers[slot] = np.frombuffer(pointer, np.uint8, capacity)
        return buffer[:size]

    def release(self) -> None:
        """Unpin both buffers once their copies have finished."""
        for event in self._copied:
            if event is not None:
                event.synchronize()
        self._buffers = [None, None]
        self._copied = [None, None]


@dataclass(frozen=True)
class GroupLayout:
    """Where one group of samples lies in a packed staging buffer: ``nbytes`` from byte ``start``
    (aligned), samples of ``shapes`` back to back in ``dtype``; ``dtype`` None for a group whose
    samples differ in rank or element type (moved sample by sample)."""

    start: int
    nbytes: int
    dtype: np.dtype | None = None
    shapes: np.ndarray | None = None

    @property
    def dense(self) -> bool:
        """Whether every sample has the same shape (the group is one ``(n, ...)`` array)."""
        return self.shapes is not None and bool((self.shapes == self.shapes[0]).all())


def pack_layout(groups: Sequence[Sequence[np.ndarray]]) -> tuple[list[GroupLayout], int]:
    """Where each group goes in one packed buffer (each group starts aligned, its samples back to
    back) and the buffer's size: a pure function of the samples' shapes and types, a constant
    number of calls per group whatever its size."""
    layouts, total = [], 0
    for samples in groups:
        kinds = {(s.ndim, s.dtype) for s in samples}
        if len(kinds) != 1:  # empty, or mixed ranks or types
            layouts.append(GroupLayout(total, 0))
            continue
        ((ndim, dtype),) = kinds
        shapes = np.array([s.shape for s in samples], dtype=np.int64).reshape(len(samples), ndim)
        start = _aligned(total)
        nbytes = int(np.prod(shapes, axis=1).sum()) * np.dtype(dtype).itemsize
        layouts.append(GroupLayout(start, nbytes, np.dtype(dtype), shapes))
        total = start + nbytes
    return layouts, total


def _fill_and_place(host: np.ndarray, target: Any, samples: Sequence[np.ndarray], layout: GroupLayout, xp=np) -> Any:
    """Copy a group's samples into its bytes of ``host`` (one call) and return the group as
    :func:`_place` lays it out in ``target`` (the same buffer, or its device copy)."""
    if layout.dtype is not None:
        np.concatenate(samples, axis=None, out=host[layout.start : layout.start + layout.nbytes].view(layout.dtype))
    return _place(target, samples, layout, xp)


def _place(buffer: Any, samples: Sequence[np.ndarray], layout: GroupLayout, xp=np) -> Any:
    """A group as the GPU stage takes it, viewing ``buffer``: one ``(n, ...)`` array, a packed
    batch, or (mixed ranks or types) a list of per-sample arrays on ``xp``."""
    from .kernels.launch import Packed

    if layout.dtype is None:
        return [xp.asarray(s) for s in samples]
    data = buffer[layout.start : layout.start + layout.nbytes].view(layout.dtype)
    shapes = layout.shapes
    if layout.dense:
        return data.reshape(len(shapes), *shapes[0].tolist())
    sizes = np.prod(shapes, axis=1)
    return Packed(data, shapes, np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)[:-1]]))
