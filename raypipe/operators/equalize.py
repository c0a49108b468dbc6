"""``equalize``: histogram equalization of uint8 images, channel by channel, as DALI's (OpenCV's
``equalizeHist`` rule, which AutoAugment's ``equalize`` uses).

For each channel: the histogram of its 256 values, the first value present ``v0``; values map
through ``round(cdf(v) * 255 / (n - hist[v0]))`` with ``cdf`` counting the pixels above ``v0`` up to
``v`` (``v0`` maps to 0; rounded to nearest, ties to even, in float32). A channel of one value is left
as it is. The channel axis is the layout's ``C`` (any position), the last of a 3-D sample without a
layout; a sample without channels is one channel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..operator import Operator, Schema, register

OP = "equalize"


@register
class Equalize(Operator):
    """Each channel's histogram equalized."""

    schema = Schema(OP, devices=("cpu", "gpu"))

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        self.channel_axis = layout.index("C") if "C" in layout else (None if layout else -1)
        return layout

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.dtype != np.uint8:
            raise ValueError(f"{OP}: the input must be uint8, got {image.dtype}")
        axis = getattr(self, "channel_axis", -1)
        if axis == -1 and image.ndim != 3:
            axis = None
        channels = image[..., None] if axis is None else xp.moveaxis(image, axis, -1)
        count = channels.shape[-1]
        flat = channels.reshape(-1, count).astype(np.int64)
        hist = xp.bincount((flat + 256 * xp.arange(count)).ravel(), minlength=256 * count).reshape(count, 256)
        luts = xp.stack([_lut(xp, hist[c], flat.shape[0]) for c in range(count)])
        out = luts[xp.arange(count), flat].reshape(channels.shape)
        return out[..., 0] if axis is None else xp.moveaxis(out, -1, axis)


def _lut(xp, hist, total: int):
    """One channel's map of its 256 values."""
    present = xp.nonzero(hist)[0]
    if not len(present):
        return xp.zeros(256, dtype=np.uint8)
    first = int(present[0])
    if int(hist[first]) == total:
        return xp.full(256, first, dtype=np.uint8)
    scale = np.float32(255.0 / (total - int(hist[first])))
    counts = xp.cumsum(hist, dtype=np.int64) - xp.cumsum(hist, dtype=np.int64)[first]
    mapped = xp.rint(counts.astype(np.float32) * scale)
    lut = xp.clip(mapped, 0, 255).astype(np.uint8)
    lut[: first + 1] = 0
    return lut
