"""Random crop windows (area and aspect-ratio sampling), shared by the fused decoder
and ``random_resized_crop``: a pure function of the image size and a generator."""

from __future__ import annotations

import math

import numpy as np


def random_crop_window(
    width: int,
    height: int,
    area_range: tuple[float, float],
    ratio_range: tuple[float, float],
    num_attempts: int,
    rng: np.random.Generator,
) -> tuple[int, int, int, int]:
    """``(x, y, w, h)`` covering a random fraction of the area with a random aspect ratio.

    Tries ``num_attempts`` times (as torchvision's RandomResizedCrop does); falls back
    to the largest centred window whose aspect ratio lies in ``ratio_range``.
    """
    area = width * height
    log_lo, log_hi = math.log(ratio_range[0]), math.log(ratio_range[1])
    draws = rng.random((num_attempts, 4)).tolist()  # Python floats: numpy scalars make the loop slow
    for a, r, px, py in draws:
        target = area * (area_range[0] + (area_range[1] - area_range[0]) * a)
        ratio = math.exp(log_lo + (log_hi - log_lo) * r)
        w = int(round(math.sqrt(target * ratio)))
        h = int(round(math.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            x = min(int(px * (width - w + 1)), width - w)
            y = min(int(py * (height - h + 1)), height - h)
            return x, y, w, h
    in_ratio = width / height
    if in_ratio < ratio_range[0]:
        w, h = width, max(1, int(round(width / ratio_range[0])))
    elif in_ratio > ratio_range[1]:
        w, h = max(1, int(round(height * ratio_range[1]))), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h
