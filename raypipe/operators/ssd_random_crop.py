"""``ssd_random_crop`` (``ops.SSDRandomCrop``): DALI's deprecated SSD crop, which cuts the image
itself: one of "no crop", IoU of at least 0.1, 0.3, 0.5, 0.7 or 0.9, or any IoU is picked per
sample; windows of sides in [0.3, 1) (ratio in [0.5, 2]) are drawn ``num_attempts`` times until
every box overlaps the window that much and at least one box's centre is inside (else the option
is picked again). Kept boxes are cut to the window and made relative to it; the image is cut to
the window rounded to pixels. Draws come from the sample's keyed stream."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .bbox_layout import ious
from .slice import round_half_away

#: the options DALI's SSDRandomCrop picks from: None is "no crop", -inf any overlap
OPTIONS = (None, 0.1, 0.3, 0.5, 0.7, 0.9, -np.inf)


@register
class SSDRandomCrop(Operator):
    """Inputs: an HWC image, boxes ``[l, t, r, b]`` (relative, float32) and labels (int32); outputs
    the cropped image, the kept boxes relative to the crop and their labels."""

    schema = Schema("ssd_random_crop", devices=("cpu",), min_inputs=3, max_inputs=3, num_outputs=3)

    def configure(self, num_attempts: int = 1) -> None:
        if isinstance(num_attempts, bool) or not isinstance(num_attempts, int) or num_attempts < 1:
            raise ArgumentError(f"ssd_random_crop: num_attempts must be a positive int, got {num_attempts!r}")
        self.num_attempts = num_attempts

    def compute(self, xp, inputs, args, ctx):
        image, boxes, labels = inputs[0], np.asarray(inputs[1], np.float32).reshape(-1, 4), np.asarray(inputs[2])
        rng = self.rng(ctx)
        while True:
            threshold = OPTIONS[int(rng.integers(0, len(OPTIONS)))]
            if threshold is None:
                return image, boxes.copy(), labels.copy()
            for _ in range(self.num_attempts):
                w, h = (np.float32(v) for v in rng.uniform(0.3, 1.0, 2))
                if w / h < 0.5 or w / h > 2:
                    continue
                left = float(np.float32(rng.uniform(0.0, 1.0) * (1.0 - w)))
                top = float(np.float32(rng.uniform(0.0, 1.0) * (1.0 - h)))
                right, bottom = left + w, top + h
                window = np.array([[left, top]], np.float32), np.array([[right, bottom]], np.float32)
                if len(boxes) and ious(boxes[:, :2], boxes[:, 2:], *window).min() < threshold:
                    continue
                centers = 0.5 * (boxes[:, :2].astype(np.float64) + boxes[:, 2:])
                keep = np.nonzero(
                    (centers[:, 0] >= left)
                    & (centers[:, 0] <= right)
                    & (centers[:, 1] >= top)
                    & (centers[:, 1] <= bottom)
                )[0]
                if not len(keep):
                    continue
                offset = np.array([left, top, left, top])
                scale = np.array([w, h, w, h], np.float64)
                kept = np.clip((boxes[keep] - offset) / scale, 0.0, 1.0).astype(np.float32)
                height, width = image.shape[0], image.shape[1]
                x0, x1 = round_half_away(left * width), round_half_away(right * width)
                y0, y1 = round_half_away(top * height), round_half_away(bottom * height)
                return xp.ascontiguousarray(image[y0:y1, x0:x1]), kept, labels[keep].copy()
