"""cat and stack: several inputs joined per sample, as DALI's, on real decoded JPEGs (a ragged
batch) and small arrays; layouts; the GPU stage's batch-array path; errors."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.operators.joining import Cat, Stack
from raypipe.sample_contexts import SampleContexts

CASES = [
    ("cat-axis0", lambda x, fn, types: fn.cat(x, x, axis=0)),
    ("cat-channels", lambda x, fn, types: fn.cat(x, x, x, axis=2)),
    ("cat-negative", lambda x, fn, types: fn.cat(x, x, axis=-2)),
    ("cat-name", lambda x, fn, types: fn.cat(x, x, axis_name="W")),
    ("stack", lambda x, fn, types: fn.stack(x, x)),
    ("stack-last-named", lambda x, fn, types: fn.stack(x, x, axis=3, axis_name="F")),
    ("stack-negative", lambda x, fn, types: fn.stack(x, x, axis=-1)),
    ("stack-middle-named", lambda x, fn, types: fn.stack(x, x, x, axis=1, axis_name="F")),
]


@pytest.mark.parametrize("case, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali_on_real_images(ours, dali, images, case, build):
    theirs = dali(images, build, "HWC")
    mine = ours(images, lambda x: build(x, fn, types), "HWC")
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype
            np.testing.assert_array_equal(my, their)


def test_reference_values_without_dali(ours):
    a = np.array([[1, 2], [3, 4]], np.int32)
    (joined,), (stacked,) = (
        ours([a, a[:1].copy()], lambda x: fn.cat(x, fn.python_function(x, function=lambda s: s * 10), axis=1), "HW"),
        ours([a], lambda x: fn.stack(x, x + 1, axis=2, axis_name="K"), "HW"),
    )
    assert joined[1] == "HW"
    assert joined[0][0].tolist() == [[1, 2, 10, 20], [3, 4, 30, 40]] and joined[0][1].tolist() == [[1, 2, 10, 20]]
    assert stacked[1] == "HWK" and stacked[0][0].tolist() == [[[1, 2], [2, 3]], [[3, 4], [4, 5]]]


def test_class_style_ops_take_several_inputs(ours):
    a = np.array([[1, 2]], np.int32)
    ((joined, layout),) = ours([a], lambda x: ops.Cat(axis_name="W")(x, x * 2, x * 3), "HW")
    assert layout == "HW" and joined[0].tolist() == [[1, 2, 2, 4, 3, 6]] and joined[0].dtype == np.int32


def test_batch_arrays_join_in_one_call():
    a = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    ctxs = SampleContexts(0, 0, np.arange(2))
    cat = Cat("gpu", 0, axis=-1).run_batch(np, [a, a + 1], {}, ctxs)
    assert isinstance(cat, np.ndarray) and cat.shape == (2, 2, 6)
    np.testing.assert_array_equal(cat[1], np.concatenate([a[1], a[1] + 1], axis=-1))
    stack = Stack("gpu", 1, axis=0).run_batch(np, [a, a + 1], {}, ctxs)
    assert stack.shape == (2, 2, 2, 3)
    np.testing.assert_array_equal(stack[0], np.stack([a[0], a[0] + 1]))
    ragged = Cat("gpu", 2, axis=0).run_batch(np, [[a[0], a[1, :1]], [a[0], a[1, :1]]], {}, ctxs)
    assert [r.shape for r in ragged] == [(4, 3), (2, 3)]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_both_devices_give_the_same(ours, images, device):
    def build(x):
        x = x.gpu() if device == "gpu" else x
        return fn.cat(x, x, axis=1, device=device), fn.stack(x, x, device=device, axis_name="F")

    (joined, layout), (stacked, stacked_layout) = ours(images, build, "HWC")
    assert layout == "HWC" and stacked_layout == "FHWC"
    for got, pair, image in zip(joined, stacked, images, strict=True):
        np.testing.assert_array_equal(got, np.concatenate([image, image], axis=1))
        np.testing.assert_array_equal(pair, np.stack([image, image]))


def test_mismatched_inputs_name_the_sample(ours):
    a = np.zeros((2, 3), np.uint8)
    with pytest.raises(rp.SampleError, match="sample 0 .*cat: input shapes must agree except along axis 0"):
        ours([a], lambda x: fn.cat(x, fn.reshape(x, shape=[3, 2]), axis=0))
    with pytest.raises(rp.SampleError, match="stack: all inputs must have the same type and rank"):
        ours([a], lambda x: fn.stack(x, fn.cast(x, dtype=types.INT8)))


@pytest.mark.parametrize(
    "op, kwargs, match",
    [
        ("cat", {"axis": 1, "axis_name": "W"}, "axis and axis_name cannot be used together"),
        ("cat", {"axis_name": "Q"}, "axis_name 'Q' is not an axis of the layout 'HWC'"),
        ("cat", {"axis": 1.5}, "axis must be an int"),
        ("stack", {"axis_name": "FF"}, "axis_name must be one axis letter"),
    ],
)
def test_argument_errors_before_anything_runs(jpeg_files, op, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        images = fn.decoders.image(jpegs)
        return getattr(fn, op)(images, images, **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"{op}: .*{match}"):
        pipe().build()
