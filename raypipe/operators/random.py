"""Random number operators: ``random.coin_flip``, ``random.uniform``, ``random.normal``,
``random.choice`` and ``random.beta``.

Each draws uniform floats keyed by (seed, epoch, sample, operator)
(:meth:`~raypipe.operator.Operator.draws`), so a sample's value never depends on threads,
actors, recomputation or the samples computed with it; a chunk of samples draws at once.
``random.normal`` turns pairs of them into normal values (Box-Muller), ``random.choice`` one each into
an index (uniform, or through the cumulative ``p``). ``uniform`` and ``normal`` take DALI's ``dtype``
(integer types round to nearest and saturate) and its optional input, whose samples' shapes the
outputs take. ``random.beta`` is the exception: gamma variates are drawn by rejection, a varying
number of uniforms each, so it draws from the sample's keyed generator
(:meth:`~raypipe.operator.Operator.rng`, keyed the same), as the rejection loops of the crop operators do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..backend import to_host
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
    """1 with ``probability``, else 0 (int32), one value (or ``shape`` values) per sample, or with
    an input one per value of each sample of it, in its shape (DALI's shape-like input:
    ``fn.random.coin_flip(0.4)`` is one flip per sample with probability 0.5)."""

    schema = Schema("random.coin_flip", devices=("cpu",), min_inputs=0, max_inputs=1)

    def configure(self, probability: float = 0.5, shape=None, dtype=None) -> None:
        if not 0.0 <= float(probability) <= 1.0:
            raise ArgumentError(f"random.coin_flip: probability must be in [0, 1], got {probability!r}")
        self.probability = float(probability)
        self.shape = _shape("random.coin_flip", shape)
        self.dtype = to_numpy_dtype(dtype) if dtype is not None else np.dtype(np.int32)

    def bind_inputs(self, count, arg_inputs) -> None:
        if count and self.shape:
            raise ArgumentError("random.coin_flip: give shape or a shape-like input, not both")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""  # as DALI: a shape-like input gives shapes, not a layout

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk([[x] for x in inputs], args, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The flips of a chunk of samples from one draw (each sample's own, in its input's shape)."""
        if inputs:
            return [
                _per_sample(
                    (self.draws([ctx], math.prod(np.shape(x))) < self.probability).astype(self.dtype), np.shape(x)
                )[0]
                for ctx, x in zip(ctxs, inputs[0])
            ]
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

    def run_batch(self, xp, inputs, args, ctxs):
        """The GPU stage's batch (``device="gpu"``): the values drawn on the host as the CPU stage
        draws them (keyed per sample, the input's shapes only), then moved to the device."""
        shapes = [[np.broadcast_to(np.False_, tuple(x.shape)) for x in inputs[0]]] if inputs else []
        host_args = {k: [to_host(v) for v in values] for k, values in args.items()}
        return [xp.asarray(v) for v in self.run_chunk(shapes, host_args, ctxs)]

    def generate(self, draws: np.ndarray, shape, args, first: int, count: int) -> list[np.ndarray]:
        """The samples ``first .. first + count`` of the chunk from their ``draws`` (a column each)."""
        raise NotImplementedError


@register
class Uniform(_Distribution):
    """Uniform values in ``range`` [lo, hi), or picks from ``values`` when given (float32, or ``dtype``)."""

    schema = Schema("random.uniform", devices=("cpu", "gpu"), min_inputs=0, max_inputs=1)

    def configure(
        self, range: Sequence[float] = (-1.0, 1.0), values: Sequence[float] | None = None, shape=None, dtype=None
    ):
        self.range = check_range("random.uniform", "range", range)
        self.values = None if values is None else np.asarray(values, dtype=np.float32)
        if self.values is None and self.range[0] == self.range[1]:  # as DALI, which draws from [lo, hi)
            raise ArgumentError(f"random.uniform: range [lo, hi) must not be empty (lo < hi), got {range!r}")
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


class _Sampled(Operator):
    """A random operator whose samples take ``shape`` (static or per sample), or the shapes of a
    shape-like input (never both, as in DALI); one value per sample by default."""

    #: which input, if any, gives the shapes
    shape_like_input: int

    def configure_shape(self, shape) -> None:
        self.shape = _shape(self.schema.name, shape)
        self.has_shape = shape is not None
        self.shape_like = self.shape_per_sample = False

    def bind_inputs(self, count: int, arg_inputs) -> None:
        self.shape_like = count > self.shape_like_input
        self.shape_per_sample = "shape" in arg_inputs
        if self.shape_like and (self.has_shape or self.shape_per_sample):
            raise ArgumentError(f"{self.schema.name}: shape cannot be given with a shape-like input")

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk([[x] for x in inputs], {k: [v] for k, v in args.items()}, [ctx])[0]

    def sample_shapes(self, inputs, args, count: int) -> list[tuple[int, ...]]:
        """The shape of each of ``count`` samples' values."""
        if self.shape_like:
            return [tuple(np.shape(x)) for x in inputs[self.shape_like_input]]
        if "shape" in args:
            return [_shape(self.schema.name, tuple(int(v) for v in np.ravel(s))) for s in args["shape"]]
        return [self.shape] * count


@register
class Choice(_Sampled):
    """Values picked from the input's first axis (rows of a 2-D input, ...), or from ``range(n)`` for
    a scalar integer ``n``: uniformly, or with probabilities ``p`` (per sample). Of the input's type."""

    schema = Schema("random.choice", devices=("cpu",), min_inputs=1, max_inputs=2, arg_inputs=("p", "shape"))
    shape_like_input = 1

    def configure(self, p: float | Sequence[float] | None = None, shape=None) -> None:
        self.p = None if p is None else _probabilities(p)
        self.configure_shape(shape)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The input's layout where the values have its rank, less its first axis where one less (as
        DALI); ``""`` otherwise, and where the rank is known only when running (per-sample
        ``shape``, a shape-like input without a layout)."""
        given = input_layouts[0] if input_layouts else ""
        if not given or self.shape_per_sample or (self.shape_like and not input_layouts[1]):
            return ""
        picked = len(input_layouts[1]) if self.shape_like else len(self.shape)
        rank = picked + len(given) - 1
        return given if rank == len(given) else given[1:] if rank == len(given) - 1 else ""

    def run_chunk(self, inputs, args, ctxs):
        """The picks of a chunk of samples from one draw (one per sample where their shapes differ)."""
        shapes = self.sample_shapes(inputs, args, len(ctxs))
        draws = sample_draws(self, ctxs, [math.prod(s) for s in shapes])
        picks = []
        for k, (source, u, shape) in enumerate(zip(inputs[0], draws, shapes)):
            source = np.asarray(source)
            n = _choice_count(source)
            weights = self.p if "p" not in args else np.asarray(args["p"][k], dtype=np.float64).reshape(-1)
            index = _pick(u, n, weights).reshape(shape)
            picks.append(index.astype(source.dtype) if source.ndim == 0 else source[index])
        return picks


def _choice_count(source: np.ndarray) -> int:
    """How many values a ``random.choice`` input offers: its first extent, or the scalar itself."""
    if source.ndim == 0:
        if source.dtype.kind not in "iu":
            raise ValueError(f"random.choice: a scalar input (how many values) must be an integer, got {source.dtype}")
        n = int(source)
    else:
        n = source.shape[0]
    if n <= 0:
        raise ValueError(f"random.choice: needs a positive number of values to choose from, got {n}")
    return n


def _probabilities(value) -> np.ndarray:
    """A static ``p``: each in [0, 1]; several must sum to 1 (one is broadcast, so checked when running)."""
    try:
        p = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ArgumentError(f"random.choice: p must be a number or a list of numbers, got {value!r}") from None
    if p.size == 0 or not ((p >= 0) & (p <= 1)).all():
        raise ArgumentError(f"random.choice: p must hold probabilities in [0, 1], got {p.tolist()}")
    if p.size > 1 and abs(p.sum() - 1.0) >= 1e-4:
        raise ArgumentError(f"random.choice: p must sum to 1, got {p.sum():.6g}")
    return p


def _pick(u: np.ndarray, n: int, p: np.ndarray | None) -> np.ndarray:
    """Indices below ``n`` from uniform draws ``u``: uniform, or of probabilities ``p`` (one
    probability is every value's)."""
    if p is None:
        return np.minimum((u * n).astype(np.int64), n - 1)
    if p.size == 1:
        p = np.full(n, p[0])
    if p.size != n:
        raise ValueError(f"random.choice: p has {p.size} probabilities for {n} values")
    if not ((p >= 0) & (p <= 1)).all() or abs(p.sum() - 1.0) >= 1e-4:
        raise ValueError(f"random.choice: p must hold probabilities in [0, 1] summing to 1, got {p.tolist()}")
    cumulative = np.cumsum(p)
    last = int(np.flatnonzero(p)[-1])  # u * total rounded up to total must not pick a trailing 0
    return np.minimum(np.searchsorted(cumulative, u * cumulative[-1], side="right"), last)


@register
class Beta(_Sampled):
    """Beta(``alpha``, ``beta``) values in [0, 1] (both per sample), float32 or ``dtype`` FLOAT64."""

    schema = Schema("random.beta", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=("alpha", "beta", "shape"))
    shape_like_input = 0

    def configure(self, alpha: float = 1.0, beta: float = 1.0, shape=None, dtype=None) -> None:
        self.alpha = _positive("alpha", alpha, ArgumentError)
        self.beta = _positive("beta", beta, ArgumentError)
        self.configure_shape(shape)
        self.dtype = np.dtype(np.float32) if dtype is None else parse_dtype("random.beta", "dtype", dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ArgumentError(f"random.beta: dtype {self.dtype} is not supported (FLOAT and FLOAT64 are)")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""  # as DALI: a shape-like input gives shapes, not a layout

    def run_chunk(self, inputs, args, ctxs):
        """Each sample's values from its own keyed generator (gamma variates reject a varying number
        of uniforms, see the module docstring)."""
        shapes = self.sample_shapes(inputs, args, len(ctxs))
        values = []
        for k, (ctx, shape) in enumerate(zip(ctxs, shapes)):
            alpha, beta = (self._parameter(args, name, k) for name in ("alpha", "beta"))
            values.append(np.asarray(self.rng(ctx).beta(alpha, beta, size=shape), dtype=self.dtype))
        return values

    def _parameter(self, args, name: str, k: int) -> float:
        """``alpha`` or ``beta`` of sample ``k`` of the chunk."""
        if name not in args:
            return getattr(self, name)
        return _positive(name, sample_scalar("random.beta", name, args[name][k]))


def _positive(name: str, value, error: type[Exception] = ValueError) -> float:
    """A ``random.beta`` parameter: a positive finite number (``error`` otherwise)."""
    number = check_number("random.beta", name, value)
    if number <= 0:
        raise error(f"random.beta: {name} must be positive, got {value!r}")
    return number


#: the most draws taken in one :meth:`Operator.draws` call: larger arrays leave the cache (a chunk of
#: 16 samples of 300,000 draws each takes seven times as long as the samples one by one)
_CHUNK_DRAWS = 1 << 16


def sample_draws(op: Operator, ctxs, counts: Sequence[int]) -> list[np.ndarray]:
    """``counts[k]`` keyed uniform draws for sample ``k`` of ``ctxs``: samples of equal counts draw
    together (up to ``_CHUNK_DRAWS`` at once), others one by one; the values are the same either way."""
    if not counts:
        return []
    if any(c != counts[0] for c in counts):
        return [sample_draws(op, [ctx], [c])[0] for ctx, c in zip(ctxs, counts)]
    if counts[0] == 0:
        return [np.empty(0) for _ in counts]
    step = max(1, _CHUNK_DRAWS // counts[0])
    columns = []
    for first in range(0, len(counts), step):
        draws = op.draws(ctxs[first : first + step], counts[0])
        columns.extend(draws[:, k] for k in range(draws.shape[1]))
    return columns


def sample_scalar(op: str, name: str, value) -> float:
    """A per-sample argument input's value for one sample: one finite number."""
    array = np.asarray(to_host(value))
    if array.size != 1:
        raise ValueError(f"{op}: {name} must be one number per sample, got an array of shape {array.shape}")
    return check_number(op, name, array.reshape(-1)[0])


def _per_sample(values: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each sample's array of ``shape`` from ``values``, a column per sample (as drawn)."""
    rows = np.ascontiguousarray(values.T).reshape(values.shape[1], *shape)
    return [rows[k, ...] for k in range(len(rows))]
