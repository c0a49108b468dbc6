"""CUDA IPC for batches made on a GPU: the pipeline actor exports a device batch as an IPC
handle, the rank's process on the same GPU opens it and copies it device-to-device into its
own tensor, then releases it. This replaces the device -> host -> object store -> device
round trip when actor and rank share a GPU (matched by the GPU's UUID, which also tells
that they share a node).

Needs cupy and a CUDA device on both sides. (Not exercised on a GPU yet: the machines that
built this had none; the decision logic is tested, the calls are cupy's documented API.)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from raypipe.backend import gpu_available, is_device_array


@dataclass(frozen=True)
class IpcArray:
    """A device array another process on the same GPU can open."""

    handle: bytes
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


def device_uuid(device_index: int) -> bytes | None:
    """The UUID of CUDA device ``device_index`` in this process, or None without a usable GPU."""
    if not gpu_available():
        return None
    import cupy

    return bytes(cupy.cuda.runtime.getDeviceProperties(device_index)["uuid"])


def use_ipc(array: Any, producer_uuid: bytes | None, consumer_uuid: bytes | None) -> bool:
    """Ship ``array`` by IPC only when it is on a GPU and the consumer uses that same GPU."""
    return is_device_array(array) and producer_uuid is not None and producer_uuid == consumer_uuid


class Exporter:
    """Exports device arrays and keeps them alive until the consumer releases them.

    At most ``limit`` batches stay exported; older ones are freed first, so a rank that
    dies without releasing cannot exhaust the GPU.
    """

    def __init__(self, limit: int = 16):
        self._limit = limit
        self._live: OrderedDict[Any, list] = OrderedDict()

    def export(self, array: Any, token: Any) -> IpcArray:
        """Copy ``array`` into its own cudaMalloc block (IPC shares whole allocations, not the
        pool's sub-blocks) and return the handle; kept until ``release(token)``."""
        import cupy

        memory = cupy.cuda.Memory(array.nbytes)
        target = cupy.ndarray(array.shape, array.dtype, cupy.cuda.MemoryPointer(memory, 0))
        target[...] = array
        cupy.cuda.Device().synchronize()
        self._live.setdefault(token, []).append(memory)
        while len(self._live) > self._limit:
            self._live.popitem(last=False)
        handle = cupy.cuda.runtime.ipcGetMemHandle(memory.ptr)
        return IpcArray(bytes(handle), tuple(array.shape), np.dtype(array.dtype).str, int(array.nbytes))

    def release(self, token: Any) -> None:
        """The consumer has its copy: free the exported buffers of ``token``."""
        self._live.pop(token, None)


def import_to_torch(ipc: IpcArray, device_index: int) -> Any:
    """Open ``ipc`` on ``cuda:device_index`` and copy it into a new torch tensor there."""
    import cupy
    import torch

    dtype = torch.from_numpy(np.empty(0, np.dtype(ipc.dtype))).dtype
    out = torch.empty(ipc.shape, dtype=dtype, device=f"cuda:{device_index}")
    with cupy.cuda.Device(device_index):
        ptr = cupy.cuda.runtime.ipcOpenMemHandle(ipc.handle)
        try:
            memory = cupy.cuda.UnownedMemory(ptr, ipc.nbytes, None, device_index)
            source = cupy.ndarray(ipc.shape, np.dtype(ipc.dtype), cupy.cuda.MemoryPointer(memory, 0))
            out.copy_(torch.from_dlpack(source))
            torch.cuda.current_stream(device_index).synchronize()
        finally:
            cupy.cuda.runtime.ipcCloseMemHandle(ptr)
    return out
