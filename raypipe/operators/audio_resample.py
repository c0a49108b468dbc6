"""``audio_resample``: audio (``(length,)`` or ``(length, channels)``) resampled with DALI's
Hann-windowed sinc (:mod:`.audio_resampling`, the filter the audio decoder uses), as DALI's operator.

The ratio is ``out_rate / in_rate``, or ``scale``, or ``out_length`` over the input's length (each
per sample too); rates and scales are float32, as DALI takes them, so lengths and positions are
DALI's. As in DALI, audio whose output type (``dtype``) is its own is resampled in its own units (0
of them outside the signal's ends) and rounded and saturated for integers; audio converted to another
type is resampled in [-1, 1] (signed integers over their maximum, unsigned ones about their half
range) and converted to it, rounded to nearest and saturated. Converting to an unsigned integer
type, DALI's first and last few outputs differ (its last are 0, not the 128 of silence); here they
are resampled like the others.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register
from .audio_resampling import lobes_for, resample
from .cast import parse_dtype, round_half_away

OP = "audio_resample"
RATIOS = ("in_rate", "out_rate", "scale", "out_length")


def to_unit(values: np.ndarray, source: np.dtype) -> np.ndarray:
    """Values in the units of type ``source`` as float32 in [-1, 1], as DALI's ConvertNorm: floats
    as they are, signed integers over the type's maximum, unsigned ones about its half range."""
    if source.kind == "f":
        return values.astype(np.float32, copy=False)
    info = np.iinfo(source)
    if info.min < 0:
        return (values.astype(np.float64) / info.max).astype(np.float32)
    half = info.max / 2
    return ((values.astype(np.float64) - half) / half).astype(np.float32)


def from_unit(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 audio in [-1, 1] as ``dtype``: the inverse of :func:`to_unit`, rounded to nearest
    (ties away from zero) and saturated for integers."""
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    wide = values.astype(np.float64)
    scaled = wide * info.max if info.min < 0 else wide * (info.max / 2) + info.max / 2
    return np.clip(round_half_away(np, scaled), info.min, info.max).astype(dtype)


@register
class AudioResample(Operator):
    """Each sample resampled by its ratio."""

    schema = Schema(OP, devices=("cpu",), arg_inputs=RATIOS)

    def configure(
        self, in_rate=None, out_rate=None, scale=None, out_length=None, quality: float = 50.0, dtype: Any = None
    ) -> None:
        self.static = {k: v for k, v in zip(RATIOS, (in_rate, out_rate, scale, out_length)) if v is not None}
        for name, value in self.static.items():
            check_number(OP, name, value)
        quality = check_number(OP, "quality", quality)
        if not 0 <= quality <= 100:
            raise ArgumentError(f"{OP}: quality must be in [0, 100], got {quality}")
        self.lobes = lobes_for(quality)
        self.dtype = None if dtype is None else parse_dtype(OP, "dtype", dtype)
        if self.dtype is not None and self.dtype.kind == "b":
            raise ArgumentError(f"{OP}: dtype must be a numeric type, got bool")
        self._check_ratio(set(self.static))

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        self._check_ratio({*self.static, *arg_inputs}, final=True)

    @staticmethod
    def _check_ratio(given: set[str], final: bool = False) -> None:
        """One way of giving the ratio, as DALI: both rates, or ``scale``, or ``out_length``."""
        ways = [w for w in ({"in_rate", "out_rate"}, {"scale"}, {"out_length"}) if w & given]
        if len(ways) > 1:
            raise ArgumentError(f"{OP}: give in_rate and out_rate, or scale, or out_length, not {sorted(given)}")
        if final and not ways:
            raise ArgumentError(f"{OP}: the ratio is missing: give in_rate and out_rate, or scale, or out_length")
        if ways and ways[0] == {"in_rate", "out_rate"} and final and given & ways[0] != ways[0]:
            raise ArgumentError(f"{OP}: in_rate and out_rate go together")

    def compute(self, xp, inputs, args, ctx):
        samples = np.asarray(inputs[0])
        if samples.ndim not in (1, 2) or samples.dtype.kind not in "iuf":
            raise ValueError(
                f"{OP}: audio must be numeric samples of shape (length,) or (length, channels), "
                f"got {samples.dtype} of shape {samples.shape}"
            )
        value = {k: float(as_scalar(args[k])) if k in args else float(v) for k, v in {**self.static, **args}.items()}
        length = samples.shape[0]
        if "out_length" in value:
            in_rate, out_rate = float(length), float(int(value["out_length"]))
        elif "scale" in value:
            in_rate, out_rate = 1.0, float(np.float32(value["scale"]))
        else:
            in_rate, out_rate = float(np.float32(value["in_rate"])), float(np.float32(value["out_rate"]))
        if not (in_rate > 0 and out_rate > 0):
            raise ValueError(f"{OP}: the ratio must be positive, got {out_rate} / {in_rate}")
        target = samples.dtype if self.dtype is None else self.dtype
        if target == samples.dtype:  # resampled in the input's own units, as DALI
            out = self._resampled(samples.astype(np.float32), in_rate, out_rate)
            if target.kind == "f":
                return out.astype(target)
            info = np.iinfo(target)
            return np.clip(round_half_away(np, out.astype(np.float64)), info.min, info.max).astype(target)
        return from_unit(self._resampled(to_unit(samples, samples.dtype), in_rate, out_rate), target)

    def _resampled(self, signal: np.ndarray, in_rate: float, out_rate: float) -> np.ndarray:
        return resample(signal, in_rate, out_rate, self.lobes) if len(signal) else signal
