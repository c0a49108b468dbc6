"""Pixel-wise masks of COCO segmentations: polygons rasterised as the COCO mask API does (its
``rleFrPoly``, which DALI also uses), RLEs (crowds) decoded, each pixel given the label of the
object covering it (the highest label where objects of several labels overlap, as DALI)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

SCALE = 5.0  # the mask API's upsampling of polygon vertices


def polygon_mask(xy: Sequence[float], height: int, width: int) -> np.ndarray:
    """The ``height`` x ``width`` bool mask of the polygon ``[x0, y0, x1, y1, ...]``, pixel for
    pixel the COCO mask API's (``rleFrPoly`` then decode) on the vertices as float32 (DALI keeps
    them so: from doubles, a few boundary pixels differ)."""
    points = np.asarray(xy, dtype=np.float32).astype(np.float64).reshape(-1, 2)
    k = len(points)
    x = [int(SCALE * px + 0.5) for px in points[:, 0]] + [0]
    y = [int(SCALE * py + 0.5) for py in points[:, 1]] + [0]
    x[k], y[k] = x[0], y[0]
    us, vs = [], []
    for j in range(k):
        xs, xe, ys, ye = x[j], x[j + 1], y[j], y[j + 1]
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = (ye - ys) / dx if dx else 0.0
            for d in range(dx + 1):
                t = dx - d if flip else d
                us.append(t + xs)
                vs.append(int(ys + s * t + 0.5))
        else:
            s = (xe - xs) / dy
            for d in range(dy + 1):
                t = dy - d if flip else d
                vs.append(t + ys)
                us.append(int(xs + s * t + 0.5))
    starts = []
    for j in range(1, len(us)):
        if us[j] == us[j - 1]:
            continue
        xd = float(us[j] if us[j] < us[j - 1] else us[j] - 1)
        xd = (xd + 0.5) / SCALE - 0.5
        if math.floor(xd) != xd or xd < 0 or xd > width - 1:
            continue
        yd = float(vs[j] if vs[j] < vs[j - 1] else vs[j - 1])
        yd = (yd + 0.5) / SCALE - 0.5
        yd = math.ceil(min(max(yd, 0.0), float(height)))
        starts.append(int(xd) * height + int(yd))
    starts.append(height * width)
    starts.sort()
    counts = np.diff(np.array([0, *starts], dtype=np.int64))
    merged = [int(counts[0])]
    j = 1
    while j < len(counts):
        if counts[j] > 0:
            merged.append(int(counts[j]))
            j += 1
        else:
            j += 1
            if j < len(counts):
                merged[-1] += int(counts[j])
                j += 1
    return rle_mask(merged, height, width)


def rle_mask(counts: Sequence[int], height: int, width: int) -> np.ndarray:
    """The bool mask of an uncompressed COCO RLE (column-major runs, starting with zeros)."""
    flat = np.zeros(height * width, dtype=bool)
    edges = np.cumsum([0, *counts])
    for k in range(1, len(counts), 2):
        flat[edges[k] : edges[k + 1]] = True
    return flat.reshape(width, height).T


def _compressed_counts(text: str) -> list[int]:
    """The run lengths of a compressed RLE string (the mask API's ``rleFrString``)."""
    counts: list[int] = []
    p = 0
    while p < len(text):
        x, k, more = 0, 0, True
        while more:
            c = ord(text[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def object_mask(segmentation, height: int, width: int) -> np.ndarray:
    """The bool mask of one object: the union of its polygons, or its RLE."""
    if isinstance(segmentation, dict):
        counts = segmentation["counts"]
        counts = _compressed_counts(counts) if isinstance(counts, str) else counts
        return rle_mask(counts, height, width)
    mask = np.zeros((height, width), dtype=bool)
    for polygon in segmentation:
        mask |= polygon_mask(polygon, height, width)
    return mask


def pixelwise_mask(segmentations: Sequence, labels: np.ndarray, height: int, width: int) -> np.ndarray:
    """An int32 ``(height, width, 1)`` mask: each pixel the highest label of the objects covering
    it, 0 where none does."""
    out = np.zeros((height, width), dtype=np.int32)
    for segmentation, label in zip(segmentations, labels):
        np.maximum(out, np.where(object_mask(segmentation, height, width), np.int32(label), 0), out=out)
    return out[..., None]
