"""``paste`` (an image placed on a larger canvas filled with a colour: SSD's "zoom out") and
``bbox_paste`` (its boxes moved to stay on the same pixels), as DALI's operators."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register


def _ratio(op: str, value: Any) -> np.float32:
    if value is None:
        raise ArgumentError(f"{op}: ratio is required")
    ratio = np.float32(check_number(op, "ratio", as_scalar(value)))
    if ratio < 1:
        raise ValueError(f"{op}: ratio must be >= 1, got {ratio}")
    return ratio


def _position(op: str, name: str, value: Any) -> np.float32:
    position = np.float32(check_number(op, name, as_scalar(value)))
    if not 0 <= position <= 1:
        raise ValueError(f"{op}: {name} must be in [0, 1], got {position}")
    return position


@register
class Paste(Operator):
    """An HWC uint8 image on a canvas ``ratio`` times its size (at least ``min_canvas_size`` on each
    side) filled with ``fill_value`` (one value per channel of ``n_channels``), placed at
    ``paste_x`` / ``paste_y`` (0: left / top, 1: right / bottom); per sample where they are argument
    inputs."""

    schema = Schema("paste", devices=("cpu", "gpu"), arg_inputs=("ratio", "paste_x", "paste_y", "min_canvas_size"))

    def configure(self, ratio=None, fill_value=(0,), n_channels: int = 3, paste_x=0.5, paste_y=0.5,
                  min_canvas_size=0.0) -> None:  # fmt: skip
        self.ratio = ratio
        self.n_channels = int(n_channels)
        fill = np.asarray(fill_value, dtype=np.int64).reshape(-1)
        if len(fill) not in (1, self.n_channels):
            raise ArgumentError(f"paste: fill_value must hold {self.n_channels} values, got {len(fill)}")
        self.fill = np.broadcast_to(fill, (self.n_channels,)).astype(np.uint8)
        self.paste_x, self.paste_y, self.min_canvas_size = paste_x, paste_y, min_canvas_size

    def canvas(self, height: int, width: int, args: dict[str, Any]) -> tuple[int, int, int, int]:
        """``(canvas height, canvas width, top, left)`` of this sample."""
        ratio = _ratio("paste", args.get("ratio", self.ratio))
        smallest = np.float32(
            check_number("paste", "min_canvas_size", as_scalar(args.get("min_canvas_size", self.min_canvas_size)))
        )
        new_h = int(max(np.float32(height) * ratio, smallest))
        new_w = int(max(np.float32(width) * ratio, smallest))
        x = _position("paste", "paste_x", args.get("paste_x", self.paste_x))
        y = _position("paste", "paste_y", args.get("paste_y", self.paste_y))
        return new_h, new_w, int(y * np.float32(new_h - height)), int(x * np.float32(new_w - width))

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.ndim != 3 or image.shape[2] != self.n_channels or image.dtype != np.uint8:
            raise ValueError(
                f"paste: expects HWC uint8 images of {self.n_channels} channels, got {image.dtype} {tuple(image.shape)}"
            )
        height, width = int(image.shape[0]), int(image.shape[1])
        new_h, new_w, top, left = self.canvas(height, width, args)
        out = xp.empty((new_h, new_w, self.n_channels), dtype=np.uint8)
        out[...] = xp.asarray(self.fill)
        out[top : top + height, left : left + width] = image
        return out


@register
class BBoxPaste(Operator):
    """Relative boxes ``[x, y, w, h]`` (``ltrb``: ``[l, t, r, b]``) moved with their image pasted by
    ``paste`` with the same ``ratio``, ``paste_x`` and ``paste_y``: ``x' = x * (1 / ratio) + paste_x
    * ((ratio - 1) / ratio)`` (and y), extents times ``1 / ratio``, in float32 as DALI."""

    schema = Schema("bbox_paste", devices=("cpu", "gpu"), arg_inputs=("ratio", "paste_x", "paste_y"))

    def configure(self, ratio=None, ltrb: bool = False, paste_x=0.5, paste_y=0.5) -> None:
        self.ratio, self.paste_x, self.paste_y = ratio, paste_x, paste_y
        self.ltrb = bool(ltrb)

    def compute(self, xp, inputs, args, ctx):
        boxes = np.asarray(inputs[0] if xp is np else xp.asnumpy(inputs[0]), dtype=np.float32)
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError(f"bbox_paste: expects boxes of shape (boxes, 4), got {boxes.shape}")
        ratio = _ratio("bbox_paste", args.get("ratio", self.ratio))
        scale = np.float32(1) / ratio
        margin = (ratio - np.float32(1)) / ratio
        shift = np.array(
            [_position("bbox_paste", n, args.get(n, getattr(self, n))) * margin for n in ("paste_x", "paste_y")],
            dtype=np.float32,
        )
        out = boxes * scale
        out[:, :2] += shift
        if self.ltrb:
            out[:, 2:] += shift
        return out if xp is np else xp.asarray(out)
