"""``resize_crop_mirror`` and ``fast_resize_crop_mirror``: DALI's fused resize, crop and flip of HWC
images.

The result is ``resize``'s (its arguments, sizing rules and filters: :mod:`.resize`) cropped to a
``crop`` = (h, w) window placed by ``crop``'s anchor rule (:func:`.crop.crop_window`, or truncation
with ``rounding="truncate"``) and flipped by the ``mirror`` mask (1: horizontal, 2: vertical). As in
DALI, only the window is resampled: it maps back to a box of the input that the resize filters
sample, so no full-size image is made. A window reaching past the resized image samples the input's
edge pixels there (the input is extended by edge replication), as DALI's clamped sampling does, where
``crop`` would raise or pad; past the right edge DALI 2.4 reads on into the next row of the input, which
raypipe does not reproduce (it replicates the edge there too). Sizes computed from a scale map the whole
input onto the rounded size, as ``resize`` (DALI's ``subpixel_scale=False``: DALI's default shifts the
sampled box by the rounding, up to a few grey levels). ``fast_resize_crop_mirror`` is DALI's deprecated alias with
``antialias=False`` by default.

A region of interest (``roi_start``, ``roi_end``, ``roi_relative``, per sample too) is what is
resized, as in ``resize``: the window is cut from the resized region (a region given end first
flips it).

Not here (an error naming them): volumes, per-sample sizes, ``subpixel_scale`` and the depthwise
mirror bit (4); ``minibatch_size`` (images per launch of DALI's GPU kernels) is validated and
changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels.filters import REACH
from ..operator import Operator, Schema, as_scalar, register
from .crop import check_position, check_rounding, crop_window
from .resample import Box, check_hwc, resample
from .resize import Resize, host_resample
from .window_decoders import crop_size


@register
class ResizeCropMirror(Resize):
    """``resize`` of the ``crop`` window at ``crop_pos_x``/``crop_pos_y`` (per sample where they are
    argument inputs), flipped by ``mirror`` (per sample too); without ``crop`` the whole resized image."""

    schema = Schema(
        "resize_crop_mirror",
        devices=("cpu", "gpu"),
        arg_inputs=("crop_pos_x", "crop_pos_y", "mirror", "roi_start", "roi_end"),
    )

    def configure(
        self,
        crop: float | Sequence[float] | None = None,
        crop_h: float | None = None,
        crop_w: float | None = None,
        crop_pos_x: float = 0.5,
        crop_pos_y: float = 0.5,
        mirror: int = 0,
        rounding: str = "round",
        **resize_args: Any,
    ) -> None:
        """``resize_args``: :class:`.resize.Resize`'s arguments but ``save_attrs`` and ``image_type``,
        which DALI's operator does not take."""
        op = self.schema.name
        refused = sorted({"save_attrs", "image_type"} & resize_args.keys())
        if refused:
            raise ArgumentError(f"{op}: unexpected argument {refused[0]!r} (resize's, not {op}'s)")
        super().configure(**resize_args)
        if self.volume_wanted is not None:
            raise ArgumentError(f"{op}: volumes (resize_z or a three-value size) are not supported")
        given = crop is not None or crop_h is not None or crop_w is not None
        self.crop = crop_size(op, crop, crop_h, crop_w) if given else None
        self.crop_pos_x = check_position(op, "crop_pos_x", crop_pos_x)
        self.crop_pos_y = check_position(op, "crop_pos_y", crop_pos_y)
        self.mirror = _mirror(op, mirror)
        self.rounding = check_rounding(op, rounding)

    def fixed_output_size(self) -> None:
        """None: a decoder cannot do this resize (it crops and flips too)."""
        return None

    def _plan(self, image: Any, args: dict[str, Any]) -> tuple[int, int, Box | None, int]:
        """The output ``(width, height)``, the input box it resamples (None: the whole image) and
        this sample's mirror mask."""
        check_hwc(self.schema.name, image)
        region, (region_y, region_x) = self._region(image, args)
        left, top, right, bottom = region
        width, height = self.target_size(right - left, bottom - top)
        mirror = _mirror(self.schema.name, as_scalar(args.get("mirror", self.mirror)))
        # a negative size, or a region given end first, flips the resized image before the crop, as in DALI
        flip_y, flip_x = self.flips[0] != region_y, self.flips[1] != region_x
        mirror ^= (1 if flip_x else 0) | (2 if flip_y else 0)
        whole = region == (0, 0, image.shape[1], image.shape[0])
        if self.crop is None:
            return width, height, None if whole else region, mirror
        crop_h, crop_w = self.crop
        pos_x = check_position(self.schema.name, "crop_pos_x", as_scalar(args.get("crop_pos_x", self.crop_pos_x)))
        pos_y = check_position(self.schema.name, "crop_pos_y", as_scalar(args.get("crop_pos_y", self.crop_pos_y)))
        y0, x0 = crop_window(height, width, crop_h, crop_w, pos_x, pos_y, self.rounding)
        x0, y0 = (width - crop_w - x0 if flip_x else x0), (height - crop_h - y0 if flip_y else y0)  # the flipped window
        sx, sy = (right - left) / width, (bottom - top) / height
        box = (left + x0 * sx, top + y0 * sy, left + (x0 + crop_w) * sx, top + (y0 + crop_h) * sy)
        return crop_w, crop_h, box, mirror

    def compute(self, xp, inputs, args, ctx):
        width, height, box, mirror = self._plan(inputs[0], args)
        image, box = _extended(xp, inputs[0], box, width, height)
        out = resample(xp, image, width, height, box, self.antialias, self.dtype, self.filters)
        return _flipped(xp, out, mirror)

    def run_sample(self, inputs, args, ctx):
        width, height, box, mirror = self._plan(inputs[0], args)
        image, box = _extended(np, inputs[0], box, width, height)
        out = host_resample(image, width, height, self.filters, self.antialias, self.dtype, box)
        return _flipped(np, out, mirror)

    def run_batch(self, xp, inputs, args, ctxs):
        """Sample by sample: each sample resamples its own window."""
        return Operator.run_batch(self, xp, inputs, args, ctxs)


@register
class FastResizeCropMirror(ResizeCropMirror):
    """DALI's deprecated ``fast_resize_crop_mirror``: ``resize_crop_mirror`` without antialiasing
    by default."""

    schema = Schema(
        "fast_resize_crop_mirror", devices=("cpu", "gpu"), arg_inputs=("crop_pos_x", "crop_pos_y", "mirror")
    )

    def configure(self, antialias: bool = False, **args: Any) -> None:
        super().configure(antialias=antialias, **args)


def _mirror(op: str, value: Any) -> int:
    """DALI's ``mirror`` mask: 0 to 3 (1: horizontal, 2: vertical)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 3:
        raise ArgumentError(f"{op}: mirror must be 0, 1 (horizontal), 2 (vertical) or 3 (both), got {value!r}")
    return int(value)


def _extended(xp, image: Any, box: Box | None, width: int, height: int) -> tuple[Any, Box | None]:
    """``image`` and ``box`` as they are when the box lies inside the image, else the image extended by
    replicating its edges far enough for every filter tap, and the box moved onto it."""
    in_h, in_w = image.shape[:2]
    if box is None or (box[0] >= 0 and box[1] >= 0 and box[2] <= in_w and box[3] <= in_h):
        return image, box
    x0, y0, x1, y1 = box
    reach = max(REACH.values())  # the widest filter's, in output pixels
    reach_x, reach_y = reach * max((x1 - x0) / width, 1.0), reach * max((y1 - y0) / height, 1.0)
    left, top = math.ceil(max(0.0, -x0) + reach_x) + 1, math.ceil(max(0.0, -y0) + reach_y) + 1
    right = math.ceil(max(0.0, x1 - in_w) + reach_x) + 1
    bottom = math.ceil(max(0.0, y1 - in_h) + reach_y) + 1
    extended = xp.pad(image, ((top, bottom), (left, right), (0, 0)), mode="edge")
    return extended, (x0 + left, y0 + top, x1 + left, y1 + top)


def _flipped(xp, image: Any, mirror: int) -> Any:
    """``image`` flipped horizontally for mirror bit 1 and vertically for bit 2."""
    axes = tuple(axis for axis, bit in ((1, 1), (0, 2)) if mirror & bit)
    return xp.ascontiguousarray(xp.flip(image, axis=axes)) if axes else image
