"""Per-sample random streams keyed by (seed, epoch, sample index, operator instance).

The same sample in the same epoch gets the same random draws whatever thread,
process or actor computes it, and however often it is recomputed. A Philox
counter-based generator makes this cheap: the key holds (seed, operator) and the
counter's high words hold (sample index, epoch), so streams never overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MASK64 = (1 << 64) - 1


def sample_generator(seed: int, epoch: int, sample_index: int, op_id: int) -> np.random.Generator:
    """A generator private to one (seed, epoch, sample, operator) combination."""
    bits = np.random.Philox(
        key=np.array([seed & _MASK64, op_id & _MASK64], dtype=np.uint64),
        counter=np.array([0, 0, sample_index & _MASK64, epoch & _MASK64], dtype=np.uint64),
    )
    return np.random.Generator(bits)


@dataclass(frozen=True)
class SampleContext:
    """Identity of the sample being processed: where its randomness comes from."""

    seed: int
    epoch: int
    sample_index: int

    def rng(self, op_id: int) -> np.random.Generator:
        """The generator for operator instance ``op_id`` on this sample."""
        return sample_generator(self.seed, self.epoch, self.sample_index, op_id)
