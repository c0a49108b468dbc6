"""Feature specifications for ``fn.readers.tfrecord``, as in ``nvidia.dali.tfrecord``:
``FixedLenFeature(shape, dtype, default_value)``, ``VarLenFeature([partial_shape,] dtype,
default_value)`` and the dtypes ``int64``, ``string``, ``float32`` (DALI's values 0, 1, 2).

Unlike DALI, ``default_value`` may be left out: a record missing a fixed-length feature then
raises ReaderError instead of taking the default."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import ArgumentError

int64, string, float32 = 0, 1, 2
DTYPE_NAMES = {int64: "int64", string: "string", float32: "float32"}


@dataclass(frozen=True)
class Feature:
    """One feature to read: fixed-length (``shape``) or variable-length (``partial_shape``, the
    dimensions after the first, which follows from the number of values)."""

    fixed: bool
    dtype: int
    default_value: str | int | float | None = None
    shape: tuple[int, ...] = ()
    partial_shape: tuple[int, ...] = ()

    def __repr__(self) -> str:
        name = DTYPE_NAMES[self.dtype]
        if self.fixed:
            return f"FixedLenFeature({list(self.shape)}, {name}, {self.default_value!r})"
        return f"VarLenFeature({list(self.partial_shape)}, {name}, {self.default_value!r})"


def _dtype(dtype: Any) -> int:
    if isinstance(dtype, bool) or dtype not in DTYPE_NAMES:
        raise ArgumentError(f"tfrecord feature dtype must be tfrecord.int64, string or float32, got {dtype!r}")
    return int(dtype)


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise ArgumentError(f"tfrecord feature {what} must be a list of ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ArgumentError(f"tfrecord feature {what} must hold non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _default(dtype: int, value: Any) -> str | int | float | None:
    if value is None:
        return None
    if dtype == string and isinstance(value, (str, bytes)):
        return value
    if dtype == int64 and isinstance(value, int):
        return int(value)
    if dtype == float32 and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ArgumentError(f"tfrecord {DTYPE_NAMES[dtype]} feature: invalid default_value {value!r}")


def FixedLenFeature(shape: Any, dtype: int, default_value: Any = None) -> Feature:  # noqa: N802 (DALI's name)
    """A feature with exactly ``prod(shape)`` values per record, read with that shape (``[]``:
    one value as a 0-d array, as DALI 2.4 does); a string feature (shape ``[]`` or ``[1]``)
    yields its single bytes value as 1-D uint8."""
    dtype = _dtype(dtype)
    dims = _shape(shape, "shape")
    if dtype == string and math.prod(dims) != 1:
        raise ArgumentError(f"tfrecord string feature: shape must be [] or [1] (no tensors of strings), got {shape!r}")
    return Feature(True, dtype, _default(dtype, default_value), shape=dims)


def VarLenFeature(*args: Any, **kwargs: Any) -> Feature:  # noqa: N802 (DALI's name)
    """``VarLenFeature(dtype, default_value)`` or ``VarLenFeature(partial_shape, dtype,
    default_value)``: any number of values per record (a multiple of ``prod(partial_shape)``)."""
    if args and not isinstance(args[0], int):
        partial, rest = args[0], args[1:]
    else:
        partial, rest = kwargs.pop("partial_shape", ()), args
    names = ("dtype", "default_value")
    values = dict(zip(names, rest))
    if len(rest) > 2 or set(kwargs) - set(names) or set(values) & set(kwargs):
        raise ArgumentError(f"VarLenFeature([partial_shape,] dtype, default_value): bad arguments {args}, {kwargs}")
    values.update(kwargs)
    if "dtype" not in values:
        raise ArgumentError("VarLenFeature: dtype is required")
    dtype = _dtype(values["dtype"])
    if dtype == string:
        raise ArgumentError("tfrecord string feature: VarLenFeature is not supported (no tensors of strings)")
    dims = _shape(partial, "partial_shape")
    if 0 in dims:
        raise ArgumentError(f"tfrecord feature partial_shape must hold positive ints, got {partial!r}")
    return Feature(False, dtype, _default(dtype, values.get("default_value")), partial_shape=dims)
