"""Random number operators: ``random.coin_flip`` and ``random.uniform``.

Each draws from the per-sample stream keyed by (seed, epoch, sample, operator),
so a sample's value never depends on threads, actors or recomputation.
"""

from __future__ import annotations

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
        draw = self.rng(ctx).random(self.shape) < self.probability
        return np.asarray(draw, dtype=self.dtype)


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
        rng = self.rng(ctx)
        if self.values is not None:
            return np.asarray(self.values[rng.integers(0, len(self.values), self.shape)], dtype=np.float32)
        lo, hi = self.range
        return np.asarray(lo + (hi - lo) * rng.random(self.shape), dtype=np.float32)
