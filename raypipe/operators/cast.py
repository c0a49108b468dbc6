"""``cast``: convert samples to another element type, saturating as DALI's ``ConvertSat`` does.

:func:`saturate_cast` and :func:`parse_dtype` are shared by the operators that take a
``dtype=`` argument (``crop_mirror_normalize``, ``color_twist``), so every operator
converts the same way: floating point to integer rounds to the nearest value (ties to
even, as CUDA's ``__float2int_rn``; DALI's host path rounds ties away from zero) and
clamps to the target's range; integer to narrower integer clamps; anything to bool is
``x != 0``; conversions to floating point are plain casts.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import DALIDataType, to_numpy_dtype


def parse_dtype(op: str, name: str, value: DALIDataType | np.dtype | type | str) -> np.dtype:
    """Validate a ``dtype`` argument (a ``types`` member or numpy dtype); return the numpy dtype."""
    try:
        dtype = to_numpy_dtype(value)
    except ValueError:
        raise ArgumentError(f"{op}: {name} must be a types.* member or a numpy dtype, got {value!r}") from None
    if dtype.kind not in "biuf":
        raise ArgumentError(f"{op}: {name} must be a numeric or bool type, got {dtype}")
    return dtype


@functools.cache
def _float_bounds(int_dtype: np.dtype, float_dtype: np.dtype) -> tuple[Any, Any, int]:
    """The widest ``[lo, hi]`` of ``float_dtype`` values inside the range of ``int_dtype``
    (``float32(2**31 - 1)`` rounds up to ``2**31``, which would overflow the cast), and the
    integer maximum; when ``hi`` falls short of it, the caller sets values above ``hi`` to it.
    Cached: ``np.iinfo`` costs microseconds, which a per-sample cast of a label would pay."""
    info, ftype = np.iinfo(int_dtype), float_dtype.type
    lo, hi = ftype(info.min), ftype(info.max)
    if int(hi) > info.max:
        hi = np.nextafter(hi, ftype(0))
    return lo, hi, int(info.max)


@functools.cache
def _int_bounds(src: np.dtype, dst: np.dtype) -> tuple[int, int] | None:
    """The ``[lo, hi]`` that integers of ``src`` clamp to as ``dst``, or None when every value fits."""
    a, b = np.iinfo(src), np.iinfo(dst)
    if a.min >= b.min and a.max <= b.max:
        return None
    return max(a.min, b.min), min(a.max, b.max)


def saturate_cast(xp: ModuleType, x: Any, dtype: np.dtype, overwrite: bool = False) -> Any:
    """``x`` converted to ``dtype`` with rounding and saturation (see the module docstring).

    ``overwrite=True`` lets a float ``x`` that the caller owns be rounded in place, which
    saves one full-size temporary on the hot paths."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype.kind == "b":
        return x != 0
    if dtype.kind == "f" or x.dtype.kind == "b":
        return x.astype(dtype)
    if x.dtype.kind == "f":
        if x.dtype.itemsize < 4:
            x, overwrite = x.astype(np.float32), True
        lo, hi, top = _float_bounds(dtype, x.dtype)
        rounded = xp.rint(x, out=x if overwrite else xp.empty_like(x))  # an array for 0-d samples too
        over = rounded > hi if int(hi) < top else None
        result = xp.clip(rounded, lo, hi, out=rounded).astype(dtype)
        if over is not None:
            result[over] = top
        return result
    bounds = _int_bounds(x.dtype, dtype)
    if bounds is None:
        return x.astype(dtype)
    return xp.clip(x, *bounds).astype(dtype)


def c_cast(value: float, dtype: np.dtype) -> np.ndarray:
    """A number as a 0-d array of ``dtype`` converted as C's ``static_cast`` does, which is how
    DALI converts scalar arguments such as fill and on/off values: truncate, then wrap (300 as
    uint8 is 44, -5 is 251)."""
    if dtype.kind in "iu":
        return np.asarray(int(value)).astype(np.int64).astype(dtype)
    return np.asarray(value).astype(dtype)


def dtype_or_alias(op: str, dtype: Any, output_dtype: Any) -> Any:
    """``dtype``, or DALI's deprecated alias ``output_dtype`` when only it is given (both: an error)."""
    if dtype is not None and output_dtype is not None:
        raise ArgumentError(f"{op}: dtype and its deprecated alias output_dtype cannot be used together")
    return dtype if dtype is not None else output_dtype


def round_half_away(xp: ModuleType, values: Any) -> Any:
    """``values`` rounded to the nearest integer, ties away from zero (DALI's host rounding)."""
    whole = xp.trunc(values)
    return xp.where(xp.abs(values - whole) >= 0.5, whole + xp.sign(values), whole)


@register
class Cast(Operator):
    """Convert each sample to ``dtype`` (rounding to nearest and saturating, as DALI)."""

    schema = Schema("cast", devices=("cpu", "gpu"))

    def configure(self, dtype: DALIDataType | np.dtype | type | str | None = None) -> None:
        if dtype is None:
            raise ArgumentError("cast: dtype is required")
        self.dtype = parse_dtype("cast", "dtype", dtype)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        return saturate_cast(xp, xp.asarray(inputs[0]), self.dtype)

    def run_chunk(self, inputs, args, ctxs) -> list:
        """A chunk's samples of one shape and type converted in one call (small samples, such as
        a reader's labels, cost a few numpy calls each otherwise); each result is a row of it."""
        samples = inputs[0]
        if not samples or args or not all(isinstance(x, np.ndarray) for x in samples):
            return [self.compute(np, [x], {}, ctx) for x, ctx in zip(samples, ctxs)]
        first = samples[0]
        if any(x.shape != first.shape or x.dtype != first.dtype for x in samples):
            return [saturate_cast(np, x, self.dtype) for x in samples]
        return list(saturate_cast(np, np.stack(samples), self.dtype, overwrite=True))


@register
class CastLike(Operator):
    """Convert each sample of the first input to the element type of the second (as ``cast``)."""

    schema = Schema("cast_like", devices=("cpu", "gpu"), min_inputs=2, max_inputs=2)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        return saturate_cast(xp, xp.asarray(inputs[0]), np.dtype(inputs[1].dtype))
