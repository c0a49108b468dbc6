"""``bbox_rotate``: move bounding boxes as ``rotate`` moves their image, as DALI 2.4's operator.

Detection pipelines that rotate images need their boxes rotated the same way; DALI pairs
``fn.rotate`` with ``fn.bbox_rotate``, which takes the original image's shape (``input_shape``,
read through ``shape_layout``) and the same ``angle`` (degrees, counter-clockwise) and ``keep_size``
(or ``size``) as the ``rotate`` it goes with, so its boxes land on the rotated image's canvas.

Per box, in float32 and in DALI's order (so the outputs are DALI's bit for bit): its four corners,
centred on the image's centre (relative ones scaled by the image's extents), turn by the angle
(``x cos + y sin``, ``-x sin + y cos``; radians as ``degrees * float32(pi / 180)``, the sine and
cosine the C library's ``sinf`` and ``cosf``, as DALI's), then move to the canvas's centre; the new
box encloses them (``mode="expand"``). ``"fixed"`` shrinks it about its centre by what the turn
added, so that it keeps its extents (swapped when the turn swapped which is the longer);
``"halfway"`` by half of that. The box is then clipped to the canvas and dropped, with its label,
when the fraction of its area left is under ``remove_threshold`` (or is undefined: a box of no
area is always dropped, as in DALI). Relative output boxes are relative to the canvas.

The canvas is the input's extents with ``keep_size``, ``size`` (``[H, W]``, floored) when given,
else the size DALI's ``rotate`` gives (``ceil(|cos| w + |sin| h - 0.01)`` and the like, made to keep
the parity of the extent it mostly comes from), which raypipe's ``rotate`` gives too: boxes line up
with ``fn.rotate(image, angle=..., keep_size=...)`` as they do in DALI.

Where this differs from DALI: ``remove_threshold=1`` is taken (DALI documents [0, 1] but its check
refuses 1); a per-sample ``angle`` may be any real number type (DALI's must be float32); bad
arguments are refused when the pipeline is defined where DALI refuses them when it runs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .transforms import c_trig

OP = "bbox_rotate"
MODES = ("expand", "halfway", "fixed")
#: the box layouts DALI's bbox_rotate takes -> whether the ends are given (else the extents)
LAYOUTS = {"xyXY": True, "xyWH": False}
_F32 = np.float32
#: DALI's ``deg2rad`` factor: ``M_PI / 180`` as a float
_DEG = _F32(math.pi / 180)
#: the slack of DALI's rotated canvas size
_CANVAS_EPS = 1e-2


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _extents(name: str, value: Any) -> list[int]:
    """A constant ``input_shape``: a list of non-negative ints (one int is a list of one)."""
    values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    if not values or not all(_is_int(v) and v >= 0 for v in values):
        raise ArgumentError(f"{OP}: {name} must be a list of non-negative ints, got {value!r}")
    return [int(v) for v in values]


def canvas_size(width: int, height: int, radians: np.float32) -> tuple[int, int]:
    """DALI's rotated canvas ``(width, height)`` for an image of ``width x height`` turned by
    ``radians`` (its ``RotatedCanvasSize`` in float64, then each extent made odd or even as the
    source extent that contributes most)."""
    abs_cos, abs_sin = abs(math.cos(float(radians))), abs(math.sin(float(radians)))
    out_w = math.ceil(abs_cos * width + abs_sin * height - _CANVAS_EPS)
    out_h = math.ceil(abs_cos * height + abs_sin * width - _CANVAS_EPS)
    parity = (width % 2, height % 2) if abs_sin <= abs_cos else (height % 2, width % 2)
    return out_w + ((out_w % 2) ^ parity[0]), out_h + ((out_h % 2) ^ parity[1])


def _clamp(values: np.ndarray, high: np.float32) -> np.ndarray:
    """``std::clamp(values, 0, high)`` (NaN stays NaN)."""
    zero = _F32(0)
    return np.where(values < zero, zero, np.where(high < values, high, values))


def rotate_boxes(
    boxes: np.ndarray,
    radians: np.float32,
    in_wh: tuple[np.float32, np.float32],
    out_wh: tuple[np.float32, np.float32],
    *,
    ltrb: bool,
    normalized: bool,
    mode: str,
    remove_threshold: np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """The rotated boxes (float32 ``(kept, 4)``, in the input's layout) and the indices of the boxes
    kept, as DALI's kernel computes them (see the module docstring)."""
    boxes = boxes.astype(_F32, copy=False).reshape(-1, 4)
    x1, y1, x2, y2 = (boxes[:, k] for k in range(4))
    if not ltrb:
        x2, y2 = x2 + x1, y2 + y1
    xs = np.stack([x1, x2, x1, x2], axis=1)
    ys = np.stack([y1, y1, y2, y2], axis=1)
    in_w, in_h = in_wh
    if normalized:
        xs, ys = (xs - _F32(0.5)) * in_w, (ys - _F32(0.5)) * in_h
    else:
        xs, ys = xs - in_w / _F32(2), ys - in_h / _F32(2)
    old_w, old_h = xs[:, 1] - xs[:, 0], ys[:, 2] - ys[:, 0]
    cos_a, sin_a = c_trig("cos", radians), c_trig("sin", radians)
    xs, ys = xs * cos_a + ys * sin_a, -xs * sin_a + ys * cos_a
    out_w, out_h = out_wh
    xs, ys = xs + out_w / _F32(2), ys + out_h / _F32(2)
    lx, hx, ly, hy = xs.min(axis=1), xs.max(axis=1), ys.min(axis=1), ys.max(axis=1)
    if mode != "expand":
        new_w, new_h = hx - lx, hy - ly
        flipped = (old_w < old_h) ^ (new_w < new_h)  # the turn swapped which extent is the longer
        diff_w = (new_w - np.where(flipped, old_h, old_w)) * _F32(0.5)
        diff_h = (new_h - np.where(flipped, old_w, old_h)) * _F32(0.5)
        if mode == "halfway":
            diff_w, diff_h = diff_w * _F32(0.5), diff_h * _F32(0.5)
        lx, ly, hx, hy = lx + diff_w, ly + diff_h, hx - diff_w, hy - diff_h
    old_area = (hx - lx) * (hy - ly)
    lx, hx, ly, hy = _clamp(lx, out_w), _clamp(hx, out_w), _clamp(ly, out_h), _clamp(hy, out_h)
    with np.errstate(divide="ignore", invalid="ignore"):
        remaining = ((hx - lx) * (hy - ly)) / old_area
    kept = np.nonzero(remaining >= remove_threshold)[0]
    out = np.stack([lx, ly, hx, hy], axis=1)[kept]
    if not ltrb:
        out[:, 2:] -= out[:, :2]
    if normalized:
        out *= np.array([_F32(1) / out_w, _F32(1) / out_h] * 2, dtype=_F32)
    return out, kept


@register
class BBoxRotate(Operator):
    """Inputs: boxes (float32 ``(boxes, 4)`` in ``bbox_layout``, ``"xyXY"`` or ``"xyWH"``, relative
    unless ``bbox_normalized=False``) and optionally their int32 labels (``(boxes,)`` or
    ``(boxes, 1)``). Outputs: the rotated boxes and, given labels, the labels of the boxes kept.
    ``angle`` (degrees), ``input_shape`` and ``size`` may come per sample."""

    schema = Schema(OP, devices=("cpu",), arg_inputs=("angle", "input_shape", "size"), min_inputs=1, max_inputs=2)

    def configure(
        self,
        angle: float | None = None,
        input_shape: int | Sequence[int] | None = None,
        keep_size: bool = False,
        size: float | Sequence[float] | None = None,
        mode: str = "expand",
        bbox_layout: str = "xyXY",
        bbox_normalized: bool = True,
        remove_threshold: float = 0.1,
        shape_layout: str = "HW",
    ) -> None:
        self.angle = None if angle is None else _F32(check_number(OP, "angle", angle))
        self.input_shape = None if input_shape is None else _extents("input_shape", input_shape)
        self.keep_size = bool(keep_size)
        if size is not None and not (isinstance(size, (list, tuple)) and len(size) == 0):
            values = list(size) if isinstance(size, (list, tuple, np.ndarray)) else [size]
            if len(values) != 2:
                raise ArgumentError(f"{OP}: size must be two extents [H, W], got {size!r}")
            self.size: tuple[int, int] | None = tuple(math.floor(check_number(OP, "size", v)) for v in values)
        else:
            self.size = None
        if mode not in MODES:
            raise ArgumentError(f"{OP}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        if bbox_layout not in LAYOUTS:
            raise ArgumentError(f"{OP}: bbox_layout must be 'xyXY' or 'xyWH', got {bbox_layout!r}")
        self.ltrb = LAYOUTS[bbox_layout]
        self.normalized = bool(bbox_normalized)
        threshold = check_number(OP, "remove_threshold", remove_threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ArgumentError(f"{OP}: remove_threshold must be in [0, 1], got {remove_threshold!r}")
        self.remove_threshold = _F32(threshold)
        if not isinstance(shape_layout, str) or "W" not in shape_layout or "H" not in shape_layout:
            raise ArgumentError(f"{OP}: shape_layout must name the axes 'W' and 'H', got {shape_layout!r}")
        self.wh_index = (shape_layout.index("W"), shape_layout.index("H"))
        if self.input_shape is not None and len(self.input_shape) <= max(self.wh_index):
            raise ArgumentError(
                f"{OP}: input_shape {self.input_shape} has fewer extents than shape_layout {shape_layout!r}"
            )
        if self.keep_size and self.size is not None:
            raise ArgumentError(f"{OP}: keep_size and size are mutually exclusive")
        self.has_labels = False

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        self.has_labels = count > 1
        for name in ("angle", "input_shape"):
            if getattr(self, name) is None and name not in arg_inputs:
                raise ArgumentError(f"{OP}: {name} is required (a constant or a per-sample argument input)")
        if self.keep_size and "size" in arg_inputs:
            raise ArgumentError(f"{OP}: keep_size and size are mutually exclusive")

    @property
    def num_outputs(self) -> int:
        return 1 + self.has_labels

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def _angle(self, args: dict[str, Any]) -> np.float32:
        if "angle" not in args:
            return self.angle
        value = np.asarray(args["angle"])
        if value.size != 1 or not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value):
            raise ValueError(f"{OP}: angle must be one number per sample, got shape {value.shape} {value.dtype}")
        return _F32(value.reshape(-1)[0])

    def _image_wh(self, args: dict[str, Any]) -> tuple[int, int]:
        if "input_shape" in args:
            value = np.asarray(args["input_shape"])
            if not np.issubdtype(value.dtype, np.integer):
                raise ValueError(f"{OP}: input_shape must be integers, got {value.dtype}")
            extents = value.reshape(-1).tolist()
            if len(extents) <= max(self.wh_index):
                raise ValueError(f"{OP}: input_shape {extents} has fewer extents than shape_layout names")
        else:
            extents = self.input_shape
        return int(extents[self.wh_index[0]]), int(extents[self.wh_index[1]])

    def _canvas_wh(self, args: dict[str, Any], width: int, height: int, radians: np.float32) -> tuple[int, int]:
        if self.keep_size:
            return width, height
        if "size" in args:
            value = np.asarray(args["size"])
            if value.dtype not in (np.int32, np.int64, np.uint32, np.float32):
                raise ValueError(f"{OP}: size must be int32, int64, uint32 or float32, got {value.dtype}")
            if value.size != 2:
                raise ValueError(f"{OP}: size must be two extents [H, W] per sample, got shape {value.shape}")
            h, w = np.floor(value.reshape(-1)).astype(np.int64).tolist()
            return w, h
        if self.size is not None:
            return self.size[1], self.size[0]
        return canvas_size(width, height, radians)

    def run_sample(self, inputs, args, ctx):
        boxes = np.asarray(inputs[0])
        if boxes.dtype != np.float32 or boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError(f"{OP}: expects float32 boxes of shape (boxes, 4), got {boxes.dtype} {boxes.shape}")
        labels = np.asarray(inputs[1]) if self.has_labels else None
        if labels is not None:
            if labels.dtype != np.int32 or not (labels.ndim == 1 or (labels.ndim == 2 and labels.shape[1] == 1)):
                raise ValueError(f"{OP}: labels must be int32 of shape (boxes,) or (boxes, 1), got "
                                 f"{labels.dtype} {labels.shape}")  # fmt: skip
            if len(labels) != len(boxes):
                raise ValueError(f"{OP}: {len(labels)} labels for {len(boxes)} boxes")
        radians = self._angle(args) * _DEG
        width, height = self._image_wh(args)
        out_w, out_h = self._canvas_wh(args, width, height, radians)
        out, kept = rotate_boxes(
            boxes,
            radians,
            (_F32(width), _F32(height)),
            (_F32(out_w), _F32(out_h)),
            ltrb=self.ltrb,
            normalized=self.normalized,
            mode=self.mode,
            remove_threshold=self.remove_threshold,
        )
        if labels is None:
            return out
        return out, np.ascontiguousarray(labels[kept])
