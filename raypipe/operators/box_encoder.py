"""``box_encoder``: SSD's matching of ground-truth boxes to anchors (default boxes), as DALI's
operator: every anchor gets the box it overlaps most when that IoU exceeds ``criteria``, and every
box its best anchor whatever the IoU; unmatched anchors get label 0 (background)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .bbox_layout import ious


def _floats(name: str, values: Sequence[float], count: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=np.float32).reshape(-1)
    if count is not None and array.size != count:
        raise ArgumentError(f"box_encoder: {name} must hold {count} values, got {array.size}")
    return array


def _last_argmax(values: np.ndarray, axis: int) -> np.ndarray:
    """The index of the maximum along ``axis``, the last one where several tie (DALI's ``>=`` scan)."""
    size = values.shape[axis]
    return size - 1 - np.argmax(np.flip(values, axis=axis), axis=axis)


@register
class BoxEncoder(Operator):
    """Inputs: boxes ``[l, t, r, b]`` (float32 ``(boxes, 4)``) and their labels (int32); outputs
    one box (float32 ``(anchors, 4)``) and one label (int32 ``(anchors,)``) per anchor of
    ``anchors`` (``ltrb``, flattened). A box is written as its centre and size ``[cx, cy, w, h]``
    (an unmatched anchor: the anchor's); with ``offset``, as SSD's normalised offsets from its anchor
    ``((c * scale - ca * scale) / (wa * scale) - mean) / std`` and ``(log(w / wa) - mean) / std``
    (an unmatched anchor: zeros). Computed in float32 as DALI does."""

    schema = Schema("box_encoder", devices=("cpu", "gpu"), min_inputs=2, max_inputs=2, num_outputs=2)

    def configure(self, anchors=None, criteria: float = 0.5, offset: bool = False, means=(0.0,) * 4,
                  stds=(1.0,) * 4, scale: float = 1.0) -> None:  # fmt: skip
        if anchors is None:
            raise ArgumentError("box_encoder: anchors is required (a flat list of ltrb boxes)")
        flat = _floats("anchors", anchors)
        if flat.size == 0 or flat.size % 4:
            raise ArgumentError(f"box_encoder: anchors must hold 4 values per anchor, got {flat.size}")
        if not 0.0 <= float(criteria) <= 1.0:
            raise ArgumentError(f"box_encoder: criteria must be in [0, 1], got {criteria!r}")
        self.anchors = flat.reshape(-1, 4)
        self.criteria = np.float32(criteria)
        self.offset = bool(offset)
        self.means = _floats("means", means, 4)
        self.stds = _floats("stds", stds, 4)
        if (self.stds == 0).any():
            raise ArgumentError("box_encoder: stds must not be zero")
        self.scale = np.float32(scale)
        lo, hi = self.anchors[:, :2], self.anchors[:, 2:]
        self.anchor_centers = (lo + hi) * np.float32(0.5)
        self.anchor_extents = hi - lo

    def compute(self, xp, inputs, args, ctx):
        boxes = np.asarray(inputs[0] if xp is np else xp.asnumpy(inputs[0]), dtype=np.float32).reshape(-1, 4)
        labels = np.asarray(inputs[1] if xp is np else xp.asnumpy(inputs[1])).reshape(-1).astype(np.int32)
        if len(labels) != len(boxes):
            raise ValueError(f"box_encoder: {len(boxes)} boxes but {len(labels)} labels")
        count = len(self.anchors)
        if self.offset:
            out = np.zeros((count, 4), np.float32)
        else:
            out = np.concatenate([self.anchor_centers, self.anchor_extents], axis=1)
        out_labels = np.zeros(count, np.int32)
        if len(boxes):
            overlap = ious(boxes[:, :2], boxes[:, 2:], self.anchors[:, :2], self.anchors[:, 2:])
            overlap[np.arange(len(boxes)), _last_argmax(overlap, 1)] = 2.0  # each box keeps its best anchor
            best = _last_argmax(overlap, 0)
            matched = np.nonzero(overlap[best, np.arange(count)] > self.criteria)[0]
            box = boxes[best[matched]]
            centers = (box[:, :2] + box[:, 2:]) * np.float32(0.5)
            extents = box[:, 2:] - box[:, :2]
            if self.offset:
                s = self.scale
                a_centers, a_extents = self.anchor_centers[matched] * s, self.anchor_extents[matched] * s
                centers = ((centers * s - a_centers) / a_extents - self.means[:2]) / self.stds[:2]
                ratio = (extents * s) / a_extents
                logs = np.log(ratio.astype(np.float64)).astype(np.float32)  # correctly rounded, as C's logf
                extents = (logs - self.means[2:]) / self.stds[2:]
            out[matched] = np.concatenate([centers, extents], axis=1)
            out_labels[matched] = labels[best[matched]]
        return (out, out_labels) if xp is np else (xp.asarray(out), xp.asarray(out_labels))
