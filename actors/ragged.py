"""Ragged outputs between a pipeline actor and its rank: a batch whose samples differ in shape
packed into one flat array plus the samples' shapes (:class:`actors.protocol.RaggedArray`), so it
travels as one array (through shared memory where the rank maps it) and is split back into
per-sample views without a copy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from raypipe.errors import RaypipeError


def pack(samples: Sequence[np.ndarray], allocate: Callable[[tuple[int, ...], np.dtype], np.ndarray] | None = None):
    """The host ``samples`` back to back in one flat array (made by ``allocate(shape, dtype)`` when
    given) and their shapes, ``(batch, ndim)`` int64. The samples must share a dtype and a rank."""
    dtypes = {s.dtype for s in samples}
    ranks = {s.ndim for s in samples}
    if len(dtypes) > 1 or len(ranks) > 1:
        raise RaypipeError(
            f"a batch output must hold one dtype and one rank to leave the pipeline, got dtypes "
            f"{sorted(map(str, dtypes))} and ranks {sorted(ranks)}"
        )
    dtype = dtypes.pop() if dtypes else np.dtype(np.uint8)
    shapes = np.array([s.shape for s in samples], dtype=np.int64).reshape(len(samples), ranks.pop() if ranks else 0)
    total = int(sum(s.size for s in samples))
    flat = allocate((total,), dtype) if allocate is not None else np.empty(total, dtype)
    if samples:
        np.concatenate([s.reshape(-1) for s in samples], out=flat)
    return flat, shapes


def split(flat: Any, shapes: np.ndarray) -> list[Any]:
    """The samples packed in ``flat`` (any array with ``reshape`` and slicing) as views of it."""
    sizes = np.prod(shapes, axis=1, dtype=np.int64) if shapes.shape[1] else np.ones(len(shapes), np.int64)
    ends = np.cumsum(sizes).tolist()
    starts = [0, *ends[:-1]]
    return [flat[a:b].reshape(tuple(shape)) for a, b, shape in zip(starts, ends, shapes.tolist())]
