"""``bb_flip``: mirror relative bounding boxes horizontally and/or vertically, as ``flip`` mirrors
their image (per sample where the flags are argument inputs, ``horizontal=fn.random.coin_flip()``)."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register
from .bbox_layout import default_layout, read_boxes, write_boxes


def _flag(name: str, value) -> int:
    if value not in (0, 1):
        raise ArgumentError(f"bb_flip: {name} must be 0 or 1, got {value!r}")
    return int(value)


@register
class BbFlip(Operator):
    """Boxes ``[x, y, w, h]`` (``ltrb``: ``[l, t, r, b]``) in relative coordinates, float32
    ``(boxes, 4)``: ``horizontal`` maps x to 1 - x, ``vertical`` y to 1 - y (boxes kept as boxes).
    As DALI, the float32 result is computed through the corners (``w`` comes back as ``r - l``)."""

    schema = Schema("bb_flip", devices=("cpu", "gpu"), arg_inputs=("horizontal", "vertical"))

    def configure(self, ltrb: bool = False, horizontal: int = 1, vertical: int = 0) -> None:
        self.layout = default_layout(2, bool(ltrb))
        self.horizontal = _flag("horizontal", horizontal)
        self.vertical = _flag("vertical", vertical)

    def compute(self, xp, inputs, args, ctx):
        boxes = np.asarray(inputs[0] if xp is np else xp.asnumpy(inputs[0]))
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError(f"bb_flip: expects boxes of shape (boxes, 4), got {boxes.shape}")
        lo, hi = read_boxes(boxes, self.layout)
        one = np.float32(1)
        for axis, name in ((0, "horizontal"), (1, "vertical")):
            if _flag(name, as_scalar(args.get(name, getattr(self, name)))):
                lo[:, axis], hi[:, axis] = one - hi[:, axis], one - lo[:, axis]
        out = write_boxes(lo, hi, self.layout)
        return out if xp is np else xp.asarray(out)
