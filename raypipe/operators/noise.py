"""Noise operators: ``noise.gaussian``, ``noise.salt_and_pepper`` and ``noise.shot``, as DALI 2.4's.

Each returns its input's shape, type and layout with noise applied, for DALI's input types (the
integer types and float32). Gaussian noise and the salt-and-pepper picks come from uniform draws keyed
by (seed, epoch, sample, operator) (:meth:`~raypipe.operator.Operator.draws`), so a sample's noise
never depends on threads, actors, recomputation or the samples computed with it; samples of one
shape draw at once. Shot noise's Poisson counts are drawn by rejection, a varying number of uniforms
each, so they come from the sample's keyed generator (:meth:`~raypipe.operator.Operator.rng`, keyed
the same).

On ``device="gpu"`` the noise is drawn on the host, keyed as on ``cpu``, and moved; the sums and
picks run on the device and give the host's values. Shot noise needs the input's values for its
draws: its input is copied to the host and the result moved back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..backend import to_host
from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .cast import c_cast, saturate_cast
from .random import sample_draws, sample_scalar

#: the input types DALI 2.4's noise operators take
NOISE_TYPES = tuple(
    np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32")
)


class _Noise(Operator):
    """A noise operator on one input, per sample (CPU stage, a chunk at once) or per batch (GPU stage)."""

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk([[inputs[0]]], {k: [v] for k, v in args.items()}, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The noisy samples of a chunk."""
        return self.apply(np, [np.asarray(x) for x in inputs[0]], args, ctxs)

    def run_batch(self, xp, inputs, args, ctxs):
        """The GPU stage's batch: the noise drawn on the host as the CPU stage draws it, then moved."""
        host_args = {k: [to_host(v) for v in values] for k, values in args.items()}
        return self.apply(xp, list(inputs[0]), host_args, ctxs)

    def apply(self, xp: ModuleType, xs: list[Any], args: dict[str, list], ctxs) -> list[Any]:
        """The samples ``xs`` (arrays of ``xp``) with noise; ``args`` hold host values."""
        raise NotImplementedError

    def check_type(self, x) -> None:
        """A ValueError naming the operator for input types DALI's operator refuses."""
        if np.dtype(x.dtype) not in NOISE_TYPES:
            names = ", ".join(map(str, NOISE_TYPES))
            raise ValueError(f"{self.schema.name}: unsupported input type {x.dtype} (DALI's take {names})")

    def parameters(self, args: dict[str, list], name: str, count: int) -> list[float]:
        """Argument ``name`` of each of ``count`` samples: its per-sample values, or the static one."""
        if name not in args:
            return [getattr(self, name)] * count
        return [sample_scalar(self.schema.name, name, v) for v in args[name]]


@register
class Gaussian(_Noise):
    """The input plus normal noise of ``mean`` and ``stddev`` (per sample), rounded to nearest and
    saturated to the input's type. Summed in float32, or float64 for 32- and 64-bit integers, as DALI."""

    schema = Schema("noise.gaussian", devices=("cpu", "gpu"), arg_inputs=("mean", "stddev"))

    def configure(self, mean: float = 0.0, stddev: float = 1.0) -> None:
        self.mean = check_number("noise.gaussian", "mean", mean)
        self.stddev = check_number("noise.gaussian", "stddev", stddev)
        if self.stddev < 0:
            raise ArgumentError(f"noise.gaussian: stddev must be non-negative, got {stddev!r}")

    def apply(self, xp, xs, args, ctxs):
        for x in xs:
            self.check_type(x)
        means, stddevs = (self.parameters(args, name, len(xs)) for name in ("mean", "stddev"))
        if min(stddevs, default=0.0) < 0:
            raise ValueError(f"noise.gaussian: stddev must be non-negative, got {min(stddevs)}")
        draws = sample_draws(self, ctxs, [2 * ((x.size + 1) // 2) for x in xs])
        noisy = []
        for x, u, mean, stddev in zip(xs, draws, means, stddevs):
            ftype = np.float64 if x.dtype.kind in "iu" and x.dtype.itemsize >= 4 else np.float32
            total = xp.asarray((mean + stddev * _standard_normal(u, x.size)).astype(ftype).reshape(x.shape))
            total += x
            noisy.append(saturate_cast(xp, total, x.dtype, overwrite=True))
        return noisy


def _standard_normal(u: np.ndarray, count: int) -> np.ndarray:
    """``count`` standard normal values from an even number of uniform draws (both of Box-Muller's)."""
    half = u.shape[0] // 2
    radius = np.sqrt(-2.0 * np.log1p(-u[:half]))
    angle = 2.0 * np.pi * u[half:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]


@register
class SaltAndPepper(_Noise):
    """Values replaced, with probability ``prob``, by ``salt_val`` (a ``salt_vs_pepper`` share of
    them) or ``pepper_val`` (all four per sample). Without ``per_channel`` a pixel's channels are
    replaced together: the layout's ``C`` axis, which must come first or last, or the last axis of
    input without a layout (as DALI)."""

    schema = Schema(
        "noise.salt_and_pepper",
        devices=("cpu", "gpu"),
        arg_inputs=("prob", "salt_vs_pepper", "salt_val", "pepper_val"),
    )

    def configure(
        self,
        prob: float = 0.05,
        salt_vs_pepper: float = 0.5,
        salt_val: float | None = None,
        pepper_val: float | None = None,
        per_channel: bool = False,
    ) -> None:
        self.prob = _probability("prob", prob, ArgumentError)
        self.salt_vs_pepper = _probability("salt_vs_pepper", salt_vs_pepper, ArgumentError)
        op = "noise.salt_and_pepper"
        self.salt_val = None if salt_val is None else check_number(op, "salt_val", salt_val)
        self.pepper_val = None if pepper_val is None else check_number(op, "pepper_val", pepper_val)
        if not isinstance(per_channel, (bool, np.bool_)):
            raise ArgumentError(f"{op}: per_channel must be a bool, got {per_channel!r}")
        self.per_channel = bool(per_channel)
        self.channel_axis = -1  # the last, unless the input's layout puts C first

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if given and not self.per_channel:
            if given[-1] != "C" and given[0] != "C":
                raise ArgumentError(
                    f"noise.salt_and_pepper: per_channel=False replaces a pixel's channels together and needs "
                    f"the channel axis C first or last in the layout, got {given!r}; pass per_channel=True"
                )
            self.channel_axis = -1 if given[-1] == "C" else 0
        return given

    def apply(self, xp, xs, args, ctxs):
        for x in xs:
            self.check_type(x)
        count = len(xs)
        probs = [_probability("prob", p) for p in self.parameters(args, "prob", count)]
        shares = [_probability("salt_vs_pepper", s) for s in self.parameters(args, "salt_vs_pepper", count)]
        salts = self.parameters(args, "salt_val", count)
        peppers = self.parameters(args, "pepper_val", count)
        grids = [self._grid(tuple(x.shape)) for x in xs]
        draws = sample_draws(self, ctxs, [math.prod(g) for g in grids])
        noisy = []
        for x, u, grid, prob, share, salt, pepper in zip(xs, draws, grids, probs, shares, salts, peppers):
            u = u.reshape(grid)
            salt, pepper = xp.asarray(_value(salt, x.dtype, 1)), xp.asarray(_value(pepper, x.dtype, -1))
            values = xp.where(xp.asarray(u < prob * share), salt, pepper)
            noisy.append(xp.where(xp.asarray(u < prob), values, x))
        return noisy

    def _grid(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of a sample's draws: its own, or 1 along the channels replaced together."""
        if self.per_channel or not shape:
            return shape
        axis = self.channel_axis % len(shape)
        return (*shape[:axis], 1, *shape[axis + 1 :])


def _probability(name: str, value: float, error: type[Exception] = ValueError) -> float:
    number = check_number("noise.salt_and_pepper", name, value)
    if not 0.0 <= number <= 1.0:
        raise error(f"noise.salt_and_pepper: {name} must be in [0, 1], got {value!r}")
    return number


def _value(value: float | None, dtype: np.dtype, sign: int) -> np.ndarray:
    """Salt (``sign`` 1) or pepper (-1) of ``dtype``: DALI's default (1.0 and -1.0 for floats, the
    type's maximum and minimum for integers), or the given value converted as C does (truncated,
    then wrapped: 300 as uint8 is 44)."""
    dtype = np.dtype(dtype)
    if value is None:
        if dtype.kind == "f":
            return np.asarray(sign, dtype)
        info = np.iinfo(dtype)
        return np.asarray(info.max if sign > 0 else info.min, dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return np.asarray(value).astype(dtype)
    return c_cast(math.trunc(value) % 2**64, dtype)


@register
class Shot(_Noise):
    """Shot (Poisson) noise: ``factor`` (per sample) times a Poisson count of mean
    ``max(0, input / factor)``, rounded to nearest and saturated to the input's type; ``factor`` 0
    returns the input, as DALI documents. Without ``factor`` it is 12: what DALI 2.4 applies then
    (its documentation says 20; an explicit ``factor`` is used as given)."""

    schema = Schema("noise.shot", devices=("cpu", "gpu"), arg_inputs=("factor",))

    def configure(self, factor: float = 12.0) -> None:
        self.factor = check_number("noise.shot", "factor", factor)

    def apply(self, xp, xs, args, ctxs):
        for x in xs:
            self.check_type(x)
        noisy = []
        for x, ctx, factor in zip(xs, ctxs, self.parameters(args, "factor", len(xs))):
            if np.float32(factor) == 0:  # DALI's factor is float32
                noisy.append(x)
            else:
                noisy.append(xp.asarray(_shot(np.asarray(to_host(x)), factor, self.rng(ctx))))
        return noisy


#: Poisson means above this take their mean: numpy draws up to about 9.2e18, and the noise there is
#: a billionth of the value, below float32's resolution
_MAX_MEAN = 1e18


def _shot(x: np.ndarray, factor: float, rng: np.random.Generator) -> np.ndarray:
    """``x`` with shot noise, in float32 as DALI (``x * (1 / factor)``, then ``count * factor``)."""
    flat = x.reshape(-1)  # arrays throughout: numpy gives scalars for 0-d ones
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.fmax(flat.astype(np.float32) * (np.float32(1) / np.float32(factor)), np.float32(0))
    counts = rng.poisson(np.minimum(mean, _MAX_MEAN)).astype(np.float32)
    counts = np.where(mean > _MAX_MEAN, mean, counts)
    return saturate_cast(np, counts * np.float32(factor), x.dtype, overwrite=True).reshape(x.shape)
