"""``bbox_rotate``: DALI 2.4's outputs bit for bit (every mode, ``keep_size`` and ``size``, relative
and absolute boxes in both layouts, labels, per-sample angles and shapes, boxes leaving the
canvas), boxes that enclose their rectangle on raypipe's rotated images, and argument and sample
errors that name the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops
from raypipe.errors import ArgumentError, SampleError
from raypipe.operators.bbox_rotate import canvas_size

RNG = np.random.default_rng(3)


def _boxes(count: int, rng: np.random.Generator = RNG, scale: float = 1.0) -> np.ndarray:
    """``xyXY`` boxes, some reaching past the image's edges, a few of no area."""
    lo = rng.uniform(-0.15, 0.95, (count, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(0.0, 0.45, (count, 2))], axis=1)
    flat = rng.random(count) < 0.1
    boxes[flat, 2] = boxes[flat, 0]
    return (boxes * scale).astype(np.float32)


def _xywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)


COUNTS = (9, 1, 0, 14, 5, 23)
BOXES = [_boxes(n) for n in COUNTS]
PIXEL_BOXES = [_boxes(n, scale=200.0) for n in COUNTS]
LABELS = [RNG.integers(1, 9, n).astype(np.int32) for n in COUNTS]
COLUMN_LABELS = [lab[:, None] for lab in LABELS]
ANGLES = [np.float32(a) for a in (30.0, -47.5, 90.0, 181.25, 0.0, 333.3)]
SHAPES = [np.array(s, np.int64) for s in ((200, 300, 3), (201, 99, 3), (64, 64, 1), (480, 641, 3), (7, 3, 3),
                                           (333, 128, 3))]  # fmt: skip
SIZES = [np.array(s, np.float32) for s in ((250.7, 310.2), (90, 90), (64, 80), (500, 500), (9.9, 3.0), (10, 400))]
INT_SIZES = [s.astype(np.int32) for s in SIZES]


def _rotate(**kwargs):
    """A build that rotates boxes (and labels) with per-sample angles and shapes."""
    return lambda x, f, *e: f.bbox_rotate(x, *e[:-2], angle=e[-2], input_shape=e[-1], **kwargs)


# (name, samples, build(data, fn, *extra), per-sample extra batches)
CASES = []
for _mode in ("expand", "halfway", "fixed"):
    for _keep in (False, True):
        for _layout in ("xyXY", "xyWH"):
            for _normalized in (True, False):
                _data = BOXES if _normalized else PIXEL_BOXES
                CASES.append((
                    f"{_mode} keep_size={_keep} {_layout} normalized={_normalized}",
                    _data if _layout == "xyXY" else [_xywh(b) for b in _data],
                    _rotate(mode=_mode, keep_size=_keep, bbox_layout=_layout, bbox_normalized=_normalized),
                    (LABELS, ANGLES, SHAPES),
                ))  # fmt: skip
CASES += [
    ("no labels", BOXES, _rotate(), (ANGLES, SHAPES)),
    ("column labels", BOXES, _rotate(keep_size=True), (COLUMN_LABELS, ANGLES, SHAPES)),
    ("threshold 0", BOXES, _rotate(keep_size=True, remove_threshold=0.0), (LABELS, ANGLES, SHAPES)),
    ("threshold under 1", BOXES, _rotate(keep_size=True, remove_threshold=0.9999999, mode="halfway"),
     (LABELS, ANGLES, SHAPES)),
    ("threshold 0.6 fixed", PIXEL_BOXES, _rotate(remove_threshold=0.6, mode="fixed", bbox_normalized=False),
     (LABELS, ANGLES, SHAPES)),
    ("constants", BOXES, lambda x, f, lab: f.bbox_rotate(x, lab, angle=37.5, input_shape=[120, 250]), (LABELS,)),
    ("constant angle, keep_size", BOXES,
     lambda x, f, s: f.bbox_rotate(x, angle=-100.0, input_shape=s, keep_size=True, mode="fixed"), (SHAPES,)),
    ("shape_layout WH", BOXES, lambda x, f, a: f.bbox_rotate(x, angle=a, input_shape=[250, 120], shape_layout="WH"),
     (ANGLES,)),
    ("shape_layout CHW", BOXES,
     lambda x, f, a, s: f.bbox_rotate(x, angle=a, input_shape=s, shape_layout="CHW"), (ANGLES, SHAPES)),
    ("int32 input_shape", BOXES, _rotate(), (ANGLES, [s.astype(np.int32) for s in SHAPES])),
    ("constant size", BOXES, lambda x, f, a, s: f.bbox_rotate(x, angle=a, input_shape=s, size=[150.5, 260.9]),
     (ANGLES, SHAPES)),
    ("per-sample float size", BOXES, lambda x, f, a, s, z: f.bbox_rotate(x, angle=a, input_shape=s, size=z),
     (ANGLES, SHAPES, SIZES)),
    ("per-sample int size", PIXEL_BOXES,
     lambda x, f, a, s, z: f.bbox_rotate(x, angle=a, input_shape=s, size=z, bbox_normalized=False, mode="halfway"),
     (ANGLES, SHAPES, INT_SIZES)),
]  # fmt: skip


@pytest.mark.parametrize("name, samples, build, extra", CASES, ids=[c[0] for c in CASES])
def test_bbox_rotate_equals_dali(ours, dali, name, samples, build, extra):
    def with_types(data, f, types, *e):
        out = build(data, f, *e)
        return tuple(out) if isinstance(out, list) else out  # DALI returns several outputs as a list

    theirs = dali(samples, with_types, per_sample=extra)
    mine = ours(samples, lambda data, *e: build(data, fn, *e), per_sample=extra)
    assert len(mine) == len(theirs)
    for (got, got_layout), (want, want_layout) in zip(mine, theirs):
        assert got_layout == want_layout
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("mode", ["expand", "halfway", "fixed"])
def test_random_angles_equal_dali(ours, dali, mode):
    """Many random angles, image shapes and boxes."""
    rng = np.random.default_rng(21)
    boxes = [_boxes(int(rng.integers(0, 30)), rng) for _ in range(16)]
    extra = (
        [np.arange(len(b), dtype=np.int32) for b in boxes],
        [np.float32(rng.uniform(-720, 720)) for _ in boxes],
        [np.array([rng.integers(1, 900), rng.integers(1, 900), 3], np.int64) for _ in boxes],
    )
    build = _rotate(mode=mode, remove_threshold=0.3)
    theirs = dali(boxes, lambda x, f, t, *e: tuple(build(x, f, *e)), per_sample=extra)
    mine = ours(boxes, lambda x, *e: tuple(build(x, fn, *e)), per_sample=extra)
    for (got, _), (want, _) in zip(mine, theirs):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b, err_msg=mode)


def test_threshold_1_is_taken(ours, dali):
    """DALI documents ``remove_threshold`` in [0, 1] but refuses 1 (its check excludes the end); here
    1 is taken, and keeps the boxes DALI's largest threshold below 1 keeps."""
    extra = (LABELS, ANGLES, SHAPES)
    mine = ours(BOXES, lambda x, *e: _rotate(keep_size=True, remove_threshold=1.0)(x, fn, *e), per_sample=extra)
    build = _rotate(keep_size=True, remove_threshold=float(np.nextafter(np.float32(1), np.float32(0))))
    theirs = dali(BOXES, lambda x, f, t, *e: tuple(build(x, f, *e)), per_sample=extra)
    assert sum(len(b) for b in mine[0][0]) < sum(len(b) for b in BOXES)
    for (got, _), (want, _) in zip(mine, theirs):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_ops_class_name_is_dalis():
    assert ops.BBoxRotate.__name__ == "BBoxRotate"


def _with_rectangle(image: np.ndarray, rect: tuple[int, int, int, int]) -> np.ndarray:
    """``image`` with the rectangle ``(l, t, r, b)`` drawn on it (white) and a fourth channel marking
    its pixels (255), so the rectangle can be found after a rotation."""
    left, top, right, bottom = rect
    drawn = np.concatenate([image, np.zeros(image.shape[:2] + (1,), np.uint8)], axis=2)
    drawn[top:bottom, left:right] = 255
    return drawn


@pytest.mark.parametrize("keep_size", [False, True])
def test_rotated_boxes_enclose_the_rotated_rectangle(images, keep_size):
    """A rectangle drawn on real images and rotated by ``fn.rotate`` lies inside its box from
    ``bbox_rotate`` (mode "expand"), which is its pixels' bounding box within a pixel; the boxes are
    relative to the canvas ``fn.rotate`` gives."""
    angles = [np.float32(a) for a in (30.0, -65.0, 135.0, 200.0)]
    samples, boxes = [], []
    for k, image in enumerate(images):
        h, w = image.shape[:2]
        rect = (w // 4 + 3 * k, h // 3, w // 2 + 5 * k, h // 2 + 2 * k)
        samples.append(_with_rectangle(image, rect))
        boxes.append(np.array([[rect[0] / w, rect[1] / h, rect[2] / w, rect[3] / h]], np.float32))

    @rp.pipeline_def(batch_size=len(samples), num_threads=1, seed=0)
    def pipe():
        image = fn.external_source(source=lambda: samples, layout="HWC")
        box = fn.external_source(source=lambda: boxes)
        angle = fn.external_source(source=lambda: angles)
        rotated_box = fn.bbox_rotate(box, angle=angle, input_shape=fn.shapes(image), keep_size=keep_size)
        return fn.rotate(image, angle=angle, keep_size=keep_size, fill_value=0), rotated_box

    with pipe() as p:
        rotated, rotated_boxes = p.run()
    for k, image in enumerate(images):
        out = np.asarray(rotated.at(k))
        h, w = image.shape[:2]
        if keep_size:
            assert out.shape[:2] == (h, w)
        else:
            assert out.shape[:2] == canvas_size(w, h, angles[k] * np.float32(np.pi / 180))[::-1]
        box = np.asarray(rotated_boxes.at(k))
        assert box.shape == (1, 4)
        left, top, right, bottom = box[0] * np.array([out.shape[1], out.shape[0]] * 2)
        rows, cols = np.nonzero(out[:, :, 3] > 0)
        assert len(rows) > 0
        # pixel (r, c) covers [c, c + 1) x [r, r + 1); bilinear sampling smears edges by up to a pixel
        assert cols.min() >= left - 1 and cols.max() + 1 <= right + 1
        assert rows.min() >= top - 1 and rows.max() + 1 <= bottom + 1
        assert cols.min() <= left + 1 and cols.max() + 1 >= right - 1
        assert rows.min() <= top + 1 and rows.max() + 1 >= bottom - 1


def _run(samples, build, extra=()):
    @rp.pipeline_def(batch_size=len(samples), num_threads=1, seed=0)
    def pipe():
        data = fn.external_source(source=lambda: samples)
        more = [fn.external_source(source=(lambda v: lambda: v)(values)) for values in extra]
        out = build(data, *more)
        return tuple(out) if isinstance(out, list) else out

    with pipe() as p:
        return p.run()


BAD_ARGUMENTS = [
    ({"angle": 10.0}, "input_shape is required"),
    ({"input_shape": [10, 10]}, "angle is required"),
    ({"angle": 10.0, "input_shape": [10, 10], "mode": "shrink"}, "mode must be one of"),
    ({"angle": 10.0, "input_shape": [10, 10], "bbox_layout": "xyxy"}, "bbox_layout must be"),
    ({"angle": 10.0, "input_shape": [10, 10], "bbox_layout": "yxYX"}, "bbox_layout must be"),
    ({"angle": 10.0, "input_shape": [10, 10], "remove_threshold": 1.5}, r"remove_threshold must be in \[0, 1\]"),
    ({"angle": 10.0, "input_shape": [10, 10], "remove_threshold": -0.1}, r"remove_threshold must be in \[0, 1\]"),
    ({"angle": 10.0, "input_shape": [10, 10], "shape_layout": "HC"}, "shape_layout must name"),
    ({"angle": 10.0, "input_shape": [10], "shape_layout": "HW"}, "fewer extents"),
    ({"angle": 10.0, "input_shape": [10, 10], "keep_size": True, "size": [5, 5]}, "mutually exclusive"),
    ({"angle": 10.0, "input_shape": [10, 10], "size": [5, 5, 5]}, "size must be two extents"),
    ({"angle": "ten", "input_shape": [10, 10]}, "angle must be a number"),
    ({"angle": float("nan"), "input_shape": [10, 10]}, "angle must be finite"),
    ({"angle": 10.0, "input_shape": [10.5, 10]}, "input_shape must be a list of non-negative ints"),
    ({"angle": 10.0, "input_shape": [10, 10], "sizes": [1, 2]}, "unexpected keyword"),
]


@pytest.mark.parametrize("kwargs, message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_bad_arguments_raise_argument_error(kwargs, message):
    with pytest.raises(ArgumentError, match=f"bbox_rotate: .*{message}"):
        _run(BOXES[:1], lambda x: fn.bbox_rotate(x, **kwargs))


def test_keep_size_with_per_sample_size_is_an_argument_error():
    with pytest.raises(ArgumentError, match="bbox_rotate: keep_size and size are mutually exclusive"):
        _run(BOXES[:1], lambda x, z: fn.bbox_rotate(x, angle=5.0, input_shape=[9, 9], keep_size=True, size=z),
             (SIZES[:1],))  # fmt: skip


BAD_SAMPLES = [
    ([np.zeros((2, 4), np.float64)], (), {}, "expects float32 boxes"),
    ([np.zeros((2, 5), np.float32)], (), {}, "expects float32 boxes"),
    ([np.zeros(4, np.float32)], (), {}, "expects float32 boxes"),
    ([np.zeros((2, 4), np.float32)], ([np.zeros(3, np.int32)],), {}, "3 labels for 2 boxes"),
    ([np.zeros((2, 4), np.float32)], ([np.zeros(2, np.int64)],), {}, "labels must be int32"),
    ([np.zeros((2, 4), np.float32)], ([np.zeros((2, 2), np.int32)],), {}, "labels must be int32"),
]


@pytest.mark.parametrize("samples, extra, kwargs, message", BAD_SAMPLES, ids=[c[-1] for c in BAD_SAMPLES])
def test_bad_samples_raise_sample_error(samples, extra, kwargs, message):
    with pytest.raises(SampleError, match=f"bbox_rotate: {message}"):
        _run(samples, lambda x, *lab: fn.bbox_rotate(x, *lab, angle=5.0, input_shape=[9, 9], **kwargs), extra)


BAD_PER_SAMPLE = [
    ("angle", [np.array([1.0, 2.0], np.float32)], "angle must be one number per sample"),
    ("input_shape", [np.array([9.0, 9.0], np.float32)], "input_shape must be integers"),
    ("input_shape", [np.array([9], np.int64)], r"input_shape \[9\] has fewer extents"),
    ("size", [np.array([9, 9, 9], np.int32)], "size must be two extents"),
    ("size", [np.array([9, 9], np.float64)], "size must be int32, int64, uint32 or float32"),
]


@pytest.mark.parametrize("name, values, message", BAD_PER_SAMPLE, ids=[c[-1] for c in BAD_PER_SAMPLE])
def test_bad_per_sample_arguments_raise_sample_error(name, values, message):
    constants = {"angle": 5.0, "input_shape": [9, 9]}
    constants.pop(name, None)
    with pytest.raises(SampleError, match=f"bbox_rotate: {message}"):
        _run(BOXES[:1], lambda x, v: fn.bbox_rotate(x, **constants, **{name: v}), (values,))
