"""Sequences (``FHWC``) as batches of frames, for the batched image kernels of the GPU stage.

A packed batch of sequences holds each sample's frames one after another, so the same buffer is a
packed batch of frames once the frames' shapes and offsets are written down (:func:`as_frames`);
the kernels' outputs for those frames, in the same order, are regrouped into sequences the same way
(:func:`as_sequences`). Both are a constant number of numpy operations on the batch's metadata,
whatever the number of samples or frames: no copy, no launch, no call per frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import launch
from ..kernels.launch import Packed


def as_frames(xp: Any, batch: Any, op: str) -> tuple[Packed, np.ndarray]:
    """The frames of a batch of ``FHWC`` sequences as one packed batch of ``HWC`` images (the
    sequences' buffer, packed first when the batch is a list), and each sequence's frame count."""
    packed = launch.pack(xp, batch, op)
    counts = packed.shapes[:, 0]
    frame_shapes = packed.shapes[:, 1:]
    frame_sizes = np.prod(frame_shapes, axis=1, dtype=np.int64)
    firsts = np.cumsum(counts) - counts  # each sequence's first frame among all frames
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(firsts, counts)
    offsets = np.repeat(packed.offsets, counts) + within * np.repeat(frame_sizes, counts)
    return Packed(packed.data, np.repeat(frame_shapes, counts, axis=0), offsets), counts


def per_frame(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-sample ``values`` (one row each) repeated for every frame of their sample."""
    return np.repeat(values, counts, axis=0)


def as_sequences(frames: Any, counts: np.ndarray) -> Packed:
    """Kernel outputs for the frames of :func:`as_frames` (a packed batch, or one array of equally
    shaped frames), a sequence's frames consecutive and alike in shape, as a packed batch of
    sequences."""
    if isinstance(frames, Packed):
        data, shapes, offsets = frames.data, frames.shapes, frames.offsets
    else:
        data = frames.reshape(-1)
        shapes = np.broadcast_to(np.asarray(frames.shape[1:], np.int64), (len(frames), frames.ndim - 1))
        offsets = np.arange(len(frames), dtype=np.int64) * int(np.prod(frames.shape[1:], dtype=np.int64))
    firsts = np.cumsum(counts) - counts
    return Packed(data, np.concatenate([counts[:, None], shapes[firsts]], axis=1), offsets[firsts])
