"""Array-module selection: cupy when a CUDA device is usable, numpy otherwise.

GPU-stage operators are written once against the module returned by
:func:`array_module`; without a GPU they run on the host with numpy and give the
same results within each operator's stated tolerance. ``RAYPIPE_DEVICE=cpu``
forces the numpy path even where a GPU exists.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

import numpy as np


@functools.cache
def _cupy_usable() -> ModuleType | None:
    try:
        import cupy
    except ImportError:
        return None
    try:
        if not cupy.is_available():
            return None
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return None
    return cupy


def gpu_available() -> bool:
    """True when cupy imports, a CUDA device answers and ``RAYPIPE_DEVICE`` is not ``cpu``."""
    if os.environ.get("RAYPIPE_DEVICE", "").lower() == "cpu":
        return False
    return _cupy_usable() is not None


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


class DeviceContext:
    """The device side of a pipeline: which module, which device, which stream."""

    def __init__(self, device_id: int | None):
        self.xp = array_module(device_id)
        self.device_id = device_id if self.xp is not np else None
        self.on_gpu = self.xp is not np
        self._stream = None
        if self.on_gpu:
            self._device = self.xp.cuda.Device(self.device_id)
            with self._device:
                self._stream = self.xp.cuda.Stream(non_blocking=True)

    def activate(self) -> None:
        """Make this device current in the calling thread (a no-op on the host)."""
        if self.on_gpu:
            self._device.use()

    def to_device(self, host: np.ndarray) -> Any:
        """Move a host array to the device through a pinned staging buffer and this
        context's stream; on the host path the array is returned as it is."""
        if not self.on_gpu:
            return host
        cp = self.xp
        pinned = cp.cuda.alloc_pinned_memory(host.nbytes)
        staged = np.frombuffer(pinned, host.dtype, host.size).reshape(host.shape)
        np.copyto(staged, host)
        with self._stream:
            out = cp.empty(host.shape, host.dtype)
            out.set(staged, stream=self._stream)
        self._stream.synchronize()
        return out

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on the host)."""
        if self.on_gpu:
            self._stream.synchronize()
