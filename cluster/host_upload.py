"""Host batches to the rank's GPU through reused pinned buffers, without waiting on the training step.

``tensor.to("cuda", non_blocking=True)`` from pageable memory (the shared-memory batch) is a
blocking copy: the driver stages it through its own pinned buffer behind the work already queued
on torch's stream, so the host waits for the previous training step. Here each host array is
copied into one of a few reused pinned buffers, sent to the device on a side stream, and torch's
current stream waits for that copy on the device; a pinned buffer is refilled only after its
previous copy has run (a wait for a copy, never for a training step).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raypipe.plugin.device_copy import torch_dtype

SLOTS = 4  # pinned buffers in turn: two batches of two outputs in flight


class HostUpload:
    """Copies host arrays to one CUDA device through :data:`SLOTS` reused pinned buffers."""

    def __init__(self, device: Any, slots: int = SLOTS):
        import torch

        self.device = torch.device(device)
        self._stream = torch.cuda.Stream(device=self.device)
        self._buffers: list[Any] = [None] * slots
        self._copied: list[Any] = [None] * slots
        self._turn = 0

    @property
    def pinned_bytes(self) -> int:
        """Pinned host memory held."""
        return sum(b.numel() for b in self._buffers if b is not None)

    def to_device(self, array: np.ndarray) -> Any:
        """A new tensor on the device holding ``array``, ordered before the current stream's later work."""
        import torch

        array = np.asarray(array)
        slot, self._turn = self._turn, (self._turn + 1) % len(self._buffers)
        if self._copied[slot] is not None:
            self._copied[slot].synchronize()  # the previous copy out of this buffer has run
        host = self._buffer(slot, array.nbytes)[: array.nbytes].numpy().view(array.dtype).reshape(array.shape)
        np.copyto(host, array)
        with torch.cuda.stream(self._stream):
            out = torch.empty(array.shape, dtype=torch_dtype(array.dtype), device=self.device)
            out.copy_(torch.from_numpy(host), non_blocking=True)
            copied = self._copied[slot] = torch.cuda.Event()
            copied.record(self._stream)
        current = torch.cuda.current_stream(self.device)
        current.wait_event(copied)
        out.record_stream(current)
        return out

    def _buffer(self, slot: int, size: int) -> Any:
        import torch

        buffer = self._buffers[slot]
        if buffer is None or buffer.numel() < size:
            self._buffers[slot] = None  # unpin the smaller buffer first
            buffer = self._buffers[slot] = torch.empty(size + size // 4, dtype=torch.uint8, pin_memory=True)
        return buffer
