"""Random number operators: ``random.coin_flip`` and ``random.uniform``.

Each draws uniform floats keyed by (seed, epoch, sample, operator)
(:meth:`~raypipe.operator.Operator.draws`), so a sample's value never depends on threads,
actors, recomputation or the samples computed with it; a chunk of samples draws at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_range, register
from ..types import to_numpy_dtype


def _shape(op: str, shape) -> tuple[int, ...]:
    if shape is None:
        return ()
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(s, (int, np.integer)) or s < 0 for s in shape):
        raise ArgumentError(f"{op}: shape must hold non-negative ints, got {shape!r}")
    return shape


@register
class CoinFlip(Operator):
    """1 with ``probability``, else 0 (int32), one value (or ``shape`` values) per sample."""

    schema = Schema("random.coin_flip", devices=("cpu",), min_inputs=0, max_inputs=0)

    def configure(self, probability: float = 0.5, shape=None, dtype=None) -> None:
        if not 0.0 <= float(probability) <= 1.0:
            raise ArgumentError(f"random.coin_flip: probability must be in [0, 1], got {probability!r}")
        self.probability = float(probability)
        self.shape = _shape("random.coin_flip", shape)
        self.dtype = to_numpy_dtype(dtype) if dtype is not None else np.dtype(np.int32)

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk(inputs, args, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The flips of a chunk of samples from one draw."""
        flips = self.draws(ctxs, math.prod(self.shape)) < self.probability
        return _per_sample(flips.astype(self.dtype), self.shape)


@register
class Uniform(Operator):
    """Uniform float32 values in ``range`` [lo, hi), or picks from ``values`` when given."""

    schema = Schema("random.uniform", devices=("cpu",), min_inputs=0, max_inputs=0)

    def configure(self, range: Sequence[float] = (-1.0, 1.0), values: Sequence[float] | None = None, shape=None):
        self.range = check_range("random.uniform", "range", range)
        self.values = None if values is None else np.asarray(values, dtype=np.float32)
        if self.values is not None and self.values.size == 0:
            raise ArgumentError("random.uniform: values must not be empty")
        self.shape = _shape("random.uniform", shape)

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk(inputs, args, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The values of a chunk of samples from one draw."""
        draws = self.draws(ctxs, math.prod(self.shape))
        if self.values is not None:
            picks = np.minimum((draws * len(self.values)).astype(np.int64), len(self.values) - 1)
            return _per_sample(self.values[picks], self.shape)
        lo, hi = self.range
        return _per_sample((lo + (hi - lo) * draws).astype(np.float32), self.shape)


def _per_sample(values: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each sample's array of ``shape`` from ``values``, a column per sample (as drawn)."""
    rows = np.ascontiguousarray(values.T).reshape(values.shape[1], *shape)
    return [rows[k, ...] for k in range(len(rows))]
