"""Random number operators: ``random.coin_flip``, ``random.uniform`` and ``random.normal``.

Each draws uniform floats keyed by (seed, epoch, sample, operator)
(:meth:`~raypipe.operator.Operator.draws`), so a sample's value never depends on threads,
actors, recomputation or the samples computed with it; a chunk of samples draws at once.
``random.normal`` turns pairs of them into normal values (Box-Muller). ``uniform`` and ``normal``
take DALI's ``dtype`` (integer types round to nearest and saturate) and its optional input, whose
samples' shapes the outputs take.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, check_range, register
from ..types import to_numpy_dtype
from .cast import parse_dtype, saturate_cast

#: the types DALI 2.4's ``random.uniform`` and ``random.normal`` produce
DRAW_TYPES = tuple(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"))
DRAW_TYPES += (np.dtype(np.float32), np.dtype(np.float64))


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


def _draw_type(op: str, dtype) -> np.dtype:
    """A ``dtype`` argument of ``uniform``/``normal``: float32 by default, else one of DALI's."""
    if dtype is None:
        return np.dtype(np.float32)
    chosen = parse_dtype(op, "dtype", dtype)
    if chosen not in DRAW_TYPES:
        raise ArgumentError(f"{op}: dtype {chosen} is not supported (integer types, FLOAT and FLOAT64 are)")
    return chosen


class _Distribution(Operator):
    """A random operator with ``shape``, ``dtype`` and an optional input whose shapes it copies."""

    shape: tuple[int, ...]

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk([[x] for x in inputs], {k: [v] for k, v in args.items()}, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The values of a chunk of samples from one draw (one per sample for an input's shapes)."""
        if inputs:
            return [
                self.generate(self.draws([ctx], self.per_value * math.prod(x.shape)), x.shape, args, k, 1)[0]
                for k, (ctx, x) in enumerate(zip(ctxs, inputs[0]))
            ]
        return self.generate(self.draws(ctxs, self.per_value * math.prod(self.shape)), self.shape, args, 0, len(ctxs))

    per_value = 1  # uniform draws per value

    def generate(self, draws: np.ndarray, shape, args, first: int, count: int) -> list[np.ndarray]:
        """The samples ``first .. first + count`` of the chunk from their ``draws`` (a column each)."""
        raise NotImplementedError


@register
class Uniform(_Distribution):
    """Uniform values in ``range`` [lo, hi), or picks from ``values`` when given (float32, or ``dtype``)."""

    schema = Schema("random.uniform", devices=("cpu",), min_inputs=0, max_inputs=1)

    def configure(
        self, range: Sequence[float] = (-1.0, 1.0), values: Sequence[float] | None = None, shape=None, dtype=None
    ):
        self.range = check_range("random.uniform", "range", range)
        self.values = None if values is None else np.asarray(values, dtype=np.float32)
        if self.values is not None and self.values.size == 0:
            raise ArgumentError("random.uniform: values must not be empty")
        self.shape = _shape("random.uniform", shape)
        self.dtype = _draw_type("random.uniform", dtype)

    def generate(self, draws, shape, args, first, count):
        if self.values is not None:
            picks = np.minimum((draws * len(self.values)).astype(np.int64), len(self.values) - 1)
            return _per_sample(saturate_cast(np, self.values[picks], self.dtype), shape)
        lo, hi = self.range
        if self.dtype == np.float32:
            return _per_sample((lo + (hi - lo) * draws).astype(np.float32), shape)
        return _per_sample(saturate_cast(np, lo + (hi - lo) * draws, self.dtype, overwrite=True), shape)


@register
class Normal(_Distribution):
    """Normal values of ``mean`` and ``stddev`` (per sample), float32 or ``dtype``."""

    schema = Schema("random.normal", devices=("cpu", "gpu"), min_inputs=0, max_inputs=1, arg_inputs=("mean", "stddev"))
    per_value = 2  # Box-Muller: two uniform draws per value

    def run_batch(self, xp, inputs, args, ctxs):
        """On ``device="gpu"`` (DALI infers it from a GPU input, as in ASR scripts' dither
        ``fn.random.normal(audio)``): the values the CPU gives, drawn on the host from the input's
        shapes alone and keyed alike, then moved to the device."""
        shapes = [[np.broadcast_to(np.zeros((), np.uint8), tuple(x.shape)) for x in inputs[0]]] if inputs else []
        host_args = {k: [np.asarray(v.get() if hasattr(v, "get") else v) for v in values] for k, values in args.items()}
        return [xp.asarray(v) for v in self.run_chunk(shapes, host_args, ctxs)]

    def configure(self, mean: float = 0.0, stddev: float = 1.0, shape=None, dtype=None) -> None:
        self.mean = check_number("random.normal", "mean", mean)
        self.stddev = check_number("random.normal", "stddev", stddev)
        if self.stddev < 0:
            raise ArgumentError(f"random.normal: stddev must be non-negative, got {stddev!r}")
        self.shape = _shape("random.normal", shape)
        self.dtype = _draw_type("random.normal", dtype)

    def generate(self, draws, shape, args, first, count):
        half = draws.shape[0] // 2
        radius = np.sqrt(-2.0 * np.log1p(-draws[:half]))
        standard = radius * np.cos(2.0 * np.pi * draws[half:])
        mean = self._parameter(args, "mean", self.mean, first, count)
        stddev = self._parameter(args, "stddev", self.stddev, first, count)
        return _per_sample(saturate_cast(np, mean + stddev * standard, self.dtype, overwrite=True), shape)

    @staticmethod
    def _parameter(args, name: str, default: float, first: int, count: int) -> np.ndarray:
        """Argument ``name`` of samples ``first .. first + count`` as a row (broadcast over draws)."""
        if name not in args:
            return np.float64(default)
        column = args[name][first : first + count]
        values = np.array([check_number("random.normal", name, np.asarray(v).reshape(-1)[0]) for v in column])
        if name == "stddev" and (values < 0).any():
            raise ValueError(f"random.normal: stddev must be non-negative, got {values.min()}")
        return values.reshape(1, count)


def _per_sample(values: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each sample's array of ``shape`` from ``values``, a column per sample (as drawn)."""
    rows = np.ascontiguousarray(values.T).reshape(values.shape[1], *shape)
    return [rows[k, ...] for k in range(len(rows))]
