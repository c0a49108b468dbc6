"""``segmentation.select_masks`` against DALI 2.4's CPU operator where installed (DALI's documented
examples, masks in any order, reindexing, vertices of any width, no mask selected), every polygon of
a mask with several (DALI 2.4 keeps only the last), and errors naming the sample."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import SampleError

#: ten vertices (x, y) = (10 k, 10 k + 1), and DALI's documented polygons: masks 0, 1, 2
VERTICES = np.array([[10 * k, 10 * k + 1] for k in range(10)], np.float32)
POLYGONS = np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10]], np.int32)
CASES = [
    ("one mask, ids kept", [1], POLYGONS, VERTICES, {}),
    ("two masks out of order, reindexed", [2, 0], POLYGONS, VERTICES, {"reindex_masks": True}),
    ("two masks out of order", [2, 0], POLYGONS, VERTICES, {}),
    ("polygons out of order", [0, 1], np.array([[1, 5, 8], [0, 0, 3]], np.int32), VERTICES, {"reindex_masks": True}),
    ("three coordinates per vertex", [0], POLYGONS[:1], np.arange(12, dtype=np.float32).reshape(4, 3), {}),
    ("no mask", [], POLYGONS, VERTICES, {}),
    ("a negative id", [-1], np.array([[-1, 0, 3]], np.int32), VERTICES, {}),
]


@pytest.mark.parametrize(("name", "ids", "polygons", "vertices", "args"), CASES, ids=[c[0] for c in CASES])
def test_select_masks_matches_dali(ours, dali, name, ids, polygons, vertices, args):
    inputs = [np.array(ids, np.int32)], [[polygons], [vertices]]
    mine = ours(inputs[0], lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v, **args)), per_sample=inputs[1])
    theirs = dali(
        inputs[0], lambda i, f, t, p, v: tuple(f.segmentation.select_masks(i, p, v, **args)), per_sample=inputs[1]
    )
    for (a, a_layout), (b, b_layout) in zip(mine, theirs, strict=True):
        assert a_layout == b_layout == ""
        assert a[0].dtype == b[0].dtype and a[0].shape == b[0].shape
        np.testing.assert_array_equal(a[0], b[0])


def test_the_documented_examples(ours):
    """DALI's two documented examples, checked where DALI is absent too."""
    inputs = [[POLYGONS], [VERTICES]]
    (polygons, _), (vertices, _) = ours(
        [np.array([1], np.int32)], lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v)), per_sample=inputs
    )
    assert polygons[0].tolist() == [[1, 0, 4]] and vertices[0].tolist() == VERTICES[3:7].tolist()
    (polygons, _), (vertices, _) = ours(
        [np.array([2, 0], np.int32)],
        lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v, reindex_masks=True)),
        per_sample=inputs,
    )
    assert polygons[0].tolist() == [[0, 0, 3], [1, 3, 6]]
    assert vertices[0].tolist() == VERTICES[7:10].tolist() + VERTICES[0:3].tolist()


def test_every_polygon_of_a_mask_is_kept(ours):
    """A mask of two polygons keeps both, in their order (DALI 2.4 keeps only the last)."""
    polygons = np.array([[0, 0, 3], [1, 3, 6], [0, 6, 9], [1, 9, 10]], np.int32)
    (out, _), (vertices, _) = ours(
        [np.array([1, 0], np.int32)],
        lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v, reindex_masks=True)),
        per_sample=[[polygons], [VERTICES]],
    )
    assert out[0].tolist() == [[0, 0, 3], [0, 3, 4], [1, 4, 7], [1, 7, 10]]
    assert vertices[0].tolist() == VERTICES[[3, 4, 5, 9, 0, 1, 2, 6, 7, 8]].tolist()


@pytest.mark.parametrize(
    ("ids", "polygons", "message"),
    [
        ([5], POLYGONS, r"mask id 5 is in no polygon of the sample \(ids \[0, 1, 2\]\)"),
        ([1, 1], POLYGONS, r"mask_ids repeats \[1\]"),
        ([0], np.array([[0, 2, 1]], np.int32), r"mask 0's polygon \[2, 1\) is outside the sample's 10 vertices"),
        ([0], np.array([[0, 8, 12]], np.int32), r"polygon \[8, 12\) is outside"),
        ([0], np.array([0, 0, 3], np.int32), "polygons must be integer rows"),
    ],
)
def test_bad_samples_fail_naming_the_sample(ours, ids, polygons, message):
    with pytest.raises(SampleError, match=message) as failed:
        ours(
            [np.array(ids, np.int32)],
            lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v)),
            per_sample=[[polygons], [VERTICES]],
        )
    assert "sample 0" in str(failed.value)
