"""What one batch is made of: the unit of work the executor processes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BatchSpec:
    """The samples of one batch, in order.

    ``num_pad`` trailing entries only top the batch up (repeated or wrapped-around
    samples); ``last_in_epoch`` marks the epoch's final batch.
    """

    epoch: int
    index: int
    sample_indices: np.ndarray
    num_pad: int = 0
    last_in_epoch: bool = False

    def __post_init__(self):
        if not 0 <= self.num_pad <= len(self.sample_indices):
            raise ValueError(f"num_pad={self.num_pad} outside [0, {len(self.sample_indices)}]")

    @property
    def num_real(self) -> int:
        """How many entries belong to the epoch (not padding)."""
        return len(self.sample_indices) - self.num_pad
