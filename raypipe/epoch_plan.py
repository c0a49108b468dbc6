"""Which samples every rank gets at every step of every epoch: a pure function.

``plan(dataset_len, seed, epoch, world_size, batch_size, shuffle, last_batch)``
describes an epoch; ``plan.batch(rank, k)`` is rank ``rank``'s batch ``k``.

* The epoch's global order does not depend on the world size: global batch ``k``
  is stream positions ``[k*W*B, (k+1)*W*B)`` and rank ``r`` takes the ``r``-th slice
  of ``B``. Resuming, replaying or changing the world size is arithmetic.
* ``shuffle="global"``: a keyed Feistel bijection of ``[0, N)`` per (seed, epoch),
  computed per batch in O(batch) time and memory, for any N.
* ``shuffle="buffer"``: for data cheaper to read in order. Contiguous blocks of
  ``block_size`` samples are shuffled (a keyed bijection over blocks) and dealt out
  like the global order; each rank then passes its share through a shuffle buffer of
  ``initial_fill`` samples (DALI-style), keyed by (seed, epoch, rank). Deterministic
  for a given world size; resuming recomputes the rank's buffer, O(samples per rank).
* ``shuffle="none"``: natural order.
* ``last_batch``: ``"pad"`` tops the last global batch up with samples from the start
  of the epoch's order (reported as padding); ``"drop"`` drops the incomplete global
  batch; ``"partial"`` splits the remainder evenly, so a rank's last batch is shorter
  but never empty (when fewer samples remain than ranks, a rank without one gets a
  single padding entry). Every rank has the same number of batches.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .batch_spec import BatchSpec
from .errors import ArgumentError
from .keyed_random import sample_generator
from .permutation import FeistelPermutation
from .reader_order import shuffle_buffer_order

SHUFFLE_MODES = ("global", "buffer", "none")
LAST_BATCH_POLICIES = ("pad", "drop", "partial")
_ORDER_STREAM = 0x0D_E5_0F_EC
_BUFFER_STREAM = 0xB0_FF_E5


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of a service: the sample indices of every rank's every batch."""

    dataset_len: int
    seed: int
    epoch: int
    world_size: int
    batch_size: int
    shuffle: str = "global"
    last_batch: str = "pad"
    block_size: int = 256
    initial_fill: int = 1024

    def __post_init__(self):
        validate_plan_args(
            self.dataset_len,
            self.world_size,
            self.batch_size,
            self.shuffle,
            self.last_batch,
            self.block_size,
            self.initial_fill,
            self.seed,
            self.epoch,
        )

    @property
    def global_batch(self) -> int:
        return self.world_size * self.batch_size

    @property
    def num_batches(self) -> int:
        """Batches per rank in this epoch (the same on every rank)."""
        if self.last_batch == "drop":
            return self.dataset_len // self.global_batch
        return math.ceil(self.dataset_len / self.global_batch)

    def batch(self, rank: int, k: int) -> BatchSpec:
        """Rank ``rank``'s batch ``k``: sample indices, padding at the end."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside [0, {self.world_size})")
        if not 0 <= k < self.num_batches:
            raise IndexError(f"batch {k} outside [0, {self.num_batches}) of epoch {self.epoch}")
        positions, num_pad = self._positions(rank, k)
        real = positions[: len(positions) - num_pad]
        pad = positions[len(positions) - num_pad :] % self.dataset_len
        if self.shuffle == "buffer":
            start = k * self.batch_size
            samples = np.concatenate([self._rank_order(rank)[start : start + len(real)], self._map(pad)])
        else:
            samples = self._map(np.concatenate([real, pad]))
        return BatchSpec(self.epoch, k, samples, num_pad, k == self.num_batches - 1)

    def _positions(self, rank: int, k: int) -> tuple[np.ndarray, int]:
        base = k * self.global_batch
        remaining = self.dataset_len - base
        if remaining >= self.global_batch or self.last_batch == "pad":
            start = base + rank * self.batch_size
            positions = np.arange(start, start + self.batch_size, dtype=np.int64)
            return positions, int(np.count_nonzero(positions >= self.dataset_len))
        share, extra = divmod(remaining, self.world_size)
        size = share + (rank < extra)
        start = base + rank * share + min(rank, extra)
        if size == 0:
            return np.array([rank], dtype=np.int64), 1
        return np.arange(start, start + size, dtype=np.int64), 0

    def _map(self, positions: np.ndarray) -> np.ndarray:
        if self.shuffle == "none" or len(positions) == 0:
            return positions.astype(np.int64)
        if self.shuffle == "global":
            return _permutation(self.dataset_len, _key(self.seed, self.epoch))(positions)
        return _block_stream(self.dataset_len, self.block_size, _key(self.seed, self.epoch), positions)

    def _rank_order(self, rank: int) -> np.ndarray:
        return _buffered_rank_order(self, rank)


def plan(
    dataset_len: int,
    seed: int,
    epoch: int,
    world_size: int,
    batch_size: int,
    shuffle: str = "global",
    last_batch: str = "pad",
    block_size: int = 256,
    initial_fill: int = 1024,
) -> EpochPlan:
    """The plan of one epoch (see the module docstring)."""
    return EpochPlan(dataset_len, seed, epoch, world_size, batch_size, shuffle, last_batch, block_size, initial_fill)


def validate_plan_args(
    dataset_len: int,
    world_size: int,
    batch_size: int,
    shuffle: str,
    last_batch: str,
    block_size: int = 256,
    initial_fill: int = 1024,
    seed: int = 0,
    epoch: int = 0,
) -> None:
    """Raise ArgumentError naming the first bad planning argument."""
    for name, value, low in (
        ("dataset_len", dataset_len, 1),
        ("world_size", world_size, 1),
        ("batch_size", batch_size, 1),
        ("block_size", block_size, 1),
        ("initial_fill", initial_fill, 1),
        ("seed", seed, 0),
        ("epoch", epoch, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ArgumentError(f"{name} must be an int >= {low}, got {value!r}")
    if shuffle not in SHUFFLE_MODES:
        raise ArgumentError(f"shuffle must be one of {SHUFFLE_MODES}, got {shuffle!r}")
    if last_batch not in LAST_BATCH_POLICIES:
        raise ArgumentError(f"last_batch must be one of {LAST_BATCH_POLICIES}, got {last_batch!r}")
    if dataset_len < world_size:
        raise ArgumentError(f"{dataset_len} samples cannot feed {world_size} ranks")
    if last_batch == "drop" and dataset_len < world_size * batch_size:
        raise ArgumentError(
            f"with last_batch='drop', {dataset_len} samples make no full global batch of "
            f"{world_size} ranks x {batch_size}; use 'pad' or 'partial' or a smaller batch"
        )


def _key(seed: int, epoch: int) -> int:
    return int(sample_generator(seed, epoch, 0, _ORDER_STREAM).integers(0, 2**63))


@functools.lru_cache(maxsize=16)
def _permutation(n: int, key: int) -> FeistelPermutation:
    return FeistelPermutation(n, key)


def _block_stream(n: int, block_size: int, key: int, positions: np.ndarray) -> np.ndarray:
    """Stream position -> sample when whole blocks of ``block_size`` are read in shuffled order."""
    num_blocks = math.ceil(n / block_size)
    blocks = _permutation(num_blocks, key)
    short = n - (num_blocks - 1) * block_size
    short_at = int(blocks.inverse(np.array([num_blocks - 1]))[0]) * block_size
    slots = np.where(positions >= short_at + short, positions + (block_size - short), positions)
    return blocks(slots // block_size) * block_size + slots % block_size


@functools.lru_cache(maxsize=4)
def _buffered_rank_order(p: EpochPlan, rank: int) -> np.ndarray:
    real = [p._positions(rank, k) for k in range(p.num_batches)]
    stream = np.concatenate([pos[: len(pos) - pad] for pos, pad in real])
    samples = _block_stream(p.dataset_len, p.block_size, _key(p.seed, p.epoch), stream)
    return shuffle_buffer_order(samples, p.initial_fill, sample_generator(p.seed, p.epoch, rank, _BUFFER_STREAM))
