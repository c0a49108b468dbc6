"""``multi_paste`` against DALI 2.4's CPU operator where installed: pastes from other samples of
the batch (``in_ids``) and from several inputs, absolute and relative anchors, region shapes,
per-sample canvas sizes, a type change, a 2x2 mosaic of real JPEGs; the ``gpu`` device gives the
``cpu`` results; a region outside its source or canvas fails naming the sample."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from tests.operators.outputs import assert_same

RNG = np.random.default_rng(0)
SMALL = [RNG.integers(1, 255, (4, 5, 1)).astype(np.uint8), RNG.integers(1, 255, (3, 6, 1)).astype(np.uint8)]


def ints(*rows) -> list[np.ndarray]:
    return [np.array(r, np.int32) for r in rows]


def floats(*rows) -> list[np.ndarray]:
    return [np.array(r, np.float32) for r in rows]


#: (id, arguments as a batch each (per sample), static arguments)
CASES = [
    ("in_ids", {"in_ids": ints([1, 0], [0])}, {"output_size": [5, 6]}),
    (
        "shapes and output anchors",
        {
            "in_ids": ints([1, 0], [0]),
            "shapes": ints([[2, 2], [1, 3]], [[3, 3]]),
            "out_anchors": ints([[0, 0], [2, 2]], [[1, 1]]),
        },
        {"output_size": [6, 6]},
    ),
    (
        "input anchors",
        {"in_ids": ints([1], [0]), "in_anchors": ints([[1, 1]], [[2, 2]]), "shapes": ints([[2, 2]], [[2, 3]])},
        {"output_size": [4, 4]},
    ),
    (
        "relative anchors, truncated",
        {
            "in_ids": ints([1], [0]),
            "in_anchors_rel": floats([[0.5, 0.5]], [[0.25, 0.2]]),
            "out_anchors_rel": floats([[0.1, 0.1]], [[0.0, 0.0]]),
            "shapes": ints([[2, 2]], [[2, 2]]),
        },
        {"output_size": [5, 5]},
    ),
    ("to float", {"in_ids": ints([1], [0])}, {"output_size": [5, 6], "dtype": "FLOAT"}),
    (
        "the rest of the source",
        {"in_ids": ints([1], [0]), "in_anchors": ints([[2, 5]], [[0, 0]])},
        {"output_size": [5, 6]},
    ),
    ("canvas per sample", {"in_ids": ints([1], [0]), "output_size": ints([3, 7], [5, 5])}, {}),
    (
        "relative shapes, truncated",
        {"in_ids": ints([1, 0], [0]), "shapes_rel": floats([[0.5, 0.5], [0.3, 0.99]], [[0.7, 0.33]])},
        {"output_size": [5, 6]},
    ),
    ("nothing pasted", {"in_ids": [np.zeros(0, np.int32), np.array([0], np.int32)]}, {"output_size": [4, 5]}),
]


def _typed(static: dict, t) -> dict:
    return {k: getattr(t, v) if k == "dtype" else v for k, v in static.items()}


def _build(names: list[str], static: dict, device: str = "cpu"):
    def build(x, f, t, *batches):
        data = x.gpu() if device == "gpu" else x
        return f.multi_paste(data, **dict(zip(names, batches, strict=True)), **_typed(static, t))

    return build


@pytest.mark.parametrize(("name", "per_sample", "static"), CASES, ids=[c[0] for c in CASES])
def test_multi_paste_matches_dali(ours, dali, name, per_sample, static):
    names, batches = list(per_sample), list(per_sample.values())
    build = _build(names, static)
    mine = ours(SMALL, lambda x, *b: build(x, fn, types, *b), layout="HWC", per_sample=batches)
    gpu = _build(names, static, "gpu")
    assert_same(ours(SMALL, lambda x, *b: gpu(x, fn, types, *b), layout="HWC", per_sample=batches), mine, layout="HWC")
    assert_same(mine, dali(SMALL, build, layout="HWC", per_sample=batches), layout="HWC")


def test_pastes_from_several_inputs_match_dali(ours, dali):
    """Without in_ids, paste k of output i is sample i of input k; later pastes cover earlier ones."""
    shapes, anchors = ints([[2, 2], [2, 2]], [[1, 1], [1, 1]]), ints([[0, 0], [1, 1]], [[0, 0], [0, 1]])

    def build(x, f, t, s, a):
        return f.multi_paste(x, f.flip(x, horizontal=1), output_size=[5, 6], shapes=s, out_anchors=a)

    mine = ours(SMALL, lambda x, s, a: build(x, fn, types, s, a), layout="HWC", per_sample=[shapes, anchors])
    flipped = SMALL[0][:, ::-1, 0]
    assert mine[0][0][0][1:3, 1:3, 0].tolist() == flipped[:2, :2].tolist(), "the second paste covers the first"
    assert_same(mine, dali(SMALL, build, layout="HWC", per_sample=[shapes, anchors]), layout="HWC")


def test_a_mosaic_of_four_real_images_matches_dali(ours, dali, images):
    """YOLO's mosaic: each output is a 2x2 grid of four crops of the batch's images."""
    ids = ints([0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 2, 2], [2, 3, 0, 1])
    quarter = [[40, 50]] * 4
    shapes = ints(*[quarter] * 4)
    anchors = ints(*[[[0, 0], [0, 50], [40, 0], [40, 50]]] * 4)

    def build(x, f, t, i, s, a):
        return f.multi_paste(x, in_ids=i, shapes=s, out_anchors=a, output_size=[80, 100])

    mine = ours(
        images, lambda x, i, s, a: build(x, fn, types, i, s, a), layout="HWC", per_sample=[ids, shapes, anchors]
    )
    assert mine[0][0][1][:40, :50].tolist() == images[3][:40, :50].tolist()
    assert_same(mine, dali(images, build, layout="HWC", per_sample=[ids, shapes, anchors]), layout="HWC")


@pytest.mark.parametrize(
    ("per_sample", "static", "message"),
    [
        (
            {"in_ids": ints([1], [0]), "out_anchors": ints([[3, 3]], [[0, 0]])},
            {"output_size": [4, 4]},
            r"sample 0: paste 0 puts \[3, 6\] at \[3, 3\] of a \[4, 4\] canvas",
        ),
        (
            {"in_ids": ints([1], [0]), "in_anchors": ints([[2, 5]], [[0, 0]]), "shapes": ints([[2, 2]], [[1, 1]])},
            {"output_size": [4, 4]},
            r"sample 0: paste 0 takes \[2, 2\] from \[2, 5\] of a \[3, 6\] source",
        ),
        ({"in_ids": ints([2], [0])}, {"output_size": [5, 6]}, r"sample 0: in_ids \[2\] outside the batch of 2"),
        ({"in_ids": ints([1], [0])}, {}, "without output_size every input sample must have one shape"),
        (
            {"in_ids": ints([1], [0]), "shapes": ints([[1, 1], [1, 1]], [[1, 1]])},
            {"output_size": [5, 6]},
            "sample 0: shapes has 2 rows for 1 pastes",
        ),
    ],
)
def test_bad_pastes_fail_naming_the_sample(ours, per_sample, static, message):
    build = _build(list(per_sample), static)
    with pytest.raises(rp.errors.SampleError, match=message):
        ours(SMALL, lambda x, *b: build(x, fn, types, *b), layout="HWC", per_sample=list(per_sample.values()))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: fn.multi_paste(x, x, in_ids=[0]), "with in_ids it takes exactly one input, got 2"),
        (
            lambda x: fn.multi_paste(x, in_ids=[0], in_anchors=[0, 0], in_anchors_rel=[0.5, 0.5]),
            "in_anchors and in_anchors_rel exclude",
        ),
        (lambda x: fn.multi_paste(x, in_ids=[0], output_size=[1, 2, 3, 4]), "output_size must be"),
        (
            lambda x: fn.multi_paste(x, in_ids=[0], shapes=[1, 1], shapes_rel=[0.5, 0.5]),
            "shapes and shapes_rel exclude",
        ),
        (lambda x: fn.multi_paste(x, in_ids=[0], shapes=[1, 2, 3]), r"shapes must hold \(height, width\) pairs"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(build, message):
    pipe = rp.pipeline_def(lambda: build(fn.zeros(shape=[2, 2, 1])), batch_size=1, device_id=None)()
    with pytest.raises(ArgumentError, match=f"multi_paste: {message}"):
        pipe.build()
