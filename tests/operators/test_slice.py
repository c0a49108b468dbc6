"""slice: DALI's windows on real decoded JPEGs of different sizes and on small arrays: named,
relative and positional coordinates, per-sample arguments, default and explicit axes, every
out-of-bounds policy, output types; errors before anything runs, and out-of-bounds samples named."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.slice import Slice, round_half_away
from raypipe.sample_contexts import SampleContexts

HWC = np.arange(5 * 7 * 2, dtype=np.uint8).reshape(5, 7, 2)
CHW = np.arange(2 * 5 * 7, dtype=np.uint8).reshape(2, 5, 7)


def _anchor(fn, types, values, dtype):
    if dtype == "float":
        return fn.constant(fdata=values)
    return fn.constant(idata=values, dtype=types.INT32)


# (id, samples (None: the real images), layout, build(data, fn, types))
CASES = [
    ("start-shape", None, "HWC", lambda x, fn, types: fn.slice(x, start=[10, 20], shape=[100, 50])),
    ("start-end", None, "HWC", lambda x, fn, types: fn.slice(x, start=[3, 5], end=[200, 100])),
    ("start-only", None, "HWC", lambda x, fn, types: fn.slice(x, start=[1, 2])),
    ("rel", None, "HWC", lambda x, fn, types: fn.slice(x, rel_start=[0.1, 0.25], rel_shape=[0.5, 0.3])),
    ("rel-end", None, "HWC", lambda x, fn, types: fn.slice(x, rel_start=[0.1, 0.5], rel_end=[0.5, 0.9])),
    ("rel-mixed", None, "HWC", lambda x, fn, types: fn.slice(x, rel_start=[0.3, 0.3], shape=[33, 17])),
    (
        "positional-normalized",
        None,
        "HWC",
        lambda x, fn, types: fn.slice(
            x, _anchor(fn, types, [0.3, 0.3], "float"), _anchor(fn, types, [0.3, 0.5], "float")
        ),
    ),
    (
        "positional-absolute-floats",
        None,
        "HWC",
        lambda x, fn, types: fn.slice(
            x,
            _anchor(fn, types, [1.6, 1.4], "float"),
            _anchor(fn, types, [20.5, 30.5], "float"),
            normalized_anchor=False,
            normalized_shape=False,
        ),
    ),
    (
        "positional-ints",
        None,
        "HWC",
        lambda x, fn, types: fn.slice(x, _anchor(fn, types, [1, 2], "int"), _anchor(fn, types, [20, 30], "int")),
    ),
    ("axes-0", None, "HWC", lambda x, fn, types: fn.slice(x, start=[10], end=[30], axes=[0])),
    ("axis-names-C", None, "HWC", lambda x, fn, types: fn.slice(x, start=[1], end=[2], axis_names="C")),
    ("chw-default-names", [CHW], "CHW", lambda x, fn, types: fn.slice(x, start=[1, 2], shape=[2, 2])),
    (
        "no-layout-default-axes",
        [CHW.reshape(5, 7, 2)],
        "",
        lambda x, fn, types: fn.slice(x, start=[1, 2], shape=[2, 2]),
    ),
    (
        "pad-per-channel",
        [HWC],
        "HWC",
        lambda x, fn, types: fn.slice(x, start=[5, -1], shape=[4, 4], out_of_bounds_policy="pad", fill_values=[7, 9]),
    ),
    (
        "constant-one-value",
        None,
        "HWC",
        lambda x, fn, types: fn.slice(
            x, start=[-20, 300], shape=[100, 120], out_of_bounds_policy="constant", fill_values=3
        ),
    ),
    (
        "trim",
        None,
        "HWC",
        lambda x, fn, types: fn.slice(x, start=[-10, 300], shape=[600, 500], out_of_bounds_policy="trim_to_shape"),
    ),
    ("edge", [HWC], "HWC", lambda x, fn, types: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="edge")),
    (
        "clamp",
        [HWC],
        "HWC",
        lambda x, fn, types: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="clamp"),
    ),
    (
        "reflect-101",
        [HWC],
        "HWC",
        lambda x, fn, types: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="reflect_101"),
    ),
    (
        "reflect-1001",
        [HWC],
        "HWC",
        lambda x, fn, types: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="reflect_1001"),
    ),
    ("wrap", [HWC], "HWC", lambda x, fn, types: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="wrap")),
    ("dtype-float", None, "HWC", lambda x, fn, types: fn.slice(x, start=[1, 1], shape=[20, 20], dtype=types.FLOAT)),
    ("dtype-float16", None, "HWC", lambda x, fn, types: fn.slice(x, start=[1, 1], shape=[20, 20], dtype=types.FLOAT16)),
]


@pytest.mark.parametrize("case, samples, layout, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, build):
    samples = images if samples is None else samples
    theirs = dali(samples, build, layout)
    mine = ours(samples, lambda x: build(x, fn, types), layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape
            np.testing.assert_array_equal(my, their)


def test_per_sample_arguments_against_dali(ours, dali, images):
    """``start`` from each image's own height and width (sliced out of its shape), a quarter in."""

    def build(x, fn, types):
        height_width = fn.slice(fn.shapes(x, dtype=types.INT32), start=[0], shape=[2], axes=[0])
        return fn.slice(x, start=fn.cast(height_width // 4, dtype=types.INT32), shape=[50, 40])

    theirs = dali(images, build, "HWC")
    mine = ours(images, lambda x: build(x, fn, types), "HWC")
    for their, my, image in zip(theirs[0][0], mine[0][0], images, strict=True):
        np.testing.assert_array_equal(my, their)
        height, width = image.shape[:2]
        np.testing.assert_array_equal(my, image[width // 4 : width // 4 + 40, height // 4 : height // 4 + 50])


def test_reference_values_without_dali(ours, images):
    ((windows, layout),) = ours(images, lambda x: fn.slice(x, start=[2, 3], shape=[10, 20]), "HWC")
    assert layout == "HWC"
    for got, image in zip(windows, images, strict=True):
        np.testing.assert_array_equal(got, image[3:23, 2:12])
    ((padded, _),) = ours(
        [HWC], lambda x: fn.slice(x, start=[5, -1], shape=[4, 4], out_of_bounds_policy="pad", fill_values=[7, 9]), "HWC"
    )
    expected = np.empty((4, 4, 2), np.uint8)
    expected[...] = [7, 9]
    expected[1:4, 0:2] = HWC[0:3, 5:7]
    np.testing.assert_array_equal(padded[0], expected)
    ((rounded, _),) = ours([HWC], lambda x: fn.slice(x, rel_start=[0.1, 0.5], rel_end=[0.5, 0.9]), "HWC")
    np.testing.assert_array_equal(rounded[0], HWC[3:5, 1:4])  # 0.5 * 5 = 2.5 rounds to 3, 4.5 to 5
    ((edges, _),) = ours([HWC], lambda x: fn.slice(x, start=[5, -2], shape=[4, 4], out_of_bounds_policy="edge"), "HWC")
    np.testing.assert_array_equal(edges[0], np.pad(HWC, ((2, 0), (0, 2), (0, 0)), mode="edge")[0:4, 5:9])


def test_per_sample_arguments(ours, images):
    """``start`` per sample from the sample's own shape: the last 10 x 10 pixels of each image."""

    def build(x):
        start = fn.python_function(fn.shapes(x), function=lambda s: np.array([s[1] - 10, s[0] - 10], np.int32))
        return fn.slice(x, start=start, shape=[10, 10])

    ((corners, _),) = ours(images, build, "HWC")
    for got, image in zip(corners, images, strict=True):
        np.testing.assert_array_equal(got, image[-10:, -10:])


def test_out_of_bounds_names_the_sample(ours, images):
    with pytest.raises(rp.SampleError, match=r"sample 0 .*slice: the window from .* is outside the sample's shape"):
        ours(images, lambda x: fn.slice(x, start=[0, 0], shape=[5000, 10]), "HWC")


def test_gpu_stage_names_the_sample_out_of_bounds():
    ctxs = SampleContexts(0, 0, np.array([7, 9]))
    op = Slice("gpu", 0, start=[0, 0], shape=[6, 4], axes=[1, 0])
    ok = op.run_batch(np, [[HWC, HWC]], {}, ctxs)
    assert [o.shape for o in ok] == [(4, 6, 2)] * 2
    with pytest.raises(ValueError, match=r"sample 9: slice: the window"):
        op.run_batch(np, [[HWC, HWC[:3].copy()]], {}, ctxs)


def test_batch_array_is_cut_in_one_call():
    ctxs = SampleContexts(0, 0, np.arange(2))
    batch = np.stack([HWC, HWC + 1])
    out = Slice("gpu", 0, start=[1, 2], shape=[3, 2], axes=[1, 0], dtype=types.FLOAT).run_batch(np, [batch], {}, ctxs)
    assert isinstance(out, np.ndarray) and out.shape == (2, 2, 3, 2) and out.dtype == np.float32
    np.testing.assert_array_equal(out[1], (HWC + 1)[2:4, 1:4])
    padded = Slice("gpu", 1, start=[6, 0], shape=[3, 2], axes=[1, 0], out_of_bounds_policy="pad")
    assert [o.shape for o in padded.run_batch(np, [batch], {}, ctxs)] == [(2, 3, 2)] * 2


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_both_devices_give_the_same(ours, images, device):
    def build(x):
        x = x.gpu() if device == "gpu" else x
        return fn.slice(x, rel_start=[0.2, 0.1], rel_shape=[0.5, 0.5], device=device)

    ((windows, layout),) = ours(images, build, "HWC")
    assert layout == "HWC"
    for got, image in zip(windows, images, strict=True):
        h, w = image.shape[:2]
        y0, x0 = round_half_away(0.1 * h), round_half_away(0.2 * w)
        np.testing.assert_array_equal(got, image[y0 : round_half_away(0.6 * h), x0 : round_half_away(0.7 * w)])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"start": [1, 2], "rel_start": [0.1, 0.1]}, "start and rel_start are mutually exclusive"),
        ({"start": [1, 2], "shape": [1, 1], "end": [3, 3]}, "end, rel_end, shape and rel_shape are mutually exclusive"),
        ({"start": [1, 2], "out_of_bounds_policy": "mirror"}, "out_of_bounds_policy must be one of"),
        ({"start": [1, 2], "dtype": types.INT32}, "dtype must be FLOAT, FLOAT16 or UINT8"),
        ({"start": [1, 2], "dtype": types.FLOAT, "output_dtype": types.FLOAT}, "deprecated alias output_dtype"),
        ({"start": [1.5, 2]}, "start must be an int or a list of ints"),
        ({"start": [1], "axis_names": "Q"}, "names axes not in the input layout"),
        ({"start": [1, 2], "normalized_anchor": 1}, "normalized_anchor must be a bool"),
    ],
)
def test_argument_errors_before_anything_runs(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.slice(fn.decoders.image(jpegs), **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"slice: .*{match}"):
        pipe().build()


def test_deprecated_arguments_keep_dalis_meaning(ours, images):
    ((windows, _),) = ours(
        images, lambda x: fn.slice(x, start=[0, 0], shape=[4, 4], output_dtype=types.FLOAT, image_type=types.RGB), "HWC"
    )
    assert windows[0].dtype == np.float32
    np.testing.assert_array_equal(windows[0], images[0][:4, :4].astype(np.float32))
