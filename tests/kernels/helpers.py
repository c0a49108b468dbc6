"""Helpers shared by the kernel tests."""

from __future__ import annotations

import numpy as np

from raypipe.backend import to_host
from raypipe.keyed_random import SampleContext

# Ragged HWC sizes (height, width): small enough for the simulator, wide, tall and in between.
RAGGED = [(20, 24), (13, 9), (7, 19)]


def contexts(n: int, seed: int = 5) -> list[SampleContext]:
    """Sample contexts 0..n-1 of epoch 0."""
    return [SampleContext(seed, 0, i) for i in range(n)]


def host_samples(batch) -> list[np.ndarray]:
    """A batch returned by ``run_batch`` (one array or a list) as host arrays."""
    return [to_host(sample) for sample in batch]


def per_sample(args: dict, i: int) -> dict:
    """Sample ``i``'s arguments out of per-batch argument lists."""
    return {k: v[i] for k, v in args.items()}


def on_device(xp, images: list[np.ndarray]) -> list:
    """Host images as ``xp`` arrays (the batch the GPU stage hands an operator)."""
    return [xp.asarray(image) for image in images]
