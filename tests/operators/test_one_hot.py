"""one_hot: classes along a new axis, as DALI's: scalar labels, vectors, axes, layouts, dtypes and
C-cast on/off values; the GPU stage's batch path; errors."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.one_hot import OneHot
from raypipe.sample_contexts import SampleContexts

LABELS = [np.array([2], np.int32), np.array([7], np.int32), np.array([0], np.int32)]
VECTORS = [np.array([[1, 2], [3, -1]], np.int64), np.array([[0, 1]], np.int64)]

CASES = [
    ("scalar", LABELS, "", lambda x, fn, types: fn.one_hot(x, num_classes=5)),
    ("scalar-named", LABELS, "", lambda x, fn, types: fn.one_hot(x, num_classes=5, axis_name="C")),
    ("explicit-last-axis", LABELS, "", lambda x, fn, types: fn.one_hot(x, num_classes=5, axis=-1)),
    ("vectors-first", VECTORS, "AB", lambda x, fn, types: fn.one_hot(x, num_classes=4, axis=0, axis_name="K")),
    ("vectors-middle", VECTORS, "AB", lambda x, fn, types: fn.one_hot(x, num_classes=4, axis=1)),
    ("vectors-last-named", VECTORS, "AB", lambda x, fn, types: fn.one_hot(x, num_classes=3, axis_name="K")),
    (
        "uint8-wrapping-values",
        [np.array([1.7, 2.0, -0.5], np.float32)],
        "",
        lambda x, fn, types: fn.one_hot(x, num_classes=4, dtype=types.UINT8, on_value=300, off_value=-2),
    ),
    ("int32", LABELS, "", lambda x, fn, types: fn.one_hot(x, num_classes=3, dtype=types.INT32, on_value=5)),
]


@pytest.mark.parametrize("case, samples, layout, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, case, samples, layout, build):
    theirs = dali(samples, build, layout)
    mine = ours(samples, lambda x: build(x, fn, types), layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype
            np.testing.assert_array_equal(my, their)


def test_reference_values_without_dali(ours):
    ((scalars, layout),) = ours(LABELS, lambda x: fn.one_hot(x, num_classes=4, axis_name="C"))
    assert layout == "C"
    assert [s.tolist() for s in scalars] == [[0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert scalars[0].dtype == np.float32
    ((vectors, layout),) = ours(VECTORS, lambda x: fn.one_hot(x, num_classes=3, axis=0, dtype=types.INT8), "AB")
    assert layout == "" and vectors[1].shape == (3, 1, 2) and vectors[1].dtype == np.int8
    assert vectors[1][:, 0, :].tolist() == [[1, 0], [0, 1], [0, 0]]
    ((wrapped, _),) = ours(
        [np.array([1.7, -3.0], np.float32)], lambda x: fn.one_hot(x, num_classes=3, dtype=types.UINT8, on_value=300)
    )
    assert wrapped[0].tolist() == [[0, 44, 0], [0, 0, 0]]  # 1.7 is class 1; 300 wraps to 44 as a C cast


def test_labels_from_a_reader_on_the_gpu_stage(jpeg_files):
    @rp.pipeline_def(batch_size=4, num_threads=1, seed=0)
    def pipe():
        _, labels = fn.readers.file(files=jpeg_files[:4], labels=[3, 0, 1, 2])
        return fn.one_hot(labels.gpu(), num_classes=4, device="gpu")

    with pipe() as p:
        (out,) = p.run()
    np.testing.assert_array_equal(np.asarray(out.as_cpu()), np.eye(4, dtype=np.float32)[[3, 0, 1, 2]])


def test_batch_array_encodes_in_one_call():
    ctxs = SampleContexts(0, 0, np.arange(3))
    labels = np.array([[2], [0], [1]], np.int32)
    out = OneHot("gpu", 0, num_classes=3).run_batch(np, [labels], {}, ctxs)
    np.testing.assert_array_equal(out, np.eye(3, dtype=np.float32)[[2, 0, 1]])
    vectors = np.array([[0, 1], [2, 2], [1, 0]], np.int32)
    out = OneHot("gpu", 1, num_classes=3, axis=0).run_batch(np, [vectors], {}, ctxs)
    assert out.shape == (3, 3, 2)
    np.testing.assert_array_equal(out[1], np.eye(3, dtype=np.float32)[[2, 2]].T)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_classes": -1}, "num_classes must be a non-negative int"),
        ({"num_classes": 3, "axis": -2}, "axis must be an int of at least -1"),
        ({"num_classes": 3, "axis_name": "AB"}, "axis_name must be one axis letter"),
        ({"num_classes": 3, "dtype": "nope"}, "dtype must be a types"),
        ({"num_classes": 3, "on_value": "x"}, "on_value must be a number"),
    ],
)
def test_argument_errors_before_anything_runs(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        _, labels = fn.readers.file(files=jpeg_files[:1])
        return fn.one_hot(labels, **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"one_hot: .*{match}"):
        pipe().build()


def test_axis_beyond_the_rank_names_the_sample(ours):
    with pytest.raises(rp.SampleError, match=r"sample 0 .*one_hot: axis 3 is out of range"):
        ours([np.array([1, 2], np.int32)], lambda x: fn.one_hot(x, num_classes=3, axis=3))
