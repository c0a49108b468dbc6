"""``tensor_resize``: DALI's resize of arbitrary tensors along chosen axes.

``sizes`` or ``scales`` (one value, or one per axis) apply to the ``axes`` (indices, negative from
the back) or ``axis_names`` (letters of the input's layout), all axes by default. As in DALI, every
other axis is given its own extent, so ``mode`` works on the whole shape: in ``"default"`` mode an
extent of 0 scales by the geometric mean of the other scales (the unlisted axes' scale of 1
included), ``"not_larger"``/``"not_smaller"`` scale every axis by the smallest/largest scale. A
negative size flips that axis. ``scales`` give ``size_rounding(scale * extent)``. Sizes, rounding and
the centred source windows of rounded sizes are :func:`.volume_resize.volume_size`'s, the resampling
(nearest, antialiased linear, cubic: :mod:`.resample`'s filters) :func:`.volume_resize.resize_volume`'s.
At most three consecutive axes may change, as in DALI; types are DALI's (uint8, int16, uint16,
float32 in; the input's type or float32 out).

A region of interest (``roi_start``, ``roi_end``, per resized axis, in elements or with
``roi_relative`` in fractions of the extent; a start past its end flips the axis) is what the
output shows; ``scales`` still size the output from the whole extent, as DALI's. ``max_size`` caps
the output (the common scale in ``"not_larger"``/``"not_smaller"``, each extent otherwise).
``alignment`` says which point of the region keeps its place when a rounded size moves the source
window (0 its start, 0.5 its centre, 1 its end), and ``subpixel_scale=False`` maps the whole region
to the rounded size instead. ``minibatch_size`` (DALI's kernel batching) changes no value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import to_numpy_dtype
from .resample import RESIZE_FILTERS, interp_filters
from .resize import MODES, check_minibatch_size, check_temp_buffer_hint
from .volume_resize import ROUNDINGS, resize_volume, volume_size

OP = "tensor_resize"
IN_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int16, np.uint16, np.float32))


@register
class TensorResize(Operator):
    """Resize tensors along ``axes``/``axis_names`` to ``sizes`` or by ``scales``."""

    schema = Schema(OP, devices=("cpu", "gpu"))

    def configure(
        self,
        sizes: float | Sequence[float] | None = None,
        scales: float | Sequence[float] | None = None,
        axes: int | Sequence[int] | None = None,
        axis_names: str | None = None,
        mode: str = "default",
        size_rounding: str = "round",
        antialias: bool = True,
        interp_type: Any = None,
        min_filter: Any = None,
        mag_filter: Any = None,
        dtype: Any = None,
        temp_buffer_hint: int = 0,
        max_size: float | Sequence[float] | None = None,
        alignment: float | Sequence[float] = 0.5,
        roi_start: float | Sequence[float] | None = None,
        roi_end: float | Sequence[float] | None = None,
        roi_relative: bool = False,
        subpixel_scale: bool = True,
        minibatch_size: int = 32,
    ) -> None:
        """``temp_buffer_hint`` (DALI's scratch-buffer size) is validated and changes nothing; the
        others are the module's."""
        if (sizes is None) == (scales is None):
            raise ArgumentError(f"{OP}: give one of sizes or scales, not both")
        self.values = _numbers("sizes" if scales is None else "scales", sizes if scales is None else scales)
        self.by_scale = scales is not None
        if self.by_scale and not np.all(self.values > 0):
            raise ArgumentError(f"{OP}: scales must be positive, got {scales!r}")
        if axes is not None and axis_names is not None:
            raise ArgumentError(f"{OP}: axes and axis_names are mutually exclusive")
        self.axes = None if axes is None else [int(a) for a in _numbers("axes", axes)]
        if axes is not None and any(a != v for a, v in zip(self.axes, np.ravel(axes))):
            raise ArgumentError(f"{OP}: axes must be integers, got {axes!r}")
        if axis_names is not None and (not isinstance(axis_names, str) or not axis_names):
            raise ArgumentError(f"{OP}: axis_names must be a layout string such as 'HW', got {axis_names!r}")
        self.axis_names = axis_names
        if mode not in MODES:
            raise ArgumentError(f"{OP}: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        if size_rounding not in ROUNDINGS:
            raise ArgumentError(f"{OP}: size_rounding must be one of {tuple(ROUNDINGS)}, got {size_rounding!r}")
        self.rounding = size_rounding
        self.antialias = bool(antialias)
        self.filters = interp_filters(OP, RESIZE_FILTERS, interp_type, min_filter, mag_filter)
        check_temp_buffer_hint(OP, temp_buffer_hint)
        check_minibatch_size(OP, minibatch_size)
        self.max_size = None if max_size is None else _numbers("max_size", max_size)
        if self.max_size is not None and not np.all(self.max_size > 0):
            raise ArgumentError(f"{OP}: max_size must be positive, got {max_size!r}")
        self.alignment = _numbers("alignment", alignment)
        if (roi_start is None) != (roi_end is None):
            raise ArgumentError(f"{OP}: give both roi_start and roi_end, or neither")
        self.roi = None if roi_start is None else (_numbers("roi_start", roi_start), _numbers("roi_end", roi_end))
        for name, flag in (("roi_relative", roi_relative), ("subpixel_scale", subpixel_scale)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ArgumentError(f"{OP}: {name} must be a bool, got {flag!r}")
        self.roi_relative = bool(roi_relative)
        self.subpixel = bool(subpixel_scale)
        try:
            self.dtype = to_numpy_dtype(dtype) if dtype is not None else None
        except ValueError:
            raise ArgumentError(f"{OP}: unknown dtype {dtype!r}") from None
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def _axes(self, ndim: int) -> list[int]:
        """The resized axes of a sample of ``ndim`` dimensions, as non-negative indices."""
        if self.axis_names is not None:
            missing = [name for name in self.axis_names if name not in self.layout or len(self.layout) != ndim]
            if missing:
                raise ValueError(f"{OP}: axis {missing[0]!r} is not in the input's layout {self.layout!r}")
            return [self.layout.index(name) for name in self.axis_names]
        if self.axes is None:
            return list(range(ndim))
        bad = [a for a in self.axes if not -ndim <= a < ndim]
        if bad:
            raise ValueError(f"{OP}: axis {bad[0]} is out of range for a sample of {ndim} dimensions")
        axes = [a % ndim for a in self.axes]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{OP}: axes {self.axes} repeat an axis")
        return axes

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        if np.dtype(data.dtype) not in IN_DTYPES:
            raise ValueError(f"{OP}: the input must be uint8, int16, uint16 or float32, got {data.dtype}")
        if self.dtype not in (None, np.dtype(data.dtype), np.dtype(np.float32)):
            raise ValueError(f"{OP}: dtype must be the input's ({data.dtype}) or float32, got {self.dtype}")
        axes = self._axes(data.ndim)
        if self.values.size not in (1, len(axes)):
            name = "scales" if self.by_scale else "sizes"
            raise ValueError(f"{OP}: {name} needs one value or {len(axes)} (one per axis), got {self.values.size}")
        values = np.broadcast_to(self.values, (len(axes),))
        wanted: list[float | None] = [float(n) for n in data.shape]
        roi, roi_flips = self._regions(data.shape, axes)
        flips = list(roi_flips)
        for axis, value in zip(axes, values):
            if self.by_scale:
                wanted[axis] = float(np.float32(data.shape[axis]) * np.float32(value))
            else:
                wanted[axis] = abs(float(value)) if value else None
                if value < 0:
                    flips.append(axis)
        out_size, windows = volume_size(
            data.shape,
            wanted,
            self.mode,
            self.rounding,
            roi=roi,
            alignment=self._per_axis("alignment", self.alignment, data.ndim, axes, 0.5, roi_flips),
            subpixel=self.subpixel,
            max_size=None if self.max_size is None else self._per_axis("max_size", self.max_size, data.ndim, axes),
        )
        changed = [
            k
            for k, (n, w) in enumerate(zip(out_size, windows))
            if (n, w) != (data.shape[k], (0.0, float(data.shape[k])))
        ]
        flips = sorted(a for a in set(flips) if flips.count(a) % 2)  # a region's flip and a negative size undo
        if changed and changed[-1] - changed[0] >= 3:
            raise ValueError(
                f"{OP}: can resize at most 3 consecutive axes (as DALI), got a shape {tuple(data.shape)} "
                f"resized to {out_size}"
            )
        out = data
        if changed:
            span = range(changed[0], changed[-1] + 1)
            size = tuple(out_size[k] for k in span)
            out = resize_volume(
                xp, data, tuple(span), size, self.filters, self.antialias, self.dtype, [windows[k] for k in span]
            )
        elif self.dtype is not None:
            out = data.astype(self.dtype)
        return xp.ascontiguousarray(xp.flip(out, axis=tuple(flips))) if flips else out

    def _per_axis(
        self, name: str, values: np.ndarray, ndim: int, axes: list[int], default: Any = None, mirrored: Any = ()
    ) -> list[Any]:
        """One value per axis of the sample from one value or one per resized axis (``default`` for
        the others); an alignment of a flipped region is measured from its other end."""
        if values.size not in (1, len(axes)):
            raise ValueError(f"{OP}: {name} needs one value or {len(axes)} (one per resized axis), got {values.size}")
        per_axis: list[Any] = [default] * ndim
        for axis, value in zip(axes, np.broadcast_to(values, (len(axes),)).tolist()):
            per_axis[axis] = 1.0 - value if axis in mirrored else value
        return per_axis

    def _regions(self, shape: Sequence[int], axes: list[int]) -> tuple[list[tuple[float, float]], list[int]]:
        """Every axis's region ``(start, stop)`` with ``start <= stop`` (the whole axis where none is
        given), and the axes whose region was given end first (flipped)."""
        roi = [(0.0, float(n)) for n in shape]
        if self.roi is None:
            return roi, []
        starts = self._per_axis("roi_start", self.roi[0], len(shape), axes)
        ends = self._per_axis("roi_end", self.roi[1], len(shape), axes)
        flipped = []
        for axis in axes:
            start, end = starts[axis], ends[axis]
            if self.roi_relative:
                start, end = start * shape[axis], end * shape[axis]
            if start > end:
                start, end = end, start
                flipped.append(axis)
            if start == end:
                raise ValueError(f"{OP}: the region along axis {axis} is empty ({start} to {end})")
            roi[axis] = (float(start), float(end))
        return roi, flipped


def _numbers(name: str, value: Any) -> np.ndarray:
    """A number or a list of them as a 1-D float64 array; ArgumentError naming ``name`` otherwise."""
    try:
        values = np.asarray(value, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ArgumentError(f"{OP}: {name} must be a number or a list of numbers, got {value!r}") from None
    if values.size == 0 or not np.all(np.isfinite(values)) or isinstance(value, (bool, str)):
        raise ArgumentError(f"{OP}: {name} must be a number or a list of numbers, got {value!r}")
    return values
