"""The shuffle DALI's file-listing readers apply to their listing, reproduced exactly.

With ``random_shuffle``, DALI's ``file``, ``numpy``, ``coco``, ``nemo_asr``, ``sequence`` and
video readers shuffle their whole listing once, before sharding, with ``std::shuffle`` driven by
``std::mt19937`` seeded with a fixed value (524287), so that every shard sees one listing and a
shard of a class-sorted folder holds every class. Reproducing libstdc++'s algorithm (GCC 11 and
later, as DALI's wheels are built) gives each shard the files DALI's same shard reads.

libstdc++'s ``std::shuffle`` is Fisher-Yates with swap positions from
``uniform_int_distribution``, which, for a 32-bit generator, is Lemire's multiply-and-reject
method. For up to 65535 elements it draws the positions of two consecutive swaps from one
value. numpy's legacy ``RandomState`` is the same Mersenne Twister with the same seeding.
"""

from __future__ import annotations

import functools

import numpy as np

#: DALI's ``kDaliDataloaderSeed``.
DALI_LISTING_SEED = 524287
_U32 = np.uint64(0xFFFFFFFF)
_CHUNK = 1 << 16
_PAIRS_MAX = 65535  # largest n with (2**32 - 1) // n >= n: std::shuffle then draws two swaps at once


def _uniform(rng: np.random.RandomState, ranges: np.ndarray) -> np.ndarray:
    """One draw in ``[0, r)`` per entry of ``ranges``, in order, as libstdc++'s
    ``uniform_int_distribution`` makes them from a 32-bit generator (Lemire's method: a 32x32-bit
    product whose low half falls below ``2**32 % r`` is rejected and drawn again from the next
    output). Rejections are rare (at most ``r / 2**32``), so draws are made a chunk at a time, up
    to the next rejection."""
    ranges = ranges.astype(np.uint64)
    thresholds = (np.uint64(1 << 32) - ranges) % ranges
    out = np.empty(len(ranges), dtype=np.uint64)
    raw = np.empty(0, dtype=np.uint64)
    pos = k = 0  # the next draw, and the generator output it starts from
    while pos < len(ranges):
        r = ranges[pos : pos + _CHUNK]
        if k + len(r) > len(raw):
            more = rng.randint(0, 1 << 32, size=k + len(r) - len(raw) + _CHUNK, dtype=np.uint32)
            raw = np.concatenate([raw[k:], more.astype(np.uint64)])
            k = 0
        product = raw[k : k + len(r)] * r
        rejected = np.flatnonzero((product & _U32) < thresholds[pos : pos + len(r)])
        taken = int(rejected[0]) if len(rejected) else len(r)
        out[pos : pos + taken] = product[:taken] >> np.uint64(32)
        pos += taken
        k += taken + (1 if len(rejected) else 0)
    return out


@functools.lru_cache(maxsize=8)
def dali_listing_permutation(size: int, seed: int = DALI_LISTING_SEED) -> np.ndarray:
    """Position ``p`` of the shuffled listing is sample ``result[p]``: ``std::shuffle`` of
    ``[0, size)`` with ``std::mt19937(seed)``. Read-only; O(size), about 1 s for ImageNet's
    1.28 million files, and cached per size."""
    order = list(range(size))
    if size > 1:
        rng = np.random.RandomState(seed)
        if size <= _PAIRS_MAX:
            # an even size swaps element 1 alone first, then pairs (i, i + 1) from one draw each
            first = 2 - size % 2
            b0 = np.arange(first, size, 2, dtype=np.uint64) + np.uint64(1)
            b1 = b0 + np.uint64(1)
            draws = _uniform(rng, np.concatenate([np.full(first - 1, 2, dtype=np.uint64), b0 * b1]))
            if first == 2:
                j = int(draws[0])
                order[1], order[j] = order[j], order[1]
                draws = draws[1:]
            for i, a, b in zip(range(first, size, 2), (draws // b1).tolist(), (draws % b1).tolist()):
                order[i], order[a] = order[a], order[i]
                order[i + 1], order[b] = order[b], order[i + 1]
        else:
            draws = _uniform(rng, np.arange(2, size + 1, dtype=np.uint64)).tolist()
            for i, j in zip(range(1, size), draws):
                order[i], order[j] = order[j], order[i]
    result = np.array(order, dtype=np.int64)
    result.flags.writeable = False
    return result
