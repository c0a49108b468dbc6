"""``erase``: regions of each sample set to a fill value, as DALI's operator (random erasing,
SpecAugment's time and frequency masks, cutout).

``anchor`` and ``shape`` list one coordinate per erased axis for each region in turn (for axes
``HW``: ``(y0, x0, y1, x1, ...)``), per sample where they are argument inputs; an empty
``anchor`` starts every region at 0. The erased axes are ``axis_names`` (looked up in the input's
layout), else ``axes``, else every axis of the layout but ``C``; an axis a region does not name is
erased whole. Coordinates are relative to the axis's extent where ``normalized_anchor`` /
``normalized_shape`` (or ``normalized`` for both) say so; with ``centered_anchor`` the anchor is
the region's centre. As in DALI, both ends are computed in float32 and truncated towards zero,
and a region is cut to the sample. ``fill_value`` is one value, or one per channel of a ``C``
axis, converted to the sample's type as C's ``static_cast`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import check_layout, float_list, int_list, layout_axes, per_sample, resolve_axes
from .cast import c_cast


def _flag(name: str, value: Any) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"erase: {name} must be a bool, got {value!r}")
    return bool(value)


@register
class Erase(Operator):
    """Set regions of each sample to ``fill_value`` (see the module docstring for the arguments)."""

    schema = Schema("erase", devices=("cpu", "gpu"), arg_inputs=("anchor", "shape"))

    def configure(
        self,
        anchor=(),
        shape=(),
        axes=None,
        axis_names: str | None = None,
        fill_value=0.0,
        normalized_anchor: bool | None = None,
        normalized_shape: bool | None = None,
        normalized: bool | None = None,
        centered_anchor: bool = False,
    ) -> None:
        self.anchor = float_list("erase", "anchor", anchor)
        self.shape = float_list("erase", "shape", shape)
        self.axes = None if axes is None else int_list("erase", "axes", axes)
        self.axis_names = None if axis_names is None else check_layout("erase", "axis_names", axis_names)
        both = _flag("normalized", normalized)
        alone = (_flag("normalized_anchor", normalized_anchor), _flag("normalized_shape", normalized_shape))
        if both is not None and alone != (None, None):
            raise ArgumentError("erase: normalized excludes normalized_anchor and normalized_shape")
        self.normalized_anchor = both if both is not None else bool(alone[0])
        self.normalized_shape = both if both is not None else bool(alone[1])
        self.centered_anchor = bool(_flag("centered_anchor", centered_anchor))
        self.fill = np.asarray(float_list("erase", "fill_value", fill_value), dtype=np.float64)
        if self.fill.size == 0:
            raise ArgumentError("erase: fill_value needs at least one value")
        self.erase_axes: tuple[int, ...] | None = self.axes
        self.channel_axis: int | None = None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.erase_axes = layout_axes("erase", "axis_names", self.axis_names, given)
        elif self.axes is None:
            if not given:
                raise ArgumentError("erase: the input has no layout to take the erased axes from; pass axes=")
            self.erase_axes = tuple(d for d, name in enumerate(given) if name != "C")
        self.channel_axis = given.index("C") if "C" in given else None
        if self.fill.size > 1 and self.channel_axis is None:
            raise ArgumentError(
                f"erase: {self.fill.size} fill values (one per channel) need an input layout with a C axis, "
                f"got {given!r}"
            )
        return given

    def regions(self, in_shape: tuple[int, ...], args: dict[str, Any]) -> list[tuple[slice, ...]]:
        """Each region of a sample of ``in_shape`` as one slice per axis, cut to the sample."""
        axes = resolve_axes("erase", "axes", self.erase_axes or (), len(in_shape))
        anchor = per_sample(args["anchor"]) if "anchor" in args else self.anchor
        shape = per_sample(args["shape"]) if "shape" in args else self.shape
        if not anchor:
            anchor = (0.0,) * len(shape)
        if len(anchor) != len(shape):
            raise ValueError(f"erase: anchor gives {len(anchor)} coordinates and shape {len(shape)}")
        if not axes or len(shape) % len(axes):
            raise ValueError(f"erase: {len(shape)} coordinates are not whole regions of the {len(axes)} erased axes")
        regions = []
        for first in range(0, len(shape), len(axes)):
            cut = [slice(None)] * len(in_shape)
            for k, axis in enumerate(axes):
                size = np.float32(in_shape[axis])
                start = np.float32(anchor[first + k]) * (size if self.normalized_anchor else np.float32(1))
                extent = np.float32(shape[first + k]) * (size if self.normalized_shape else np.float32(1))
                if self.centered_anchor:
                    start = start - extent / np.float32(2)
                lo, hi = int(start), int(start + extent)  # truncated towards zero, as DALI
                cut[axis] = slice(min(max(lo, 0), in_shape[axis]), min(max(hi, 0), in_shape[axis]))
            regions.append(tuple(cut))
        return regions

    def compute(self, xp, inputs, args, ctx):
        data = inputs[0]
        out = data.copy()
        regions = self.regions(tuple(data.shape), args)
        if not regions:
            return out
        fill = self._fill(tuple(data.shape), np.dtype(data.dtype))
        for cut in regions:
            if any(s.start >= s.stop for s in cut if s.start is not None):
                continue
            if fill.ndim:
                out[cut] = xp.asarray(
                    fill[tuple(s if d == self.channel_axis else slice(None) for d, s in enumerate(cut))]
                )
            else:
                out[cut] = fill.item()
        return out

    def _fill(self, in_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The fill value in ``dtype``: a 0-d array, or one value per channel shaped to broadcast."""
        values = np.stack([c_cast(v, dtype) for v in self.fill.tolist()])
        if values.size == 1:
            return values.reshape(())
        axis = self.channel_axis
        if axis is None or axis >= len(in_shape) or in_shape[axis] != values.size:
            raise ValueError(f"erase: {values.size} fill values need a C axis of {values.size} channels in {in_shape}")
        shape = [1] * len(in_shape)
        shape[axis] = values.size
        return values.reshape(shape)
