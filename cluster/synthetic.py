"""``rp.synthetic_loader``: the same batches' shapes, dtypes and devices, made once in memory.

NVIDIA's first check of a data pipeline: train a few hundred steps on synthetic data, then on
the real loader. If the real loader is not slower, input is not the bottleneck and tuning it
cannot speed training up. A synthetic loader built from a service's loader reports its step
times to the service, so ``svc.report()`` and ``raypipe doctor`` put both speeds side by side.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from raypipe.errors import ArgumentError

from .loader import Loader

REPORT_EVERY = 16  # steps between reports to the coordinator


class SyntheticLoader:
    """Yields one fixed batch ``len()`` times per iteration, with no I/O and no decoding."""

    def __init__(self, batch: tuple[Any, ...], batches: int, report: Callable[[int, float], None] | None = None):
        self._batch = batch
        self._batches = batches
        self._send = report
        self.trained_s = 0.0
        self.steps = 0

    def __len__(self) -> int:
        return self._batches

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        unreported = [0, 0.0]
        handed = None
        for _ in range(self._batches):
            if handed is not None:
                self._count(time.perf_counter() - handed, unreported)
            handed = time.perf_counter()
            yield self._batch
        if handed is not None:
            self._count(time.perf_counter() - handed, unreported)
        self._report(unreported)

    def _count(self, trained: float, unreported: list) -> None:
        self.steps += 1
        self.trained_s += trained
        unreported[0] += 1
        unreported[1] += trained
        if unreported[0] >= REPORT_EVERY:
            self._report(unreported)

    def _report(self, unreported: list) -> None:
        if self._send is not None and unreported[0]:
            self._send(unreported[0], unreported[1])
        unreported[:] = [0, 0.0]

    def stats(self) -> dict[str, Any]:
        """Steps trained so far, their seconds and batches/s (the speed without input costs)."""
        rate = self.steps / self.trained_s if self.trained_s > 0 else None
        return {"steps": self.steps, "trained_s": round(self.trained_s, 4), "batches_per_s": rate}


def synthetic_loader(like: Loader | Sequence[Any], batches: int | None = None) -> SyntheticLoader:
    """A loader yielding batches shaped like ``like``'s: an ``rp.loader`` (its next batch is read once
    for shapes, dtypes and devices, without moving its position; ``batches`` defaults to its
    ``len()``; step times go to the service's report) or one example batch (a tuple of torch
    tensors or numpy arrays; ``batches`` required). Floating-point outputs hold uniform noise,
    integer outputs zeros."""
    if batches is not None and (isinstance(batches, bool) or not isinstance(batches, int) or batches < 1):
        raise ArgumentError(f"synthetic_loader: batches must be a positive int, got {batches!r}")
    if isinstance(like, Loader):
        example = like.example_batch()
        count = batches if batches is not None else len(like)
        return SyntheticLoader(tuple(_noise_like(x) for x in example), count, like.report_synthetic)
    if not isinstance(like, (tuple, list)) or not like:
        raise ArgumentError(
            f"synthetic_loader: like must be an rp.loader or an example batch (a tuple of arrays), got {like!r}"
        )
    if batches is None:
        raise ArgumentError("synthetic_loader: batches is required when like is an example batch")
    return SyntheticLoader(tuple(_noise_like(x) for x in like), batches)


def _noise_like(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        if np.issubdtype(x.dtype, np.floating):
            return np.random.default_rng(0).random(x.shape, dtype=np.float32).astype(x.dtype)
        return np.zeros_like(x)
    import torch

    if not isinstance(x, torch.Tensor):
        raise ArgumentError(f"synthetic_loader: batch entries must be torch tensors or numpy arrays, got {type(x)}")
    return torch.rand_like(x) if x.is_floating_point() else torch.zeros_like(x)
