"""Bounding boxes as DALI's detection operators read and write them: a ``bbox_layout`` such as
``"xyXY"`` (starts and ends) or ``"xyWH"`` (starts and extents), read into start and end corners
and written back in float32 as DALI does (an extent is written as end minus start)."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError

AXES = "xyz"


def default_layout(ndim: int, ltrb: bool) -> str:
    """``xyXY`` (``xyzXYZ``) when ``ltrb``, else ``xyWH`` (``xyzWHD``)."""
    starts = AXES[:ndim]
    return starts + (starts.upper() if ltrb else "WHD"[:ndim])


def check_layout(op: str, layout: str, ndim: int) -> str:
    """``layout`` when it is a permutation of one of the two default layouts of ``ndim``."""
    for ltrb in (True, False):
        if sorted(layout) == sorted(default_layout(ndim, ltrb)):
            return layout
    raise ArgumentError(
        f"{op}: bbox_layout must be a permutation of {default_layout(ndim, True)!r} or "
        f"{default_layout(ndim, False)!r}, got {layout!r}"
    )


def read_boxes(boxes: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``(lo, hi)`` corners, each ``(boxes, ndim)`` float32, of boxes given in ``layout``."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, len(layout))
    ndim = len(layout) // 2
    lo = np.empty((len(boxes), ndim), np.float32)
    hi = np.empty_like(lo)
    for d in range(ndim):
        lo[:, d] = boxes[:, layout.index(AXES[d])]
        end = AXES[d].upper()
        hi[:, d] = boxes[:, layout.index(end)] if end in layout else lo[:, d] + boxes[:, layout.index("WHD"[d])]
    return lo, hi


def write_boxes(lo: np.ndarray, hi: np.ndarray, layout: str) -> np.ndarray:
    """Boxes in ``layout`` (float32 ``(boxes, 2 * ndim)``) from their corners."""
    out = np.empty((len(lo), len(layout)), np.float32)
    for d in range(lo.shape[1]):
        out[:, layout.index(AXES[d])] = lo[:, d]
        end = AXES[d].upper()
        if end in layout:
            out[:, layout.index(end)] = hi[:, d]
        else:
            out[:, layout.index("WHD"[d])] = hi[:, d] - lo[:, d]
    return out


def volumes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The float32 area (volume) of each box."""
    extent = hi - lo
    out = extent[..., 0]
    for d in range(1, extent.shape[-1]):
        out = out * extent[..., d]
    return out


def intersections(lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray, other_hi: np.ndarray) -> np.ndarray:
    """The float32 volume each box of ``(lo, hi)`` shares with each of ``(other_lo, other_hi)``:
    ``(boxes, others)``, 0 where they do not overlap (computed one axis at a time on 2-D arrays:
    SSD's 8732 anchors make these the pipeline's largest arrays)."""
    out = None
    for d in range(lo.shape[1]):
        extent = np.minimum(hi[:, d, None], other_hi[None, :, d]) - np.maximum(lo[:, d, None], other_lo[None, :, d])
        np.maximum(extent, np.float32(0), out=extent)  # no overlap along this axis: 0
        out = extent if out is None else np.multiply(out, extent, out=out)
    return out


def ious(lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray, other_hi: np.ndarray) -> np.ndarray:
    """Intersection over union in float32, ``(boxes, others)``, as DALI computes it."""
    inter = intersections(lo, hi, other_lo, other_hi)
    union = volumes(lo, hi)[:, None] + volumes(other_lo, other_hi)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / union, np.float32(0)).astype(np.float32)
