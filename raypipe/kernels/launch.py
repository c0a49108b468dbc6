"""Launching batched kernels: availability, packing ragged batches, uploads, grids and streams.

A batch becomes one flat buffer with per-sample shapes and offsets kept on the host; the
per-sample parameters a kernel needs travel to the device as one small array. Each launch is a
2-D grid: ``blockIdx.y`` picks the sample, and the threads along x walk that sample's elements
with a grid-stride loop, so ragged samples share one launch.

Nothing here waits on the device. ``cupy.asarray`` copies host arrays through pinned staging
memory on the current stream (``blocking=False``); device arrays reach numba through
``cuda.as_cuda_array(..., sync=False)`` (the default would synchronise the stream that cupy
exports with ``__cuda_array_interface__``); kernels run on cupy's current stream, so they are
ordered with the cupy work before and after them. Under numba's CUDA simulator the same kernels
take numpy arrays and run on the CPU.

This module imports numba only when asked to launch or to check for it, so that importing
raypipe never loads numba.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

# The simulator runs every GPU thread as a Python thread (tens of microseconds per element):
# it is for testing kernel logic, so bigger numpy batches keep the operators' host paths.
SIMULATOR_MAX_ELEMENTS = 1 << 15
GPU_THREADS = 256
GPU_MAX_BLOCKS = 4096  # blocks per sample; a grid-stride loop covers larger samples
SIMULATOR_THREADS = 32
SIMULATOR_MAX_BLOCKS = 2  # more than one, so that block indexing is exercised in CI
MAX_BATCH = 65535  # CUDA's limit on gridDim.y, which indexes the samples

FLOAT_STORE = 0  # write the float value as it is (cast to the output type)
INT_STORE = 1  # round and saturate to the integer output type


def available(xp: ModuleType, elements: int = 0) -> bool:
    """Whether the kernels can process a batch of ``xp`` arrays touching ``elements`` values.

    True for cupy when numba finds a CUDA device, and for numpy when numba's CUDA simulator
    is enabled (``NUMBA_ENABLE_CUDASIM=1``) and ``elements`` is at most
    ``SIMULATOR_MAX_ELEMENTS``.
    """
    if xp is np:
        return elements <= SIMULATOR_MAX_ELEMENTS and simulator_enabled()
    return getattr(xp, "__name__", "") == "cupy" and _device_usable()


def simulator_enabled() -> bool:
    """Whether numba runs CUDA kernels in its simulator (numba is imported only when it may)."""
    if "numba" not in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"):
        return False
    try:
        import numba
    except ImportError:
        return False
    return bool(numba.config.ENABLE_CUDASIM)


def _device_usable() -> bool:
    """Whether the kernels passed their start-up check on this process's GPU (a kernel compiled
    and ran: :func:`raypipe.device_check.kernels`), not only whether numba sees a device."""
    from ..device_check import kernels

    return kernels().ok


def elements(batch: Any) -> int:
    """The number of values in a batch (one array, a :class:`Packed` batch, or per-sample arrays)."""
    if isinstance(batch, Packed):
        return int(batch.sizes.sum())
    if hasattr(batch, "ndim"):
        return int(batch.size)
    return sum(int(sample.size) for sample in batch)


def uniform_dtype(batch: Any) -> np.dtype | None:
    """The element type every sample shares, or None when they differ (or the batch is empty)."""
    if isinstance(batch, Packed) or hasattr(batch, "ndim"):
        return np.dtype(batch.dtype)
    dtypes = {np.dtype(sample.dtype) for sample in batch}
    return dtypes.pop() if len(dtypes) == 1 else None


def shapes_of(batch: Any) -> np.ndarray:
    """Every sample's shape as one ``(n, ndim)`` int64 array (no call per sample for a
    :class:`Packed` batch or a batch array)."""
    if isinstance(batch, Packed):
        return batch.shapes
    if hasattr(batch, "ndim"):
        return np.broadcast_to(np.asarray(batch.shape[1:], dtype=np.int64), (len(batch), batch.ndim - 1))
    return np.array([sample.shape for sample in batch], dtype=np.int64).reshape(len(batch), -1)


def stacked(xp: ModuleType, batch: Any) -> Any | None:
    """The batch as one ``(n, ...)`` array when its samples share a shape (a view where it already
    is one, else one stack), None when their shapes differ or the batch is empty."""
    if hasattr(batch, "ndim"):
        return batch if len(batch) else None
    if not len(batch):
        return None
    shapes = shapes_of(batch)
    if not (shapes == shapes[0]).all() or uniform_dtype(batch) is None:
        return None
    dense = batch.dense() if isinstance(batch, Packed) else None
    return dense if dense is not None else xp.stack(list(batch))


def store_rule(dtype: np.dtype) -> tuple[int, float, float] | None:
    """How kernels write a float32 result into ``dtype``: ``(mode, lo, hi)``.

    ``FLOAT_STORE`` for floating-point outputs; ``INT_STORE`` with the type's range for integers
    of at most 32 bits (its bounds are exact in float64). None for what the kernels do not
    write (bool, 64-bit integers): those batches keep the host path.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return FLOAT_STORE, 0.0, 0.0
    if dtype.kind in "iu" and dtype.itemsize <= 4:
        info = np.iinfo(dtype)
        return INT_STORE, float(info.min), float(info.max)
    return None


@dataclass(frozen=True)
class Packed:
    """A batch as one flat buffer: sample ``i`` is ``data[offsets[i] : offsets[i] + sizes[i]]``
    in C order with shape ``shapes[i]``. ``shapes`` and ``offsets`` live on the host.

    The GPU stage's currency for batches whose samples differ in shape: kernels read and write it
    with one launch, and nothing is done per sample until a sample is asked for (``batch[i]``)."""

    data: Any
    shapes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.data.dtype)

    @property
    def sizes(self) -> np.ndarray:
        """Elements per sample."""
        return np.prod(self.shapes, axis=1, dtype=np.int64)

    def __getitem__(self, i: int) -> Any:
        """Sample ``i`` as a view of the buffer."""
        start = int(self.offsets[i])
        return self.data[start : start + int(np.prod(self.shapes[i]))].reshape(tuple(self.shapes[i]))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def samples(self) -> list[Any]:
        """Every sample as a view of the buffer (one call per sample: for user-facing ragged outputs)."""
        return list(self)

    def dense(self) -> Any | None:
        """The batch as one ``(N, ...)`` array viewing ``data`` when every sample has the same shape
        and the samples lie back to back from its start (as :func:`allocate` lays them out); None
        otherwise (a batch decoded into one buffer keeps each image aligned, with gaps between)."""
        if not len(self) or not (self.shapes == self.shapes[0]).all():
            return None
        size = int(np.prod(self.shapes[0]))
        if not (self.offsets == np.arange(len(self), dtype=np.int64) * size).all():
            return None
        return self.data[: size * len(self)].reshape(len(self), *self.shapes[0].tolist())


def pack(xp: ModuleType, batch: Any, op: str) -> Packed:
    """A batch as a :class:`Packed` one: itself when it is one; a view for a batch array; one
    concatenation on the device for a sequence of same-rank, same-dtype arrays of any shapes."""
    if isinstance(batch, Packed):
        return batch
    if hasattr(batch, "ndim"):
        if batch.ndim < 1 or len(batch) == 0:
            raise ValueError(f"{op}: expects a non-empty batch, got an array of shape {tuple(batch.shape)}")
        shapes = shapes_of(batch)
        data = xp.ascontiguousarray(batch).reshape(-1)
    else:
        items = list(batch)
        if not items:
            raise ValueError(f"{op}: expects a non-empty batch")
        first = items[0]
        for i, item in enumerate(items):
            if item.ndim != first.ndim or item.dtype != first.dtype:
                raise ValueError(
                    f"{op}: sample {i} is {item.dtype} with {item.ndim} dimensions but sample 0 is "
                    f"{first.dtype} with {first.ndim}; a batch must share its element type and rank"
                )
        shapes = shapes_of(items)
        data = xp.concatenate([xp.ravel(item) for item in items]) if len(items) > 1 else xp.ravel(first)
    return Packed(data, shapes, _offsets(shapes))


def _offsets(shapes: np.ndarray) -> np.ndarray:
    sizes = np.prod(shapes, axis=1, dtype=np.int64)
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)[:-1]])


def allocate(xp: ModuleType, shapes: np.ndarray, dtype: np.dtype) -> tuple[Any, np.ndarray, Any]:
    """An uninitialised output for samples of ``shapes`` (an ``(n, ndim)`` array): ``(flat,
    offsets, batch)``. A kernel writes ``flat`` at ``offsets``; ``batch`` is what the operator
    returns, one ``(N, ...)`` array viewing ``flat`` when the shapes agree, else a :class:`Packed`."""
    shapes = np.asarray(shapes, dtype=np.int64).reshape(len(shapes), -1)
    offsets = _offsets(shapes)
    if (shapes == shapes[0]).all():
        batch = xp.empty((len(shapes), *shapes[0].tolist()), dtype=dtype)
        return batch.reshape(-1), offsets, batch
    flat = xp.empty(int(np.prod(shapes, axis=1).sum()), dtype=dtype)
    return flat, offsets, Packed(flat, shapes, offsets)


def to_device(xp: ModuleType, host: np.ndarray) -> Any:
    """``host`` as an ``xp`` array: on cupy an asynchronous copy on the current stream, staged
    through pinned memory that cupy keeps until the copy is done; numpy's is the array itself."""
    if xp is np:
        return host
    return xp.asarray(host, blocking=False)


def grid(num_samples: int, max_elements: int, simulated: bool) -> tuple[tuple[int, int], int]:
    """``((blocks_x, num_samples), threads)`` for a batch whose largest sample has ``max_elements``
    work items (fewer, smaller blocks when ``simulated``, where each thread is a Python thread)."""
    if not 0 < num_samples <= MAX_BATCH:
        raise ValueError(f"kernels: a launch takes 1 to {MAX_BATCH} samples, got {num_samples}")
    threads, cap = (SIMULATOR_THREADS, SIMULATOR_MAX_BLOCKS) if simulated else (GPU_THREADS, GPU_MAX_BLOCKS)
    blocks = max(1, min(math.ceil(max_elements / threads), cap))
    return (blocks, num_samples), threads


def launch(xp: ModuleType, kernel: Any, num_samples: int, max_elements: int, *args: Any) -> None:
    """Launch ``kernel(*args)`` once for the whole batch (see :func:`grid`), on cupy's current
    stream on a GPU and in the simulator for numpy arrays; returns without waiting."""
    blocks, threads = grid(num_samples, max_elements, simulated=xp is np)
    if xp is np:
        kernel[blocks, threads](*args)
        return
    from numba import cuda

    ptr = xp.cuda.get_current_stream().ptr
    stream = cuda.legacy_default_stream() if ptr == 0 else cuda.external_stream(ptr)
    device_args = [cuda.as_cuda_array(a, sync=False) if hasattr(a, "__cuda_array_interface__") else a for a in args]
    kernel[blocks, threads, stream](*device_args)
