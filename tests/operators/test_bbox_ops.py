"""The detection operators: bb_flip, box_encoder, paste, bbox_paste, coord_transform and coord_flip
equal DALI 2.4's outputs exactly (the same float32 arithmetic); random_bbox_crop's windows obey
the constraints they were drawn under, keep the right boxes and labels, and feed
decoders.image_slice as DALI's do."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops
from raypipe.operators.bbox_layout import ious, read_boxes

RNG = np.random.default_rng(7)


def _ltrb(count: int, rng: np.random.Generator = RNG) -> np.ndarray:
    lo = rng.uniform(0, 0.7, (count, 2))
    return np.concatenate([lo, lo + rng.uniform(0.02, 0.3, (count, 2))], axis=1).astype(np.float32)


def _anchors() -> list[float]:
    """SSD-like default boxes on three grids, clipped to the image, the first two repeated (ties)."""
    anchors = []
    for size in (0.1, 0.2, 0.35):
        for cy in np.arange(size / 2, 1, size):
            for cx in np.arange(size / 2, 1, size):
                anchors.append([cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2])
    flat = np.clip(np.array(anchors, np.float32), 0, 1).reshape(-1)
    return np.concatenate([flat, flat[:8]]).tolist()


BOXES = [_ltrb(n) for n in (5, 1, 0, 7)]
LABELS = [RNG.integers(1, 5, len(b)).astype(np.int32) for b in BOXES]
POINTS = [RNG.uniform(-3, 3, (6, 3)).astype(np.float32) for _ in range(4)]
IMAGES = [RNG.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((31, 47), (20, 20), (17, 53), (8, 9))]
ANCHORS = _anchors()

# (name, samples, layout, build(data, fn, *extra), per-sample extra batches)
DETERMINISTIC = [
    ("bb_flip", BOXES, lambda x, f, *e: f.bb_flip(x), ()),
    ("bb_flip ltrb both", BOXES, lambda x, f, *e: f.bb_flip(x, ltrb=True, horizontal=1, vertical=1), ()),
    ("bb_flip none", BOXES, lambda x, f, *e: f.bb_flip(x, horizontal=0), ()),
    ("bb_flip per sample", BOXES, lambda x, f, h, v: f.bb_flip(x, horizontal=h, vertical=v),
     ([np.int32(k % 2) for k in range(4)], [np.int32(k // 2) for k in range(4)])),
    ("box_encoder", BOXES, lambda x, f, lab: f.box_encoder(x, lab, anchors=ANCHORS), (LABELS,)),
    ("box_encoder criteria", BOXES, lambda x, f, lab: f.box_encoder(x, lab, anchors=ANCHORS, criteria=0.3), (LABELS,)),
    ("box_encoder offset", BOXES, lambda x, f, lab: f.box_encoder(
        x, lab, anchors=ANCHORS, offset=True, means=[0.1, 0.0, 0.2, 0.0], stds=[0.1, 0.1, 0.2, 0.2], scale=300.0),
     (LABELS,)),
    ("paste", IMAGES, lambda x, f, *e: f.paste(x, ratio=2.3, paste_x=0.27, paste_y=0.81, fill_value=(7, 8, 9)), ()),
    ("paste min_canvas_size", IMAGES,
     lambda x, f, *e: f.paste(x, ratio=1.5, min_canvas_size=60.0, fill_value=(1, 2, 3)),
     ()),
    ("paste per sample", IMAGES, lambda x, f, r, px: f.paste(x, ratio=r, paste_x=px, fill_value=(0, 0, 0)),
     ([np.float32(1 + k / 2) for k in range(4)], [np.float32(k / 3) for k in range(4)])),
    ("bbox_paste", BOXES, lambda x, f, *e: f.bbox_paste(x, ratio=2.3, paste_x=0.27, paste_y=0.81), ()),
    ("bbox_paste ltrb", BOXES, lambda x, f, *e: f.bbox_paste(x, ratio=1.7, ltrb=True, paste_x=0.6), ()),
    ("coord_transform M T", POINTS, lambda x, f, *e: f.coord_transform(x, M=[0.5, 1.25, -2.0, 0.1, 0.3, 0.7],
                                                                        T=[1.5, -0.25]), ()),
    ("coord_transform MT", POINTS, lambda x, f, *e: f.coord_transform(
        x, MT=[0.5, 1.25, -2.0, 3.0, 0.1, 0.3, 0.7, -1.0, 1, 1, 1, 1]), ()),
    ("coord_transform scalars", POINTS, lambda x, f, *e: f.coord_transform(x, M=0.5, T=2.0), ()),
    ("coord_flip", POINTS, lambda x, f, *e: f.coord_flip(x), ()),
    ("coord_flip layout", POINTS, lambda x, f, *e: f.coord_flip(x, layout="xzy", flip_y=1, flip_z=1, center_z=0.1), ()),
]  # fmt: skip


@pytest.mark.parametrize("name, samples, build, extra", DETERMINISTIC, ids=[c[0] for c in DETERMINISTIC])
def test_deterministic_operators_equal_dali(ours, dali, name, samples, build, extra):
    layout = "HWC" if samples is IMAGES else ""

    def with_types(data, f, types, *e):
        out = build(data, f, *e)
        return tuple(out) if isinstance(out, list) else out  # DALI returns several outputs as a list

    theirs = dali(samples, with_types, layout=layout, per_sample=extra)
    mine = ours(samples, lambda data, *e: build(data, fn, *e), layout=layout, per_sample=extra)
    assert len(mine) == len(theirs)
    for (got, got_layout), (want, want_layout) in zip(mine, theirs):
        assert got_layout == want_layout
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_box_encoder_matches_every_box_to_its_best_anchor(ours):
    boxes = [_ltrb(6, np.random.default_rng(k)) for k in range(4)]
    labels = [np.arange(1, 7, dtype=np.int32) for _ in boxes]
    encoded, classes = ours(
        boxes, lambda x, lab: fn.box_encoder(x, lab, anchors=ANCHORS, criteria=0.99), per_sample=[labels]
    )
    anchors = np.asarray(ANCHORS, np.float32).reshape(-1, 4)
    for b, enc, cls in zip(boxes, encoded[0], classes[0]):
        overlap = ious(b[:, :2], b[:, 2:], anchors[:, :2], anchors[:, 2:])
        best = len(anchors) - 1 - np.argmax(overlap[:, ::-1], axis=1)
        assert set(np.nonzero(cls)[0]) <= set(best.tolist())  # criteria 0.99: only forced matches
        for k in range(len(b)):  # a box's best anchor holds it (unless a later box took the anchor)
            owner = cls[best[k]] - 1
            np.testing.assert_array_equal(enc[best[k], 2:], b[owner, 2:] - b[owner, :2])


def _crop(boxes, labels, batch_args=(), seed=0, **args):
    """random_bbox_crop of ``boxes`` with ``labels``: the per-output lists of samples."""

    @rp.pipeline_def(batch_size=len(boxes), num_threads=1, seed=seed)
    def pipe():
        b = fn.external_source(source=lambda: boxes)
        lab = fn.external_source(source=lambda: labels)
        extra = {name: fn.external_source(source=(lambda v: lambda: v)(values)) for name, values in batch_args}
        return tuple(fn.random_bbox_crop(b, lab, output_bbox_indices=True, **args, **extra))

    with pipe() as p:
        return [[np.asarray(o.at(i)) for i in range(len(boxes))] for o in p.run()]


def _check_boxes(boxes, labels, anchor, shape, out, out_labels, indices, prune=None):
    """The kept boxes are the input boxes at ``indices`` cut to the window and made relative to it;
    labels follow them; the kept ones are those whose centre is inside (or enough area with prune)."""
    lo, hi = anchor, anchor + shape
    centers = (boxes[:, :2] + boxes[:, 2:]) / 2
    if prune is None:
        inside = np.nonzero(((centers >= lo - 1e-6) & (centers <= hi + 1e-6)).all(axis=1))[0]
    else:
        cut = np.clip(np.minimum(boxes[:, 2:], hi) - np.maximum(boxes[:, :2], lo), 0, None).prod(axis=1)
        inside = np.nonzero((cut > 0) & (cut / (boxes[:, 2:] - boxes[:, :2]).prod(axis=1) >= prune - 1e-6))[0]
    assert indices.tolist() == inside.tolist()
    np.testing.assert_array_equal(out_labels, labels[indices])
    expected = np.clip((boxes[indices].reshape(-1, 2, 2) - lo) / shape, 0, 1).reshape(-1, 4)
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("threshold, all_boxes", [(0.0, True), (0.5, True), (0.3, False), (0.7, False)])
def test_random_bbox_crop_windows_obey_the_threshold_they_were_drawn_under(threshold, all_boxes):
    """With one threshold and no "no crop", every window has an IoU of at least the threshold with
    every box (``all_boxes_above_threshold``: a single box per sample), or with some box."""
    rng = np.random.default_rng(11)
    boxes = []
    for _ in range(24):
        lo = rng.uniform(0, 0.4, (1 if all_boxes else int(rng.integers(1, 4)), 2))  # boxes of 0.3 to 0.6
        boxes.append(np.concatenate([lo, lo + rng.uniform(0.3, 0.6, lo.shape)], axis=1).astype(np.float32))
    labels = [rng.integers(0, 9, len(b)).astype(np.int32) for b in boxes]
    args = {"thresholds": [threshold], "aspect_ratio": [0.5, 2.0], "scaling": [0.3, 1.0], "allow_no_crop": False}
    anchors, shapes, out, out_labels, indices = _crop(
        boxes, labels, num_attempts=50, all_boxes_above_threshold=all_boxes, **args
    )
    for k, b in enumerate(boxes):
        anchor, shape = anchors[k], shapes[k]
        assert anchor.dtype == shape.dtype == out[k].dtype == np.float32 and out_labels[k].dtype == np.int32
        assert (anchor >= 0).all() and (anchor + shape <= 1 + 1e-6).all()  # inside the image
        assert 0.3 - 1e-6 <= shape.min() and shape.max() <= 1.0
        assert 0.5 - 1e-6 <= shape[0] / shape[1] <= 2.0 + 1e-6
        overlap = ious(anchor[None], (anchor + shape)[None], b[:, :2], b[:, 2:])
        assert (overlap.min() if all_boxes else overlap.max()) >= threshold
        assert len(indices[k]) >= 1
        _check_boxes(b, labels[k], anchor, shape, out[k], out_labels[k], indices[k])


def test_random_bbox_crop_no_crop_prune_and_layouts():
    rng = np.random.default_rng(5)
    boxes = [_ltrb(4, rng) for _ in range(16)]
    labels = [np.arange(4, dtype=np.int32) for _ in boxes]
    anchors, shapes, out, _, indices = _crop(boxes, labels, thresholds=[0.9], allow_no_crop=True, num_attempts=1)
    no_crop = [k for k in range(16) if shapes[k].tolist() == [1.0, 1.0]]
    assert no_crop and all(indices[k].tolist() == [0, 1, 2, 3] for k in no_crop)
    for k in no_crop:
        np.testing.assert_array_equal(out[k], boxes[k])
    pruned = _crop(boxes, labels, thresholds=[0.0], scaling=[0.3, 0.6], aspect_ratio=[0.5, 2.0], allow_no_crop=False,
                   bbox_prune_threshold=0.4)  # fmt: skip
    for k in range(16):
        _check_boxes(boxes[k], labels[k], *(o[k] for o in pruned), prune=0.4)
    xywh = [np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1) for b in boxes]
    same = _crop(xywh, labels, thresholds=[0.0], scaling=[0.3, 0.6], aspect_ratio=[0.5, 2.0], bbox_layout="xyWH")
    plain = _crop(boxes, labels, thresholds=[0.0], scaling=[0.3, 0.6], aspect_ratio=[0.5, 2.0])
    for k in range(16):
        np.testing.assert_array_equal(same[0][k], plain[0][k])  # the same draws: the same window
        lo, hi = read_boxes(same[2][k], "xyWH")
        np.testing.assert_allclose(np.concatenate([lo, hi], axis=1), plain[2][k], atol=1e-6)


def test_random_bbox_crop_fixed_crop_shape_and_3d_boxes():
    rng = np.random.default_rng(9)
    boxes = [_ltrb(3, rng) for _ in range(8)]
    labels = [np.arange(3, dtype=np.int32) for _ in boxes]
    sizes = [np.array([100 + 10 * k, 80], np.int32) for k in range(8)]
    anchors, shapes, *_ = _crop(boxes, labels, batch_args=[("input_shape", sizes)], crop_shape=[50, 40],
                                thresholds=[0.0])  # fmt: skip
    for k in range(8):
        assert shapes[k].tolist() == [50.0, 40.0] and (anchors[k] == np.round(anchors[k])).all()
        assert 0 <= anchors[k][0] <= sizes[k][0] - 50 and 0 <= anchors[k][1] <= 40
    lo = rng.uniform(0, 0.5, (8, 2, 3))
    cubes = [np.concatenate([c, c + 0.3], axis=1).astype(np.float32) for c in lo]
    anchors, shapes, out, _, _ = _crop(cubes, [np.arange(2, dtype=np.int32)] * 8, thresholds=[0.0],
                                       scaling=[0.5, 1.0], aspect_ratio=[0.5, 2.0] * 3)  # fmt: skip
    assert all(a.shape == (3,) and s.shape == (3,) and o.shape[1] == 6 for a, s, o in zip(anchors, shapes, out))


def test_random_bbox_crop_window_larger_than_the_input_reaches_outside_it():
    """As DALI's (EfficientDet pads such windows afterwards): the anchor is drawn between
    ``input - crop`` (negative) and 0, and the boxes are made relative to the window."""
    rng = np.random.default_rng(3)
    boxes = [np.array([[0.2, 0.3, 0.6, 0.7]], np.float32) for _ in range(8)]
    labels = [np.array([4], np.int32)] * 8
    sizes = [np.array([28, 41], np.int32)] * 8
    anchors, shapes, out, out_labels, indices = _crop(
        boxes,
        labels,
        batch_args=[("input_shape", sizes)],
        crop_shape=[64, 64],
        thresholds=[0.0],
        seed=int(rng.integers(99)),
    )
    assert len({tuple(a) for a in anchors}) > 1
    for k in range(8):
        assert shapes[k].tolist() == [64.0, 64.0]
        assert -36 <= anchors[k][0] <= 0 and -23 <= anchors[k][1] <= 0 and (anchors[k] == np.round(anchors[k])).all()
        full = sizes[k].astype(np.float32)
        _check_boxes(boxes[k], labels[k], anchors[k] / full, shapes[k] / full, out[k], out_labels[k], indices[k])


def test_random_bbox_crop_is_keyed_per_sample():
    boxes = [_ltrb(3, np.random.default_rng(k)) for k in range(8)]
    labels = [np.arange(3, dtype=np.int32) for _ in boxes]
    args = {"thresholds": [0.0, 0.3], "scaling": [0.3, 1.0], "aspect_ratio": [0.5, 2.0], "seed": 4}
    first, again = _crop(boxes, labels, **args), _crop(boxes, labels, **args)
    for a, b in zip(first, again):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    other = _crop(boxes, labels, **{**args, "seed": 5})
    assert any(not np.array_equal(x, y) for x, y in zip(first[0], other[0]))


def test_random_bbox_crop_gives_the_best_window_after_total_num_attempts():
    boxes = [np.array([[0.0, 0.0, 0.05, 0.05], [0.95, 0.95, 1.0, 1.0]], np.float32)]
    with pytest.warns(UserWarning, match="could not find a valid cropping window"):
        anchors, shapes, *_ = _crop(boxes, [np.arange(2, dtype=np.int32)], thresholds=[0.9], allow_no_crop=False,
                                    scaling=[0.3, 1.0], total_num_attempts=5)  # fmt: skip
    assert shapes[0].shape == (2,)


def test_image_slice_takes_the_crop_as_dali_does(jpeg_files, dali):
    """decoders.image_slice cuts the window random_bbox_crop gives; DALI's decoder cuts the same pixels."""
    jpegs = [np.fromfile(p, dtype=np.uint8) for p in jpeg_files[:4]]
    boxes = [_ltrb(3, np.random.default_rng(k)) for k in range(4)]

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: jpegs)
        b = fn.external_source(source=lambda: boxes)
        anchor, shape, _ = fn.random_bbox_crop(b, thresholds=[0.1], scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0])
        return fn.decoders.image_slice(data, anchor, shape), anchor, shape

    with pipe() as p:
        images, anchors, shapes = ([np.asarray(o.at(i)) for i in range(4)] for o in p.run())
    theirs = dali(jpegs, lambda data, f, t, a, s: f.decoders.image_slice(data, a, s), per_sample=[anchors, shapes])
    for mine, want in zip(images, theirs[0][0]):
        np.testing.assert_array_equal(mine, want)


def test_ops_class_names_are_dalis():
    names = {"RandomBBoxCrop": "random_bbox_crop", "BbFlip": "bb_flip", "BoxEncoder": "box_encoder",
             "Paste": "paste", "BBoxPaste": "bbox_paste", "CoordTransform": "coord_transform",
             "CoordFlip": "coord_flip"}  # fmt: skip
    for cls, op in names.items():
        assert getattr(ops, cls).op_name == op


def test_ssd_random_crop_cuts_the_image_and_keeps_boxes_whose_centre_is_inside(ours):
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 255, (60 + 7 * k, 80, 3), dtype=np.uint8) for k in range(12)]
    boxes = [_ltrb(3, rng) for _ in images]
    labels = [np.array([5, 6, 7], np.int32) for _ in images]
    (cropped, _), (kept, _), (kept_labels, _) = ours(
        images, lambda x, b, lab: fn.ssd_random_crop(x, b, lab, num_attempts=3), per_sample=[boxes, labels]
    )
    cut = 0
    for image, crop, b, out, lab in zip(images, cropped, boxes, kept, kept_labels):
        assert crop.dtype == np.uint8 and crop.shape[2] == 3 and out.dtype == np.float32 and lab.dtype == np.int32
        assert len(out) == len(lab) >= 1 and set(lab.tolist()) <= {5, 6, 7}
        assert (out >= 0).all() and (out <= 1).all()
        if crop.shape == image.shape and np.array_equal(out, b):
            continue  # the "no crop" option
        cut += 1
        assert crop.shape[0] >= 0.3 * image.shape[0] - 1 and crop.shape[1] >= 0.3 * image.shape[1] - 1
    assert cut


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_deterministic_operators_follow_their_formulas(ours, device):
    """What each deterministic operator computes, by its formula (the DALI comparison above needs DALI);
    on ``device="gpu"`` too (the host stands in without a GPU)."""
    outs = ours(
        BOXES,
        lambda b, p, img: (
            fn.bb_flip(b, device=device, horizontal=0, vertical=1),
            fn.bbox_paste(b, device=device, ratio=2.0, paste_x=0.25, paste_y=1.0),
            fn.coord_transform(p, device=device, M=[1.0, 2.0, 0.0, 0.0, 0.0, -1.0], T=[0.5, 0.25]),
            fn.coord_flip(p, device=device, flip_x=0, flip_z=1, center_z=2.0),
            fn.paste(img, device=device, ratio=1.5, paste_x=1.0, paste_y=0.0, fill_value=(9, 8, 7)),
        ),
        per_sample=[POINTS, IMAGES],
    )
    flipped, pasted, transformed, mirrored, canvases = (o[0] for o in outs)
    for k, boxes in enumerate(BOXES):
        x, y, w, h = boxes.T
        np.testing.assert_allclose(flipped[k], np.stack([x, 1 - (y + h), w, h], axis=1).reshape(-1, 4), atol=1e-6)
        shifted = np.stack([x / 2 + 0.125, y / 2 + 0.5, w / 2, h / 2], axis=1).reshape(-1, 4)
        np.testing.assert_allclose(pasted[k], shifted, atol=1e-6)
        p = POINTS[k]
        np.testing.assert_allclose(
            transformed[k], np.stack([p[:, 0] + 2 * p[:, 1] + 0.5, 0.25 - p[:, 2]], 1), atol=1e-5
        )
        np.testing.assert_allclose(mirrored[k], np.stack([p[:, 0], p[:, 1], 4.0 - p[:, 2]], 1), atol=1e-5)
        image, canvas = IMAGES[k], canvases[k]
        height, width = image.shape[:2]
        assert canvas.shape == (int(height * 1.5), int(width * 1.5), 3)
        left = canvas.shape[1] - width
        np.testing.assert_array_equal(canvas[:height, left:], image)
        canvas[:height, left:] = (9, 8, 7)
        assert (canvas == np.array([9, 8, 7], np.uint8)).all()
