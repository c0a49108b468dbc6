"""``roi_random_crop``: a random crop window's anchor that holds a region of interest, as DALI's.

Along each axis the window of ``crop_shape`` covers the whole region when it is at least as large
as the region, and lies inside the region otherwise; with the input's shape known (the input, or
``in_shape``) it also stays inside the input. The anchor is drawn uniformly among the integer
positions that satisfy this (int64, one per axis), keyed per sample as every random operator is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import int_list, per_sample

_OP = "roi_random_crop"
ARG_INPUTS = ("crop_shape", "roi_start", "roi_end", "roi_shape")


def anchor_range(
    crop: Sequence[int], start: Sequence[int], end: Sequence[int], in_shape: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and highest anchor on each axis for a ``crop`` window and the region ``[start, end)``."""
    crop, start, end = (np.asarray(v, np.int64) for v in (crop, start, end))
    larger = crop >= end - start
    lo = np.where(larger, end - crop, start)
    hi = np.where(larger, start, end - crop)
    if in_shape is not None:
        shape = np.asarray(in_shape, np.int64)
        if (crop > shape).any():
            raise ValueError(f"{_OP}: the crop {crop.tolist()} is larger than the input's shape {shape.tolist()}")
        if (start < 0).any() or (end > shape).any():
            raise ValueError(f"{_OP}: the region {start.tolist()}..{end.tolist()} leaves the input {shape.tolist()}")
        lo, hi = np.maximum(lo, 0), np.minimum(hi, shape - crop)
    return lo, hi


@register
class ROIRandomCrop(Operator):
    """The anchor of a random ``crop_shape`` window around ``roi_start`` .. ``roi_end`` (or
    ``roi_shape``); the optional input gives the data's shape."""

    schema = Schema(_OP, devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=ARG_INPUTS)

    def configure(self, crop_shape=None, roi_start=None, roi_end=None, roi_shape=None, in_shape=None) -> None:
        """Every argument may also be given per sample (an argument input), except ``in_shape``."""
        if roi_end is not None and roi_shape is not None:
            raise ArgumentError(f"{_OP}: roi_end and roi_shape exclude each other")
        self.crop_shape = None if crop_shape is None else int_list(_OP, "crop_shape", crop_shape)
        self.roi_start = None if roi_start is None else int_list(_OP, "roi_start", roi_start)
        self.roi_end = None if roi_end is None else int_list(_OP, "roi_end", roi_end)
        self.roi_shape = None if roi_shape is None else int_list(_OP, "roi_shape", roi_shape)
        self.in_shape = None if in_shape is None else int_list(_OP, "in_shape", in_shape)

    def _arg(self, args: dict[str, Any], name: str) -> tuple[int, ...] | None:
        if name in args:
            return tuple(int(v) for v in per_sample(args[name]))
        return getattr(self, name)

    def run_sample(self, inputs, args, ctx):
        crop, start = self._arg(args, "crop_shape"), self._arg(args, "roi_start")
        end, extent = self._arg(args, "roi_end"), self._arg(args, "roi_shape")
        if crop is None or start is None:
            raise ArgumentError(f"{_OP}: crop_shape and roi_start are required")
        if (end is None) == (extent is None):
            raise ArgumentError(f"{_OP}: give one of roi_end and roi_shape")
        if end is None:
            end = tuple(a + s for a, s in zip(start, extent))
        in_shape = tuple(inputs[0].shape) if inputs else self.in_shape
        if inputs and self.in_shape is not None:
            raise ArgumentError(f"{_OP}: in_shape cannot be given with an input")
        lengths = {len(crop), len(start), len(end), *([len(in_shape)] if in_shape is not None else [])}
        if len(lengths) != 1:
            raise ValueError(f"{_OP}: crop_shape, the region and the input shape have different dimensions")
        lo, hi = anchor_range(crop, start, end, in_shape)
        rng = self.rng(ctx)
        return np.array([rng.integers(a, b, endpoint=True) if b > a else a for a, b in zip(lo, hi)], np.int64)
