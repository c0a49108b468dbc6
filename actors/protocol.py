"""What crosses the seams between a rank's loader, its pipeline actor and the coordinator: a batch
request, the batch's reply (a ragged output packed as one :class:`RaggedArray`), the samples a
batch replaced, the rank's timing of each batch, and the acknowledgement that carries the rank's
progress, skips and timings to the coordinator. Both sides of each seam use these types, over Ray
or over the actor's socket (:mod:`actors.request_channel`), so a field has one name and one meaning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BatchRequest:
    """Batch ``index`` of ``epoch`` (begun at stream position ``start``) for the actor's rank.

    ``gpu_uuid``: the rank's GPU, for CUDA IPC when it is the actor's; ``rank_slots``: how many of
    its batches the rank may hold at once (prefetch + 1), which sizes the IPC ring and the
    shared-memory pool; ``host_exporter``: the actor's shared-memory exporter, which the rank has
    checked it can map (None: it cannot, or has not yet); ``released``: tokens of such batches the
    rank no longer uses."""

    epoch: int
    start: int
    index: int
    gpu_uuid: bytes | None = None
    rank_slots: int = 3
    host_exporter: str | None = None
    released: tuple[int, ...] = ()


@dataclass(frozen=True)
class RaggedArray:
    """An output whose samples differ in shape: the samples' elements back to back in one flat array
    (``flat``: a host array, or a shared-memory descriptor like any host output) and each sample's
    shape, a row of ``shapes`` (``(batch, ndim)`` int64)."""

    flat: Any
    shapes: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes of the packed samples (what travels in the object store when ``flat`` is an array)."""
        return int(self.flat.nbytes) if isinstance(self.flat, np.ndarray) else 0


@dataclass(frozen=True)
class Skip:
    """A sample a batch replaced (``on_error="skip"``): where, which file, and why."""

    epoch: int
    sample_index: int
    source: str
    reason: str


@dataclass(frozen=True)
class Timing:
    """One batch as its rank saw it: how long it waited for the batch, how long it trained on the
    batch before (seconds), the requests it still had queued, its prefetch depth, and when (the
    rank's monotonic clock, so rates stay per batch however acknowledgements are grouped)."""

    waited_s: float
    trained_s: float
    in_flight: int
    prefetch: int
    at: float


@dataclass(frozen=True)
class BatchReply:
    """The batch a :class:`BatchRequest` asked for: its outputs (host arrays, CUDA IPC handles,
    shared-memory descriptors or :class:`RaggedArray`), padding flags and sample indices per position, the samples it
    replaced, and, in a reply to a request that did not name the actor's exporter, the
    ``host_channel`` for the rank to check and the socket ``requests`` go over."""

    outputs: list[Any]
    is_pad: np.ndarray
    sample_indices: np.ndarray
    epoch: int
    start: int
    index: int
    skipped: tuple[Skip, ...] = ()
    host_channel: dict[str, Any] | None = None
    requests: dict[str, str] | None = None


@dataclass(frozen=True)
class Ack:
    """Rank ``rank`` has consumed every batch of ``epoch`` before ``next_batch``; ``skipped``: the
    samples its batches replaced, ``timings``: one per batch since its last acknowledgement."""

    rank: int
    epoch: int
    next_batch: int
    skipped: tuple[Skip, ...] = ()
    timings: tuple[Timing, ...] = ()
