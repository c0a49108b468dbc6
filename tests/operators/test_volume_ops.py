"""Operators on volumes (``DHWC`` and ``CDHW``) against DALI 2.4's CPU build where installed:
``crop`` (``crop_d``), ``slice``, ``flip`` (``depthwise``), ``gaussian_blur``, ``resize`` (3-D
sizes, per sample too), ``transpose`` and ``reshape`` exactly or within stated tolerances;
``roi_random_crop`` and ``segmentation.random_object_bbox`` exactly where their result is
determined, within their ranges where it is drawn; connected components against a flood fill."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.connected_components import label_components

RNG = np.random.default_rng(7)
DHWC = [RNG.integers(0, 255, (6, 10, 12, 2)).astype(np.uint8), RNG.integers(0, 255, (8, 9, 11, 2)).astype(np.uint8)]
CDHW = [np.ascontiguousarray(v.transpose(3, 0, 1, 2)).astype(np.float32) for v in DHWC]


def _both(ours, dali, samples, build, layout, per_sample=()):
    mine = ours(samples, lambda data, *extra: build(fn, types, data, *extra), layout=layout, per_sample=per_sample)
    theirs = dali(samples, lambda data, f, t, *extra: build(f, t, data, *extra), layout=layout, per_sample=per_sample)
    return mine, theirs


def _assert_equal(mine, theirs, atol=0.0, mean=None):
    assert len(mine) == len(theirs)
    for (ours_out, our_layout), (dali_out, dali_layout) in zip(mine, theirs):
        assert our_layout == dali_layout
        for a, b in zip(ours_out, dali_out, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            assert diff.max() <= atol
            if mean is not None:
                assert diff.mean() <= mean


OPS = {
    "crop_d": lambda f, t, x: f.crop(x, crop_d=4, crop_h=5, crop_w=6, crop_pos_z=0.3, crop_pos_y=0.8, crop_pos_x=0.1),
    "crop_pad": lambda f, t, x: f.crop(x, crop=(9, 5, 13), out_of_bounds_policy="pad"),
    "slice": lambda f, t, x: f.slice(x, start=[1, 2, 3], shape=[3, 4, 5], axis_names="DHW"),
    "slice_pad": lambda f, t, x: f.slice(
        x, rel_start=[-0.2, 0.5], rel_shape=[1.0, 0.8], axis_names="DW", out_of_bounds_policy="pad"
    ),
    "flip": lambda f, t, x: f.flip(x, horizontal=1, vertical=1, depthwise=1),
    "flip_depth": lambda f, t, x: f.flip(x, horizontal=0, depthwise=1),
    "blur": lambda f, t, x: f.gaussian_blur(x, sigma=1.2),
    "blur_axes": lambda f, t, x: f.gaussian_blur(x, sigma=[0.7, 1.0, 1.5], window_size=[3, 5, 7]),
    "transpose": lambda f, t, x: f.transpose(x, perm=[1, 0, 2, 3]),
    "reshape": lambda f, t, x: f.reshape(x, layout="ABCD"),
    "resize_nn": lambda f, t, x: f.resize(x, size=[5, 13, 7], interp_type=t.INTERP_NN),
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("layout", ["DHWC", "CDHW"])
def test_volume_operators_match_dali(ours, dali, name, layout):
    samples = DHWC if layout == "DHWC" else CDHW
    mine, theirs = _both(ours, dali, samples, lambda f, t, x: OPS[name](f, t, x), layout)
    # blurring float32 sums in another order: within float32 rounding; uint8: DALI rounds the same
    _assert_equal(mine, theirs, atol=1e-3 if name.startswith("blur") and layout == "CDHW" else 0)


SIZINGS = [
    {"resize_z": 5},
    {"resize_z": 5, "resize_x": 20},
    {"size": [5, 0, 20]},
    {"size": [5, 30, 20], "mode": "not_larger"},
    {"size": [5, 30, 20], "mode": "not_smaller"},
    {"size": [5, 0, 20], "mode": "stretch"},
]


@pytest.mark.parametrize("sizing", SIZINGS, ids=range(len(SIZINGS)))
def test_volume_sizes_from_scales_match_dali(ours, dali, sizing):
    """Sizes computed from scales are DALI's; so is the window a rounded size samples (centred,
    at the scale): each axis's nearest source indices (read off volumes holding their coordinate)
    equal DALI's but where a sample centre falls on a boundary within float32 rounding, one index
    apart."""
    shape = (1, 8, 9, 11)
    coordinates = []
    for axis in (1, 2, 3):
        along = np.arange(shape[axis], dtype=np.uint8).reshape([-1 if i == axis else 1 for i in range(4)])
        coordinates.append(np.ascontiguousarray(np.broadcast_to(along, shape)))
    mine, theirs = _both(
        ours, dali, coordinates, lambda f, t, x: f.resize(x, interp_type=t.INTERP_NN, **sizing), "CDHW"
    )
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        diff = np.abs(a.astype(int) - b.astype(int))
        assert diff.max() <= 1 and (diff == 0).mean() >= 0.9


def test_per_sample_resize_of_volumes_matches_dali(ours, dali):
    sizes = [np.array([12.0, 5.0, 20.0], np.float32), np.array([3.0, 18.0, 11.0], np.float32)]
    mine, theirs = _both(
        ours, dali, CDHW, lambda f, t, x, s: f.resize(x, size=s, interp_type=t.INTERP_NN), "CDHW", per_sample=[sizes]
    )
    _assert_equal(mine, theirs)
    assert mine[0][0][0].shape == (2, 12, 5, 20)


def test_linear_and_cubic_volume_resize_are_close_to_dali(ours, dali):
    """Upscaling linearly is DALI's interpolation; downscaling (antialiased) and cubic use Pillow's
    filters, whose windows differ slightly from DALI's: on smooth data (a range of 150) within 3,
    0.5 on average."""
    grid = np.meshgrid(*(np.linspace(0, 1, n) for n in (9, 10, 12)), indexing="ij")
    smooth = [(100 * grid[0] * grid[1] + 50 * np.sin(3 * grid[2])).astype(np.float32)[None]]
    mine, theirs = _both(ours, dali, smooth, lambda f, t, x: f.resize(x, size=[18, 20, 24]), "CDHW")
    _assert_equal(mine, theirs, atol=1e-3)
    for interp in ("INTERP_LINEAR", "INTERP_CUBIC"):
        for size in ([5, 20, 7], [18, 6, 24]):
            build = lambda f, t, x, s=size, i=interp: f.resize(x, size=s, interp_type=getattr(t, i))  # noqa: E731
            mine, theirs = _both(ours, dali, smooth, build, "CDHW")
            _assert_equal(mine, theirs, atol=3.0, mean=0.5)


def _flood_fill(labels: np.ndarray, background: int) -> list[tuple[int, int, tuple, tuple]]:
    """(class, size, start, end) of each face-connected component, in order of first element."""
    seen = np.zeros(labels.shape, bool)
    found = []
    for index in zip(*np.nonzero(labels != background)):
        if seen[index]:
            continue
        value, queue, cells = labels[index], deque([index]), []
        seen[index] = True
        while queue:
            cell = queue.popleft()
            cells.append(cell)
            for axis in range(labels.ndim):
                for step in (-1, 1):
                    near = list(cell)
                    near[axis] += step
                    near = tuple(near)
                    if 0 <= near[axis] < labels.shape[axis] and not seen[near] and labels[near] == value:
                        seen[near] = True
                        queue.append(near)
        cells = np.array(cells)
        found.append((int(value), len(cells), tuple(cells.min(0)), tuple(cells.max(0) + 1)))
    return found


def test_connected_components_equal_a_flood_fill():
    labels = (np.random.default_rng(3).random((7, 9, 8)) * 4).astype(np.uint8) * (
        np.random.default_rng(4).random((7, 9, 8)) > 0.4
    )
    got = label_components(labels)
    want = _flood_fill(labels, 0)
    assert len(got.sizes) == len(want)
    for k, (cls, size, start, end) in enumerate(want):
        assert (got.classes[k], got.sizes[k], tuple(got.starts[k]), tuple(got.ends[k])) == (cls, size, start, end)


MASK = np.zeros((5, 6, 8), np.int32)
MASK[0, 0, 0] = MASK[1, 1, 1] = 1
MASK[2:4, 3:5, 2:7] = 2
MASK[4, 5, 7] = 1
EMPTY = np.zeros((5, 6, 8), np.int32)

DETERMINED = {
    "background_only": lambda f, x: f.segmentation.random_object_bbox(x, format="box", foreground_prob=0.0),
    "threshold": lambda f, x: f.segmentation.random_object_bbox(x, threshold=[2, 2, 2], output_class=True),
    "largest": lambda f, x: f.segmentation.random_object_bbox(x, format="start_end", ignore_class=True, k_largest=1),
    "absent_class": lambda f, x: f.segmentation.random_object_bbox(x, format="box", classes=[5], output_class=True),
    "roi_crop": lambda f, x: f.roi_random_crop(x, roi_start=[2, 3, 2], roi_end=[4, 5, 7], crop_shape=[5, 2, 5]),
}


@pytest.mark.parametrize("name", sorted(DETERMINED))
def test_determined_picks_match_dali(ours, dali, name):
    mine, theirs = _both(ours, dali, [MASK, EMPTY], lambda f, t, x: _outputs(DETERMINED[name](f, x)), "")
    _assert_equal(mine, theirs)


def _outputs(out):
    """An operator's outputs as a tuple (DALI returns a list where there are several)."""
    return tuple(out) if isinstance(out, list) else out


def test_drawn_boxes_are_objects_and_crops_hold_them(ours):
    def build(data):
        start, end, cls = fn.segmentation.random_object_bbox(data, format="start_end", output_class=True)
        anchor = fn.roi_random_crop(data, roi_start=start, roi_end=end, crop_shape=[3, 3, 3])
        return start, end, cls, anchor

    objects = {(c, s, e) for c, _, s, e in _flood_fill(MASK, 0)}
    picked = set()
    for seed in range(12):
        (starts, _), (ends, _), (classes, _), (anchors, _) = ours([MASK, MASK], build, seed=seed)
        for start, end, cls, anchor in zip(starts, ends, classes, anchors):
            assert start.dtype == np.int32 and cls.dtype == np.int32 and anchor.dtype == np.int64
            box = (int(cls), tuple(start.tolist()), tuple(end.tolist()))
            assert box in objects
            picked.add(box)
            lo = np.maximum(np.where(3 >= end - start, end - 3, start), 0)
            hi = np.minimum(np.where(3 >= end - start, start, end - 3), np.array(MASK.shape) - 3)
            assert (lo <= anchor).all() and (anchor <= hi).all()
    assert len(picked) >= 3, "several objects of both classes are drawn"


def test_random_mask_pixel_picks_foreground(ours):
    ((pixels, _),) = ours([MASK] * 4, lambda data: fn.segmentation.random_mask_pixel(data, foreground=1), seed=1)
    for pixel in pixels:
        assert pixel.dtype == np.int64 and MASK[tuple(pixel)] > 0
