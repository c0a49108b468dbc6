"""Which samples every rank gets at every step of every epoch: a pure function.

``plan(dataset_len, seed, epoch, world_size, batch_size, shuffle, last_batch)``
describes an epoch; ``plan.batch(rank, k)`` is rank ``rank``'s batch ``k``.

* The epoch's global order does not depend on the world size: the order is a
  stream of positions ``[0, N)`` mapped to samples, global batch ``k`` is stream
  positions ``[start + k*W*B, start + (k+1)*W*B)`` and rank ``r`` takes the ``r``-th
  slice of ``B``. ``start`` (0 unless resuming mid-epoch) is where the epoch picks
  up: a service resumed at stream position ``s``, with any world size, deals out
  exactly the positions ``[s, N)``. Resuming, replaying or changing the world size
  is arithmetic.
* ``shuffle="global"``: a keyed Feistel bijection of ``[0, N)`` per (seed, epoch),
  computed per batch in O(batch) time and memory, for any N.
* ``shuffle="buffer"``: for data cheaper to read in order. Contiguous blocks of
  ``block_size`` samples are read in a shuffled order (a keyed bijection over
  blocks), and the stream is shuffled within consecutive windows of
  ``initial_fill`` positions (a keyed bijection per window, as MosaicML Streaming's
  block shuffles do), so a reader holds at most one window of samples at a time.
  Any batch, and so any resume, costs O(batch), never O(position).
* ``shuffle="none"``: natural order.
* ``last_batch`` (:class:`~raypipe.last_batch.LastBatchPolicy`): ``"pad"`` tops the
  last global batch up with samples from the start of the epoch's order (reported as
  padding); ``"drop"`` drops the incomplete global batch; ``"partial"`` splits the
  remainder evenly, so a rank's last batch is shorter but never empty (when fewer
  samples remain than ranks, a rank without one gets a single padding entry). Every
  rank has the same number of batches.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .batch_spec import BatchSpec
from .errors import ArgumentError
from .keyed_random import sample_generator
from .last_batch import LastBatchPolicy, num_batches
from .permutation import FeistelPermutation

SHUFFLE_MODES = ("global", "buffer", "none")
_ORDER_STREAM = 0x0D_E5_0F_EC
_WINDOW_STREAM = 0xB0_FF_E5


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
    start: int = 0

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
        if isinstance(self.start, bool) or not isinstance(self.start, (int, np.integer)):
            raise ArgumentError(f"start must be an int, got {self.start!r}")
        if not 0 <= self.start < self.dataset_len:
            raise ArgumentError(f"start must be in [0, {self.dataset_len}), got {self.start}")
        object.__setattr__(self, "last_batch", LastBatchPolicy.parse(self.last_batch).value)

    @property
    def global_batch(self) -> int:
        return self.world_size * self.batch_size

    @property
    def num_batches(self) -> int:
        """Batches per rank in this epoch from ``start`` on (the same on every rank)."""
        return num_batches(self.dataset_len - self.start, self.global_batch, self.last_batch)

    def offset_after(self, k: int) -> int:
        """Stream position reached once every rank has taken ``k`` batches (at most N)."""
        return min(self.dataset_len, self.start + k * self.global_batch)

    def batch(self, rank: int, k: int) -> BatchSpec:
        """Rank ``rank``'s batch ``k``: sample indices, padding at the end."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside [0, {self.world_size})")
        if not 0 <= k < self.num_batches:
            raise IndexError(f"batch {k} outside [0, {self.num_batches}) of epoch {self.epoch}")
        positions, num_pad = self._positions(rank, k)
        positions[len(positions) - num_pad :] %= self.dataset_len
        return BatchSpec(self.epoch, k, self._map(positions), num_pad, k == self.num_batches - 1)

    def _positions(self, rank: int, k: int) -> tuple[np.ndarray, int]:
        base = self.start + k * self.global_batch
        remaining = self.dataset_len - base
        if remaining >= self.global_batch or self.last_batch == "pad":
            first = base + rank * self.batch_size
            positions = np.arange(first, first + self.batch_size, dtype=np.int64)
            return positions, int(np.count_nonzero(positions >= self.dataset_len))
        share, extra = divmod(remaining, self.world_size)
        size = share + (rank < extra)
        first = base + rank * share + min(rank, extra)
        if size == 0:
            return np.array([rank], dtype=np.int64), 1
        return np.arange(first, first + size, dtype=np.int64), 0

    def _map(self, positions: np.ndarray) -> np.ndarray:
        if self.shuffle == "none" or len(positions) == 0:
            return positions.astype(np.int64)
        key = _key(self.seed, self.epoch)
        if self.shuffle == "global":
            return _permutation(self.dataset_len, key)(positions)
        stream = _window_shuffle(self.dataset_len, self.initial_fill, self.seed, self.epoch, positions)
        return _block_stream(self.dataset_len, self.block_size, key, stream)


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
    start: int = 0,
) -> EpochPlan:
    """The plan of one epoch (see the module docstring)."""
    return EpochPlan(
        dataset_len, seed, epoch, world_size, batch_size, shuffle, last_batch, block_size, initial_fill, start
    )


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
    policy = LastBatchPolicy.parse(last_batch)
    if dataset_len < world_size:
        raise ArgumentError(f"{dataset_len} samples cannot feed {world_size} ranks")
    if policy is LastBatchPolicy.DROP and dataset_len < world_size * batch_size:
        raise ArgumentError(
            f"with last_batch='drop', {dataset_len} samples make no full global batch of "
            f"{world_size} ranks x {batch_size}; use 'pad' or 'partial' or a smaller batch"
        )


@functools.lru_cache(maxsize=64)
def _key(seed: int, epoch: int) -> int:
    return int(sample_generator(seed, epoch, 0, _ORDER_STREAM).integers(0, 2**63))


@functools.lru_cache(maxsize=64)
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


@functools.lru_cache(maxsize=64)
def _window_key(seed: int, epoch: int, window: int) -> int:
    return int(sample_generator(seed, epoch, window, _WINDOW_STREAM).integers(0, 2**63))


def _window_shuffle(n: int, window: int, seed: int, epoch: int, positions: np.ndarray) -> np.ndarray:
    """Shuffle positions within consecutive windows of ``window`` positions, each by its own
    keyed bijection: O(1) per position, and a window's outputs are that window's inputs."""
    out = np.empty(len(positions), dtype=np.int64)
    windows = positions // window
    for w in np.unique(windows).tolist():
        mask = windows == w
        first = w * window
        size = min(window, n - first)
        out[mask] = first + _permutation(size, _window_key(seed, epoch, w))(positions[mask] - first)
    return out
