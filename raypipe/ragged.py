"""Batches whose samples differ in shape, padded into one array: what ``rp.loader(pad_ragged=True)``
yields for such an output, with each sample's shape kept beside it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def sample_shapes(samples: Sequence[np.ndarray]) -> np.ndarray:
    """Each sample's shape as a row of a ``(batch, ndim)`` int64 array."""
    ndim = samples[0].ndim if len(samples) else 0
    return np.array([s.shape for s in samples], dtype=np.int64).reshape(len(samples), ndim)


def pad_to_largest(samples: Sequence[np.ndarray], fill: float = 0) -> tuple[np.ndarray, np.ndarray]:
    """The samples (one dtype, one rank) at the start of a ``(batch, *largest)`` array filled with
    ``fill``, where ``largest`` is the batch's largest extent per axis; and their shapes
    (:func:`sample_shapes`), which say where each sample's data ends."""
    shapes = sample_shapes(samples)
    largest = shapes.max(axis=0) if len(samples) else np.zeros(0, np.int64)
    dtype = samples[0].dtype if len(samples) else np.dtype(np.uint8)
    out = np.full((len(samples), *largest.tolist()), fill, dtype=dtype)
    for row, sample in zip(out, samples):
        row[tuple(slice(0, d) for d in sample.shape)] = sample
    return out, shapes
