"""``random_crop_generator``: windows inside their shapes, of the asked area and aspect ratio, keyed
by sample (the same for any thread count), of DALI 2.4's types and shapes (where installed), and
fed to ``slice``; bad arguments and shapes fail naming them."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

SHAPES = [np.array([100, 200, 3], np.int64), np.array([50, 40], np.int64), np.array([300, 300, 1], np.int64)]


def _windows(threads: int = 1, batches: int = 20, **args) -> list[tuple[list[int], list[int], list[int]]]:
    @rp.pipeline_def(batch_size=3, num_threads=threads, device_id=None, seed=5)
    def pipe():
        anchor, shape = fn.random_crop_generator(fn.external_source(lambda: list(SHAPES)), **args)
        return anchor, shape

    out = []
    with pipe() as p:
        for _ in range(batches):
            anchors, shapes = p.run()
            for k, given in enumerate(SHAPES):
                out.append((np.asarray(anchors.at(k)).tolist(), np.asarray(shapes.at(k)).tolist(), given.tolist()))
    return out


def test_windows_lie_inside_and_follow_the_ranges():
    windows = _windows(random_area=[0.2, 0.6], random_aspect_ratio=[0.5, 2.0])
    fractions = []
    for (y, x), (h, w), (height, width, *_) in windows:
        assert 0 <= y and 0 <= x and 0 < h and 0 < w and y + h <= height and x + w <= width
        fractions.append(h * w / (height * width))
        assert 0.5 - 0.1 <= w / h <= 2.0 + 0.1 or (h, w) == (height, width), "the ratio asked for (rounding aside)"
    assert 0.15 < min(fractions) and max(fractions) < 0.7, "the area asked for (rounding aside)"
    assert abs(np.mean(fractions) - 0.4) < 0.05
    assert windows == _windows(threads=3, random_area=[0.2, 0.6], random_aspect_ratio=[0.5, 2.0])


def test_types_match_dali_and_the_window_slices(ours, dali):
    images = [np.zeros((100, 200, 3), np.uint8), np.zeros((50, 40, 3), np.uint8)]

    def build(x, f, t):
        anchor, shape = f.random_crop_generator(f.shapes(x))
        return anchor, shape, f.slice(x, anchor, shape, axes=[0, 1])

    mine = ours(images, lambda x: build(x, fn, None), layout="HWC")
    for anchor, shape, crop in zip(mine[0][0], mine[1][0], mine[2][0], strict=True):
        assert anchor.dtype == shape.dtype == np.int32 and anchor.shape == shape.shape == (2,)
        assert crop.shape == (*shape.tolist(), 3)
    theirs = dali(images, build, layout="HWC")
    assert [(a.dtype, a.shape) for a in theirs[0][0]] == [(a.dtype, a.shape) for a in mine[0][0]]
    assert theirs[0][1] == mine[0][1] == "" and theirs[2][1] == mine[2][1] == "HWC"


def test_bad_arguments_and_shapes_fail(ours):
    for args, message in (
        ({"random_area": [0.5, 1.5]}, "random_area must lie in"),
        ({"num_attempts": 0}, "num_attempts"),
    ):
        pipe = rp.pipeline_def(
            lambda a=args: fn.random_crop_generator(fn.zeros(shape=[2]), **a)[0], batch_size=1, device_id=None
        )()
        with pytest.raises(ArgumentError, match=f"random_crop_generator: {message}"):
            pipe.build()
    with pytest.raises(
        SampleError, match=r"the input must be a shape \(HW or HWC\) of positive ints, got \[0, 5\]"
    ) as failed:
        ours([np.array([0, 5], np.int64)], lambda x: fn.random_crop_generator(x)[0])
    assert "sample 0" in str(failed.value)
