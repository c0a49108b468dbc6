"""DALI's ``reductions``: ``min``, ``max``, ``sum``, ``mean``, ``mean_square``, ``rms``, ``std_dev``
and ``variance`` of each sample over ``axes`` (or the axes ``axis_names`` names in the layout; every
axis by default; none for ``axes=[]``). ``keep_dims`` keeps the reduced axes with extent 1.

``min`` and ``max`` keep the input's type. The others compute as DALI 2.4's CPU kernels do, so their
values are those kernels' bit for bit, on both devices (DALI's GPU kernels, which add in parallel,
may differ from them in the last bits of float sums):

* types: uint8 to int64 and float32 inputs; ``dtype`` picks the type the sum accumulates in and the
  output's, among those DALI allows (``sum``: the input's, its 64-bit widening, the default, or
  float32, but 64-bit integers only their own; ``mean`` and ``rms``: the input's or float32, the
  default; ``mean_square``: the 64-bit widening or float32, the default). ``std_dev`` and
  ``variance`` give float32.
* order: integers add with wrap-around (any order gives DALI's value); float32 adds in DALI's
  order (see :func:`_ordered_sum`), where numpy's pairwise sum would differ in the last bits.
* scaling: the sum times ``float32(1 / n)`` in float32 (``n`` less ``ddof`` for the deviations),
  then the square root; an integer output truncates that, as C++ does on x86 (:func:`_to_integer`).
  ``mean`` of an empty reduction is NaN, as DALI's; its ``sum`` is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import DALIDataType
from .axes import check_layout, int_list, is_int, layout_axes, resolve_axes
from .cast import parse_dtype

FLOAT = np.dtype(np.float32)
INTEGERS = tuple(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"))
#: the input types DALI's sums take, and the only types they may output
TYPES = (*INTEGERS, FLOAT)
#: DALI's CPU kernel adds the elements of a range of at most this many one by one
_TREE_THRESHOLD = 32


class _Reduction(Operator):
    """A reduction of each sample over axes: the array module's ``function`` (``min``, ``max``), or a
    sum in DALI's order, of the squares with ``square``, scaled by ``1 / n`` with ``divide`` and
    square-rooted with ``root``."""

    function: ClassVar[str] = ""
    square: ClassVar[bool] = False
    divide: ClassVar[bool] = False
    root: ClassVar[bool] = False

    def configure(self, axes=None, axis_names: str | None = None, keep_dims: bool = False) -> None:
        op = self.schema.name
        if axes is not None and axis_names is not None:
            raise ArgumentError(f"{op}: axes and axis_names exclude each other")
        self.axes = None if axes is None else int_list(op, "axes", axes)
        self.axis_names = None if axis_names is None else check_layout(op, "axis_names", axis_names)
        self.keep_dims = bool(keep_dims)
        self.layout_axes: tuple[int, ...] | None = None
        self.dtype: np.dtype | None = None
        self.ddof = 0

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.layout_axes = layout_axes(self.schema.name, "axis_names", self.axis_names, given)
        if self.keep_dims:
            return given
        reduced = self.layout_axes if self.layout_axes is not None else self.axes
        if reduced is None or not given:
            return ""
        return "".join(
            c for i, c in enumerate(given) if i not in resolve_axes(self.schema.name, "axes", reduced, len(given))
        )

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        chosen = self.layout_axes if self.layout_axes is not None else self.axes
        axes = tuple(range(data.ndim)) if chosen is None else resolve_axes(self.schema.name, "axes", chosen, data.ndim)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{self.schema.name}: axes {list(chosen)} name an axis twice for {data.ndim}-D samples")
        result = xp.asarray(self.reduce(xp, data, axes, inputs[1:]))
        if self.keep_dims:
            return result.reshape(tuple(1 if i in axes else n for i, n in enumerate(data.shape)))
        return result

    def reduce(self, xp: ModuleType, data: Any, axes: tuple[int, ...], others: Sequence) -> Any:
        """``data`` reduced over ``axes`` (``others``: the inputs after the data)."""
        op = self.schema.name
        if self.function:
            if data.size == 0:
                raise ValueError(f"{op}: cannot reduce an empty sample of shape {tuple(data.shape)}")
            if xp is np and axes and data.ndim - 1 not in axes:
                return _over_trailing_copy(getattr(np, self.function), data, axes)
            return getattr(xp, self.function)(data, axis=axes)
        if data.dtype not in TYPES:
            raise ValueError(f"{op}: unsupported input type {data.dtype} (DALI's take {', '.join(map(str, TYPES))})")
        allowed = self.output_types(data.dtype)
        out_type = allowed[0] if self.dtype is None else self.dtype
        if out_type not in allowed:
            allows = ", ".join(map(str, allowed))
            raise ValueError(f"{op}: dtype {out_type} is not allowed for {data.dtype} input (DALI allows {allows})")
        divisor = math.prod(data.shape[a] for a in axes) - self.ddof
        with np.errstate(over="ignore", invalid="ignore"):  # float32 overflow to inf, and 0 * inf, as in DALI
            total = _ordered_sum(xp, self.terms(xp, data, others).astype(out_type, copy=False), axes)
            if not self.divide:
                return total
            scale = np.float32(np.inf) if divisor == 0 else np.float32(1.0 / divisor)  # DALI: float(1.0 / n)
            scaled = total.astype(FLOAT) * scale
            scaled = xp.sqrt(scaled) if self.root else scaled
        return scaled if out_type == FLOAT else _to_integer(xp, scaled, out_type)

    def output_types(self, input_type: np.dtype) -> tuple[np.dtype, ...]:
        """The output types DALI allows for ``input_type``, its default first."""
        return (FLOAT,)

    def terms(self, xp: ModuleType, data: Any, others: Sequence) -> Any:
        """The values summed: the data, or its squares in the type C++ multiplies them in (int for
        types narrower than 32 bits, so uint16 squares above 2**31 wrap, as in DALI)."""
        if not self.square:
            return data
        if data.dtype.kind == "f":
            wide = data.dtype
        elif data.dtype.itemsize < 4:
            wide = np.dtype(np.int32)
        else:
            wide = _wide(data.dtype)
        data = data.astype(wide)
        return xp.multiply(data, data)


def _ordered_sum(xp: ModuleType, values: Any, axes: tuple[int, ...]) -> Any:
    """``values`` summed over ``axes`` in their own type, as DALI's CPU kernel sums them: it merges
    adjacent reduced axes, then sums the block of reduced axes from the last axis to the first
    (:func:`_pairwise_sum`), each unit of an axis being the sum over the axes after it."""
    if not axes:
        return values.copy()  # never the input itself
    if values.dtype.kind != "f":  # wrapping integer sums: any order gives DALI's value
        return xp.sum(values, axis=axes, dtype=values.dtype)
    kept = [i for i in range(values.ndim) if i not in axes]
    runs: list[int] = []
    for axis in sorted(axes):
        if axis - 1 in axes:
            runs[-1] *= values.shape[axis]
        else:
            runs.append(values.shape[axis])
    shape = tuple(values.shape[i] for i in kept)
    if 0 in runs:
        return xp.zeros(shape, values.dtype)
    block = xp.transpose(values, kept + sorted(axes)).reshape(math.prod(shape), *runs)
    unit = 1
    for extent in reversed(runs):
        block = _pairwise_sum(xp, block, unit)
        unit *= extent
    return block.reshape(shape)


def _pairwise_sum(xp: ModuleType, units: Any, unit: int) -> Any:
    """The sums over the last axis of ``units`` (each the sum of ``unit`` elements) in DALI's order: a
    range of two units or more and over 32 elements splits into its first ``n // 2`` units and the
    rest, summed apart, then added; a smaller range adds its units one by one to zero. Computed a
    level of the split at a time, from the smallest ranges up, for every sum at once."""
    starts, sizes = np.array([0]), np.array([units.shape[-1]])
    levels = []
    while True:
        split = (sizes >= 2) & (sizes * unit > _TREE_THRESHOLD)
        levels.append((starts, sizes, split))
        if not split.any():
            break
        half = sizes[split] // 2
        starts = np.stack([starts[split], starts[split] + half], axis=1).ravel()
        sizes = np.stack([half, sizes[split] - half], axis=1).ravel()
    zero = units.dtype.type(0)
    below = None
    for starts, sizes, split in reversed(levels):
        sums = xp.empty((*units.shape[:-1], len(starts)), units.dtype)
        if below is not None:  # each split range: its halves, which are consecutive on the level below
            sums[..., xp.asarray(np.flatnonzero(split))] = below[..., 0::2] + below[..., 1::2]
        for size in np.unique(sizes[~split]).tolist():
            at = np.flatnonzero(~split & (sizes == size))
            total = units[..., xp.asarray(starts[at])] + zero  # DALI starts from 0: -0.0 sums to 0.0
            for k in range(1, size):
                total = total + units[..., xp.asarray(starts[at] + k)]
            sums[..., xp.asarray(at)] = total
        below = sums
    return below[..., 0]


def _to_integer(xp: ModuleType, values: Any, dtype: np.dtype) -> Any:
    """float32 ``values`` as C++'s conversion to the integer ``dtype`` gives them on x86, where DALI
    is built: truncated toward zero, through int32 (int64 for uint32 and the 64-bit types); a NaN
    (an empty mean) or a value out of that range gives its lowest value ("integer indefinite"),
    wrapped to ``dtype``; uint64 from 2**63 converts ``value - 2**63`` and sets the top bit."""
    via = np.dtype(np.int32 if dtype.itemsize < 4 or dtype == np.int32 else np.int64)
    whole = xp.trunc(values.astype(np.float64))
    high = whole >= 2.0**63 if dtype == np.uint64 else None
    if high is not None:
        whole = xp.where(high, whole - 2.0**63, whole)
    limit = 2.0 ** (8 * via.itemsize - 1)
    converted = xp.where((whole >= -limit) & (whole < limit), whole, -limit).astype(via)  # NaN fails both
    if high is not None:
        converted = xp.where(high, converted ^ np.iinfo(np.int64).min, converted)
    return converted.astype(dtype)


def _wide(dtype: np.dtype) -> np.dtype:
    """An integer type widened to 64 bits (DALI's ``sum`` default, and ``mean_square``'s choice)."""
    return np.dtype(np.uint64 if dtype.kind == "u" else np.int64)


def _dtype_argument(op: str, dtype: DALIDataType | np.dtype | type | str | None) -> np.dtype | None:
    if dtype is None:
        return None
    parsed = parse_dtype(op, "dtype", dtype)
    if parsed not in TYPES:
        raise ArgumentError(f"{op}: dtype must be one of {', '.join(map(str, TYPES))} (as in DALI), got {parsed}")
    return parsed


def _over_trailing_copy(function: Any, data: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``function`` (``np.min``, ``np.max``) over ``axes`` of a sample whose last axis is kept (HWC
    over HW): on a copy with the reduced axes last, where numpy reduces contiguous runs (about a
    twentieth of its time over leading axes: 0.05 against 1 ms for 224x224x3 uint8). The same values."""
    kept = [i for i in range(data.ndim) if i not in axes]
    moved = np.ascontiguousarray(np.transpose(data, (*kept, *axes)))
    return function(moved.reshape(*(data.shape[i] for i in kept), -1), axis=-1)


@register
class Min(_Reduction):
    """The smallest value of each sample (over ``axes``)."""

    schema = Schema("reductions.min", devices=("cpu", "gpu"))
    function = "amin"


@register
class Max(_Reduction):
    """The largest value of each sample (over ``axes``)."""

    schema = Schema("reductions.max", devices=("cpu", "gpu"))
    function = "amax"


@register
class Sum(_Reduction):
    """The sum of each sample (over ``axes``), in ``dtype``: by default integers widened to 64 bits."""

    schema = Schema("reductions.sum", devices=("cpu", "gpu"))

    def configure(self, dtype: DALIDataType | np.dtype | type | str | None = None, **axes: Any) -> None:
        super().configure(**axes)
        self.dtype = _dtype_argument(self.schema.name, dtype)

    def output_types(self, input_type: np.dtype) -> tuple[np.dtype, ...]:
        wide = _wide(input_type)
        return (input_type,) if input_type in (FLOAT, wide) else (wide, input_type, FLOAT)


@register
class Mean(Sum):
    """The mean of each sample (over ``axes``), float32 by default (``dtype``: the input's type)."""

    schema = Schema("reductions.mean", devices=("cpu", "gpu"))
    divide = True

    def output_types(self, input_type: np.dtype) -> tuple[np.dtype, ...]:
        return (FLOAT,) if input_type == FLOAT else (FLOAT, input_type)


@register
class MeanSquare(Sum):
    """The mean of the squares of each sample (over ``axes``), float32 by default (``dtype``: the
    input's type widened to 64 bits)."""

    schema = Schema("reductions.mean_square", devices=("cpu", "gpu"))
    square = divide = True

    def output_types(self, input_type: np.dtype) -> tuple[np.dtype, ...]:
        return (FLOAT,) if input_type == FLOAT else (FLOAT, _wide(input_type))


@register
class RMS(Sum):
    """The root mean square of each sample (over ``axes``), float32 by default (``dtype``: the
    input's type)."""

    schema = Schema("reductions.rms", devices=("cpu", "gpu"))
    square = divide = root = True
    output_types = Mean.output_types


@register
class Variance(_Reduction):
    """The variance of each sample (over ``axes``) about a given ``mean`` (a second input: float32,
    shaped as the output, with or without ``keep_dims``, as ``reductions.mean`` gives it), divided
    by ``n - ddof``; float32. ``axes=[]`` gives zeros, as in DALI."""

    schema = Schema("reductions.variance", devices=("cpu", "gpu"), min_inputs=2, max_inputs=2)
    square = divide = True

    def configure(self, ddof: int = 0, **axes: Any) -> None:
        super().configure(**axes)
        if not is_int(ddof):
            raise ArgumentError(f"{self.schema.name}: ddof must be an int, got {ddof!r}")
        self.ddof = int(ddof)

    def reduce(self, xp: ModuleType, data: Any, axes: tuple[int, ...], others: Sequence) -> Any:
        op, mean = self.schema.name, others[0]
        kept = tuple(1 if i in axes else n for i, n in enumerate(data.shape))
        dropped = tuple(n for i, n in enumerate(data.shape) if i not in axes)
        if mean.dtype != FLOAT:
            raise ValueError(f"{op}: the mean input must be float32 (as reductions.mean gives), got {mean.dtype}")
        if tuple(mean.shape) not in (dropped, kept) and not mean.size == 1 == math.prod(kept):
            raise ValueError(
                f"{op}: the mean input has shape {tuple(mean.shape)}, but the output of a sample of shape "
                f"{tuple(data.shape)} has shape {dropped} ({kept} with keep_dims)"
            )
        if self.axes == () or self.axis_names == "":  # DALI fills the output with zeros
            return xp.zeros(data.shape, FLOAT)
        count = math.prod(data.shape[a] for a in axes)
        if 0 < count <= self.ddof:
            raise ValueError(
                f"{op}: ddof {self.ddof} leaves no degrees of freedom in a reduction of {count} elements "
                f"(a sample of shape {tuple(data.shape)}); DALI would give inf, NaN or negative values"
            )
        return super().reduce(xp, data, axes, [mean.reshape(kept)])

    def terms(self, xp: ModuleType, data: Any, others: Sequence) -> Any:
        """The squared deviations from the mean (``others[0]``, with the reduced axes kept), in
        float32, as C++ subtracts a float from any type."""
        deviations = data.astype(FLOAT) - others[0]
        return deviations * deviations


@register
class StdDev(Variance):
    """The standard deviation of each sample (over ``axes``) about a given ``mean``: the square root
    of ``variance``."""

    schema = Schema("reductions.std_dev", devices=("cpu", "gpu"), min_inputs=2, max_inputs=2)
    root = True
