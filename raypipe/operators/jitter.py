"""``jitter``: move every pixel of HWC images by a random whole number of pixels, as DALI's operator.

Each output pixel ``(y, x)`` takes the input pixel ``(y + dy, x + dx)``, where ``dx`` and ``dy``
are drawn uniformly from ``[-nDegree // 2, nDegree - 1 - nDegree // 2]`` (DALI's
``rand() % nDegree - nDegree / 2``); a source outside the image gives ``fill_value``. The offsets
are keyed per sample (by the pipeline's or the operator's ``seed``, the epoch and the sample), so a
sample is jittered alike wherever and however often it is computed; the offsets themselves are not
DALI's (its generator is its own). ``mask`` (per sample, 1 by default) set to 0 leaves a sample
unchanged. DALI runs jitter on the GPU only; here it runs on both devices, and the GPU stage draws
each sample's offsets on the host (keyed as on the CPU) and gathers on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from ..types import DALIInterpType
from .axes import is_int, per_sample
from .cast import c_cast

_OP = "jitter"


def jitter_offsets(rng: np.random.Generator, height: int, width: int, degree: int) -> np.ndarray:
    """``(2, height, width)`` int64 offsets (dy, dx) of one sample drawn from ``rng``."""
    return rng.integers(0, degree, size=(2, height, width)) - degree // 2


def jitter_image(xp: ModuleType, image: Any, offsets: np.ndarray, fill: Any) -> Any:
    """``image`` (HWC) with each pixel taken from its offset source, or ``fill`` outside it."""
    height, width = image.shape[:2]
    ys = np.arange(height)[:, None] + offsets[0]
    xs = np.arange(width)[None, :] + offsets[1]
    inside = (ys >= 0) & (ys < height) & (xs >= 0) & (xs < width)
    ys, xs = np.clip(ys, 0, height - 1), np.clip(xs, 0, width - 1)
    moved = image[xp.asarray(ys), xp.asarray(xs)]
    return xp.where(xp.asarray(inside)[..., None], moved, fill)


@register
class Jitter(Operator):
    """Move each pixel of HWC images by a random offset of at most ``nDegree // 2`` pixels per axis
    (keyed per sample); ``mask`` (per sample) 0 leaves a sample unchanged."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("mask",))

    def configure(
        self,
        nDegree: int = 2,  # noqa: N803 (DALI's name)
        fill_value: float = 0.0,
        interp_type: DALIInterpType = DALIInterpType.INTERP_NN,
        mask: int = 1,
    ) -> None:
        if not is_int(nDegree) or nDegree < 1:
            raise ArgumentError(f"{_OP}: nDegree must be a positive int, got {nDegree!r}")
        if interp_type is not DALIInterpType.INTERP_NN:
            raise ArgumentError(f"{_OP}: interp_type must be INTERP_NN (whole-pixel moves), got {interp_type!r}")
        self.degree = int(nDegree)
        self.fill_value = check_number(_OP, "fill_value", fill_value)
        self.mask = bool(mask)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout and layout != "HWC":
            raise ArgumentError(f"{_OP}: expects HWC images, got layout {layout!r}")
        return layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        image = inputs[0]
        if image.ndim != 3:
            raise ValueError(f"{_OP}: expects HWC images, got a sample of shape {tuple(image.shape)}")
        offsets = jitter_offsets(self.rng(ctx), image.shape[0], image.shape[1], self.degree)
        applied = bool(per_sample(args["mask"])[0]) if "mask" in args else self.mask
        if not applied:
            return image.copy()
        return jitter_image(xp, image, offsets, xp.asarray(c_cast(self.fill_value, image.dtype)))
