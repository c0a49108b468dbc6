"""The order in which a self-driven reader visits samples: pure functions.

DALI semantics: contiguous shards (of the listing shuffled once, where a file-listing reader
shuffles), a shard that moves on by one each epoch unless ``stick_to_shard``, an optional
shuffle buffer of ``initial_fill`` samples or a shuffle of the whole dataset every epoch
(``shuffle_after_epoch``), and a last batch topped up by repeating the shard's last sample (``pad_last_batch``)
or by wrapping around to the start of the shard. Every shard yields the same
number of batches per epoch (that of the largest shard), so data-parallel ranks
never disagree on the batch count. Epochs never share a batch.
"""

from __future__ import annotations

import math

import numpy as np

from .batch_spec import BatchSpec
from .keyed_random import sample_generator
from .last_batch import LastBatchPolicy, num_batches
from .listing_shuffle import dali_listing_permutation

_SHUFFLE_STREAM = 0x5EED_0F_BF  # operator id reserved for the reader's shuffle buffer
_EPOCH_SHUFFLE_STREAM = 0x5EED_0F_E0  # ... and for its shuffle of the whole dataset per epoch
#: The seed of ``shuffle_after_epoch`` when none is given: fixed, as in DALI, so every run and
#: every shard sees the same permutation.
DEFAULT_EPOCH_SHUFFLE_SEED = 524287


def shard_bounds(size: int, shard_id: int, num_shards: int) -> tuple[int, int]:
    """``[start, end)`` of shard ``shard_id``: contiguous, sizes differ by at most one."""
    return size * shard_id // num_shards, size * (shard_id + 1) // num_shards


def epoch_shard(shard_id: int, num_shards: int, epoch: int, stick_to_shard: bool) -> int:
    """The shard read in ``epoch``: ``shard_id``, moved on by one per epoch unless sticky."""
    return shard_id if stick_to_shard else (shard_id + epoch) % num_shards


def listing_order(size: int, start: int, end: int) -> np.ndarray:
    """Positions ``[start, end)`` of a listing of ``size`` samples shuffled once, before sharding,
    as DALI's readers of file listings shuffle it with ``random_shuffle``: the same permutation as
    DALI's (:mod:`raypipe.listing_shuffle`), so every shard holds the files DALI's holds, and a
    shard of a class-sorted folder holds every class. The seed is fixed, whatever the pipeline's,
    so every shard sees one listing and the shards partition the dataset."""
    return dali_listing_permutation(size)[start:end]


def shuffle_buffer_order(indices: np.ndarray, initial_fill: int, rng: np.random.Generator) -> np.ndarray:
    """Pass ``indices`` (read order) through a shuffle buffer of ``initial_fill`` slots.

    The buffer fills in read order; each output is drawn uniformly from the buffer
    and its slot refilled with the next read sample, as DALI's readers do.
    """
    n = len(indices)
    fill = max(1, min(initial_fill, n))
    buffer = list(indices[:fill])
    picks = rng.random(n)
    out = np.empty(n, dtype=np.int64)
    pending = fill
    for i in range(n):
        slot = int(picks[i] * len(buffer))
        out[i] = buffer[slot]
        if pending < n:
            buffer[slot] = indices[pending]
            pending += 1
        else:
            buffer[slot] = buffer[-1]
            buffer.pop()
    return out


def epoch_permutation(size: int, epoch: int, seed: int) -> np.ndarray:
    """The dataset order of ``epoch`` under ``shuffle_after_epoch``: one permutation of all
    ``size`` samples, the same for every shard (it depends on the seed and epoch only)."""
    return sample_generator(seed, epoch, 0, _EPOCH_SHUFFLE_STREAM).permutation(size).astype(np.int64)


def batches_per_epoch(size: int, batch_size: int, num_shards: int) -> int:
    """Batches every shard yields per epoch: enough for the largest shard, the last one padded."""
    return num_batches(math.ceil(size / num_shards), batch_size, LastBatchPolicy.PAD)


def epoch_batches(
    *,
    size: int,
    batch_size: int,
    epoch: int,
    seed: int,
    shard_id: int = 0,
    num_shards: int = 1,
    stick_to_shard: bool = False,
    random_shuffle: bool = False,
    initial_fill: int = 1024,
    pad_last_batch: bool = False,
    shuffle_after_epoch: bool = False,
    shuffle_after_epoch_seed: int = DEFAULT_EPOCH_SHUFFLE_SEED,
    shuffled_listing: bool = False,
) -> list[BatchSpec]:
    """All batches of ``epoch`` for one shard, in order. With ``shuffle_after_epoch`` the shard
    is a contiguous slice of that epoch's :func:`epoch_permutation` (DALI refuses it together
    with ``random_shuffle`` or ``stick_to_shard``; the reader checks that). With
    ``random_shuffle`` and ``shuffled_listing`` the shard is a contiguous slice of the
    :func:`listing_order`, which its shuffle buffer then shuffles further."""
    shard = epoch_shard(shard_id, num_shards, epoch, stick_to_shard)
    start, end = shard_bounds(size, shard, num_shards)
    if shuffle_after_epoch:
        order = epoch_permutation(size, epoch, shuffle_after_epoch_seed)[start:end]
    elif random_shuffle and shuffled_listing:
        order = listing_order(size, start, end)
    else:
        order = np.arange(start, end, dtype=np.int64)
    if random_shuffle:
        order = shuffle_buffer_order(order, initial_fill, sample_generator(seed, epoch, shard, _SHUFFLE_STREAM))
    count = batches_per_epoch(size, batch_size, num_shards)
    total = count * batch_size
    num_pad = total - len(order)
    if num_pad:
        if len(order) == 0:
            raise ValueError(f"shard {shard} of {num_shards} is empty ({size} samples): use fewer shards")
        filler = np.full(num_pad, order[-1]) if pad_last_batch else np.resize(order, num_pad)
        order = np.concatenate([order, filler])
    specs = []
    for b in range(count):
        chunk = order[b * batch_size : (b + 1) * batch_size]
        pad = max(0, (b + 1) * batch_size - (total - num_pad))
        specs.append(BatchSpec(epoch, b, chunk, min(pad, batch_size), b == count - 1))
    return specs
