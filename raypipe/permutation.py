"""A keyed bijection over ``[0, n)``: a balanced Feistel network with cycle-walking.

It stands in for a stored permutation: position ``p`` of an epoch's shuffled order
is ``permute(p)``, computed on demand in O(1) memory, so planning any batch of any
epoch costs the same for a thousand samples or billions.
"""

from __future__ import annotations

import numpy as np

_ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a fast, well-spread 64-bit hash."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


class FeistelPermutation:
    """``perm(positions)`` maps positions in ``[0, n)`` to distinct values in ``[0, n)``."""

    def __init__(self, n: int, key: int):
        if n < 1:
            raise ValueError(f"permutation size must be positive, got {n}")
        self.n = n
        half = max(1, ((n - 1).bit_length() + 1) // 2)
        self._half = np.uint64(half)
        self._mask = np.uint64((1 << half) - 1)
        keys = _mix(np.arange(1, _ROUNDS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(key))
        self._keys = keys

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left = x >> self._half
        right = x & self._mask
        with np.errstate(over="ignore"):
            for k in self._keys:
                left, right = right, left ^ (_mix(right ^ k) & self._mask)
        return (left << self._half) | right

    def _decrypt(self, x: np.ndarray) -> np.ndarray:
        left = x >> self._half
        right = x & self._mask
        with np.errstate(over="ignore"):
            for k in self._keys[::-1]:
                left, right = right ^ (_mix(left ^ k) & self._mask), left
        return (left << self._half) | right

    def inverse(self, values: np.ndarray | int) -> np.ndarray:
        """The positions that map to ``values``: ``perm.inverse(perm(p)) == p``."""
        return self._walk(values, self._decrypt)

    def __call__(self, positions: np.ndarray | int) -> np.ndarray:
        return self._walk(positions, self._encrypt)

    def _walk(self, positions: np.ndarray | int, step) -> np.ndarray:
        x = np.asarray(positions, dtype=np.uint64).copy()
        if x.size and int(x.max()) >= self.n:
            raise IndexError(f"position {int(x.max())} outside [0, {self.n})")
        out = step(x)
        outside = out >= np.uint64(self.n)
        while outside.any():
            out[outside] = step(out[outside])
            outside = out >= np.uint64(self.n)
        return out.astype(np.int64)
