"""Random crop windows (area and aspect-ratio sampling), shared by the fused decoder,
``random_resized_crop`` and ``random_crop_generator``: a pure function of the image size and the
sample's draws, and the check of the three arguments that shape them (:func:`window_arguments`).

Each attempt takes four uniform draws in [0, 1): area fraction, log aspect ratio, x, y.
``draws`` holds them as ``(4, num_attempts)`` for one image and ``(4, num_attempts,
images)`` for many (a column per image, as :meth:`raypipe.operator.Operator.draws` gives
them). :func:`random_crop_window` is the reference for one image; :func:`random_crop_windows`
gives exactly its windows for many images at once: the same float operations in the same
order, and the ratio through the same ``np.exp`` (whose results may differ from
``math.exp`` in the last bit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import check_range

DRAWS = 4  # per attempt


def window_arguments(
    op: str, random_area: Sequence[float], random_aspect_ratio: Sequence[float], num_attempts: int
) -> tuple[tuple[float, float], tuple[float, float], int]:
    """``random_area`` (within (0, 1]), ``random_aspect_ratio`` (positive) and ``num_attempts`` (a
    positive int) checked; ArgumentError naming ``op`` otherwise."""
    area = check_range(op, "random_area", random_area, low=0.0)
    if not 0 < area[1] <= 1:
        raise ArgumentError(f"{op}: random_area must lie in (0, 1], got {random_area!r}")
    ratio = check_range(op, "random_aspect_ratio", random_aspect_ratio)
    if ratio[0] <= 0:
        raise ArgumentError(f"{op}: random_aspect_ratio must be positive, got {random_aspect_ratio!r}")
    if isinstance(num_attempts, bool) or not isinstance(num_attempts, int) or num_attempts < 1:
        raise ArgumentError(f"{op}: num_attempts must be a positive int, got {num_attempts!r}")
    return area, ratio, num_attempts


def _ratios(ratio_range: tuple[float, float], draws: np.ndarray) -> np.ndarray:
    """Each attempt's aspect ratio, log-uniform in ``ratio_range``."""
    log_lo, log_hi = math.log(ratio_range[0]), math.log(ratio_range[1])
    return np.exp(log_lo + (log_hi - log_lo) * draws[1])


def random_crop_window(
    width: int,
    height: int,
    area_range: tuple[float, float],
    ratio_range: tuple[float, float],
    draws: np.ndarray,
) -> tuple[int, int, int, int]:
    """``(x, y, w, h)`` covering a random fraction of the area with a random aspect ratio.

    Takes the first attempt that fits (as torchvision's RandomResizedCrop does); falls back to
    the largest centred window whose aspect ratio lies in ``ratio_range``.
    """
    area = float(width * height)
    span = area_range[1] - area_range[0]
    fractions, _, xs, ys = draws.tolist()
    for a, ratio, px, py in zip(fractions, _ratios(ratio_range, draws).tolist(), xs, ys):
        target = area * (area_range[0] + span * a)
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            x = min(int(px * (width - w + 1)), width - w)
            y = min(int(py * (height - h + 1)), height - h)
            return x, y, w, h
    in_ratio = width / height
    if in_ratio < ratio_range[0]:
        w, h = width, max(1, round(width / ratio_range[0]))
    elif in_ratio > ratio_range[1]:
        w, h = max(1, round(height * ratio_range[1])), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def random_crop_windows(
    sizes: np.ndarray,
    area_range: tuple[float, float],
    ratio_range: tuple[float, float],
    draws: np.ndarray,
) -> np.ndarray:
    """:func:`random_crop_window` of many images: ``sizes`` is an int64 array of two rows (widths,
    heights); returns an int64 array of ``(x, y, w, h)`` rows. Every attempt of every image is
    computed at once, then each image takes its first that fits."""
    _, attempts, n = draws.shape
    area = (sizes[0] * sizes[1]).astype(np.float64)
    target = area * (area_range[0] + (area_range[1] - area_range[0]) * draws[0])
    ratio = _ratios(ratio_range, draws)
    wh = np.empty((2, attempts, n))
    np.multiply(target, ratio, out=wh[0])
    np.divide(target, ratio, out=wh[1])
    np.sqrt(wh, out=wh)
    np.rint(wh, out=wh)
    inside = (wh <= sizes[:, None, :]) & (wh > 0)
    fits = inside[0] & inside[1]
    at = fits.argmax(axis=0) * n + np.arange(n)  # each image's first fitting attempt, flattened
    size = wh.reshape(2, -1)[:, at]
    room = sizes - size
    corner = np.minimum(np.floor(draws[2:].reshape(2, -1)[:, at] * (room + 1)), room)
    windows = np.concatenate([corner, size]).astype(np.int64).T
    missed = ~fits.reshape(-1)[at]
    if missed.any():
        windows[missed] = _centred(sizes[:, missed], ratio_range)
    return windows


def _centred(sizes: np.ndarray, ratio_range: tuple[float, float]) -> np.ndarray:
    """The fallback of :func:`random_crop_window`, for images where no attempt fits."""
    widths, heights = sizes
    in_ratio = widths / heights
    w = np.where(in_ratio > ratio_range[1], np.maximum(1, np.rint(heights * ratio_range[1])), widths).astype(np.int64)
    h = np.where(in_ratio < ratio_range[0], np.maximum(1, np.rint(widths / ratio_range[0])), heights).astype(np.int64)
    return np.stack([(widths - w) // 2, (heights - h) // 2, w, h], axis=1)
