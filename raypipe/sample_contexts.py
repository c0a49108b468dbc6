"""The sample contexts of one batch as a lazy sequence: the GPU stage hands operators a batch's
identities without building one object per sample (its host work stays constant per batch)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from .keyed_random import SampleContext


class SampleContexts(Sequence[SampleContext]):
    """``SampleContext(seed, epoch, sample_indices[i], batch, slots[i])`` for each ``i``, made only
    when asked for; ``sample_indices`` is the batch's array of sample indices (what batched operators
    read), ``slots`` their entries in batch ``batch`` (what fed external sources read)."""

    def __init__(
        self, seed: int, epoch: int, sample_indices: np.ndarray, batch: int = -1, slots: np.ndarray | None = None
    ):
        self.seed = seed
        self.epoch = epoch
        self.sample_indices = np.asarray(sample_indices, dtype=np.int64)
        self.batch = batch
        self.slots = np.arange(len(self.sample_indices)) if slots is None else np.asarray(slots, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sample_indices)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return SampleContexts(self.seed, self.epoch, self.sample_indices[i], self.batch, self.slots[i])
        return SampleContext(self.seed, self.epoch, int(self.sample_indices[i]), self.batch, int(self.slots[i]))

    def __iter__(self) -> Iterator[SampleContext]:
        return (
            SampleContext(self.seed, self.epoch, i, self.batch, j)
            for i, j in zip(self.sample_indices.tolist(), self.slots.tolist())
        )


def subset(ctxs: Sequence[SampleContext], chosen: np.ndarray) -> Sequence[SampleContext]:
    """The contexts of the samples at positions ``chosen`` (an index array), lazy where ``ctxs`` is."""
    if isinstance(ctxs, SampleContexts):
        return SampleContexts(ctxs.seed, ctxs.epoch, ctxs.sample_indices[chosen], ctxs.batch, ctxs.slots[chosen])
    return [ctxs[i] for i in chosen.tolist()]
