"""Device batches handed to torch in memory torch owns, copied without waiting on the training step.

A pipeline's GPU batch lives in the pipeline's own cupy pool. Handing the training code a view of
it (``torch.from_dlpack``) is unsafe: when the training loop drops the tensor while its kernels are
still queued on torch's stream, the block goes back to the pool, and the GPU stage, running ahead
on its own stream, may write the next batch into it under those kernels. So, as DALI's
``feed_ndarray`` does, the batch is copied into a tensor torch allocated, on torch's current
stream, and the pipeline's array is kept out of reuse until an event recorded after that copy
has passed (:class:`HeldUntilCopied`); nothing here waits on the host.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype of a numpy dtype (or its name)."""
    import torch

    return torch.from_numpy(np.empty(0, np.dtype(dtype))).dtype


class HeldUntilCopied:
    """Sources of queued device copies, each kept alive until the event recorded after its copy
    has passed; :meth:`sweep` lets go of those that have (oldest first, as the copies finish in
    order on one stream). Thread-safe."""

    def __init__(self) -> None:
        self._held: collections.deque[tuple[Any, Any]] = collections.deque()
        self._lock = threading.Lock()

    def hold(self, source: Any, event: Any) -> None:
        """Keep ``source`` until ``event`` (a cupy or torch CUDA event) has passed."""
        with self._lock:
            self._held.append((event, source))
        self.sweep()

    def sweep(self) -> None:
        """Drop the sources whose copies have finished."""
        with self._lock:
            while self._held and _passed(self._held[0][0]):
                self._held.popleft()

    def __len__(self) -> int:
        return len(self._held)


def _passed(event: Any) -> bool:
    """Whether the work before a CUDA event has finished: cupy's events say so with ``done``,
    torch's with ``query()``."""
    done = getattr(event, "done", None)
    return bool(done) if done is not None else bool(event.query())


_HELD = HeldUntilCopied()


def cupy_to_torch(array: Any, held: HeldUntilCopied = _HELD) -> Any:
    """A new torch tensor on ``array``'s GPU holding a copy of the cupy ``array``, queued on torch's
    current stream of that device (the caller has waited for the pipeline's batch to be done, so
    the copy follows it), with ``array`` held until the copy has run."""
    import torch

    device = array.device.id
    out = torch.empty(array.shape, dtype=torch_dtype(array.dtype), device=f"cuda:{device}")
    return copy_into(array, out, torch.cuda.current_stream(device).cuda_stream, held)


def copy_into(array: Any, out: Any, stream: int, held: HeldUntilCopied = _HELD) -> Any:
    """Copy the cupy ``array`` into the contiguous torch tensor ``out`` (same GPU, dtype and size),
    queued on the CUDA stream handle ``stream``; ``array`` is held until the copy has run. Returns
    ``out``."""
    import cupy

    if not out.is_contiguous():
        raise ValueError("copy_into: the destination tensor must be contiguous")
    source = cupy.ascontiguousarray(array)
    if source.nbytes != out.numel() * out.element_size():
        raise ValueError(f"copy_into: {source.nbytes} bytes do not fit a tensor of {tuple(out.shape)} {out.dtype}")
    with cupy.cuda.Device(array.device.id):
        cupy.cuda.runtime.memcpyAsync(
            out.data_ptr(), source.data.ptr, source.nbytes, cupy.cuda.runtime.memcpyDeviceToDevice, stream
        )
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(cupy.cuda.ExternalStream(stream))
    held.hold(source, event)
    return out
