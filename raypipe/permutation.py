"""A keyed bijection over ``[0, n)``: a balanced Feistel network with cycle-walking.

It stands in for a stored permutation: position ``p`` of an epoch's shuffled order
is ``permute(p)``, computed on demand in O(1) memory, so planning any batch of any
epoch costs the same for a thousand samples or billions. A permutation of at most
:data:`TABLE_MAX` values is tabulated whole on its first use instead (the same values):
for those the network's fixed cost per call, mostly cycle-walking, would outweigh the
batch it maps, and a table (one each way) costs at most 128 KiB.
"""

from __future__ import annotations

import numpy as np

_ROUNDS = 6
TABLE_MAX = 1 << 14  #: permutations of up to this many values are tabulated on first use
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
        self._forward: np.ndarray | None = None
        self._backward: np.ndarray | None = None

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
        if self.n <= TABLE_MAX:
            if self._backward is None:
                backward = np.empty(self.n, dtype=np.int64)
                backward[self._table()] = np.arange(self.n, dtype=np.int64)
                self._backward = backward
            return np.asarray(self._backward[self._checked(values)])
        return self._walk(self._checked(values), self._decrypt)

    def __call__(self, positions: np.ndarray | int) -> np.ndarray:
        if self.n <= TABLE_MAX:
            return np.asarray(self._table()[self._checked(positions)])
        return self._walk(self._checked(positions), self._encrypt)

    def _table(self) -> np.ndarray:
        """Every position's value, computed by the network once."""
        if self._forward is None:
            self._forward = self._walk(np.arange(self.n, dtype=np.uint64), self._encrypt)
        return self._forward

    def _checked(self, positions: np.ndarray | int) -> np.ndarray:
        x = np.asarray(positions, dtype=np.uint64)
        if x.size and int(x.max()) >= self.n:
            raise IndexError(f"position {int(x.max())} outside [0, {self.n})")
        return x

    def _walk(self, x: np.ndarray, step) -> np.ndarray:
        out = np.array(step(x), dtype=np.uint64)  # an array even for one position, to walk in place
        outside = out >= np.uint64(self.n)
        while outside.any():
            out[outside] = step(out[outside])
            outside = out >= np.uint64(self.n)
        return out.astype(np.int64)
