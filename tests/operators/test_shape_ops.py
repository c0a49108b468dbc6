"""shapes, reshape, reinterpret, squeeze, expand_dims: shapes, layouts and values as DALI's, on real decoded
JPEGs of different sizes (a ragged batch) and small arrays; argument inputs per sample; the GPU
stage's batch path on numpy; argument errors before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.shape_ops import Reshape, Shapes, reshaped
from raypipe.sample_contexts import SampleContexts

A = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)

# (id, build(data, fn, types), layout of the input); each runs on the 4 real images (HWC)
IMAGE_CASES = [
    ("shapes", lambda x, fn, types: fn.shapes(x)),
    ("shapes-int32", lambda x, fn, types: fn.shapes(x, dtype=types.INT32)),
    ("shapes-float", lambda x, fn, types: fn.shapes(x, dtype=types.FLOAT)),
    ("flatten", lambda x, fn, types: fn.reshape(x, shape=[-1])),
    ("rel_shape", lambda x, fn, types: fn.reshape(x, rel_shape=[1, -1])),
    ("rel_shape-src_dims", lambda x, fn, types: fn.reshape(x, rel_shape=[1, 1, 1], src_dims=[2, 0, 1])),
    ("src_dims", lambda x, fn, types: fn.reshape(fn.reshape(x, layout=""), src_dims=[-1, 0, 1, 2])),
    ("relayout", lambda x, fn, types: fn.reshape(x, layout="YXC")),
    ("channel-planes", lambda x, fn, types: fn.reshape(x, rel_shape=[1, 1, 1, 1], src_dims=[0, 1, -1, 2])),
    ("expand", lambda x, fn, types: fn.expand_dims(x, axes=[0, 3], new_axis_names="FN")),
    ("expand-unnamed", lambda x, fn, types: fn.expand_dims(x, axes=[1])),
    ("squeeze-axes", lambda x, fn, types: fn.squeeze(fn.expand_dims(x, axes=[0, 3], new_axis_names="FN"), axes=[3])),
    (
        "squeeze-names",
        lambda x, fn, types: fn.squeeze(fn.expand_dims(x, axes=[0], new_axis_names="F"), axis_names="F"),
    ),
    ("cast_like", lambda x, fn, types: fn.cast_like(x, fn.cast(x, dtype=types.INT16))),
    ("reinterpret-uint16", lambda x, fn, types: fn.reinterpret(fn.pad(x, axes=[2], shape=[4]), dtype=types.UINT16)),
    ("reinterpret-int32", lambda x, fn, types: fn.reinterpret(fn.pad(x, axes=[2], shape=[4]), dtype=types.INT32)),
    ("reinterpret-flat", lambda x, fn, types: fn.reinterpret(x, dtype=types.INT8, shape=[-1])),
    ("reinterpret-layout", lambda x, fn, types: fn.reinterpret(x, layout="XYZ")),
    ("reinterpret-src_dims", lambda x, fn, types: fn.reinterpret(x, src_dims=[1, 0, 2])),
    ("reinterpret-rel_shape", lambda x, fn, types: fn.reinterpret(x, dtype=types.INT8, rel_shape=[1, 1, 1])),
]

#: ``reinterpret`` of small arrays whose bytes divide evenly, against DALI
REINTERPRET = [np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.arange(8, dtype=np.uint8).reshape(1, 2, 4)]
REINTERPRET_CASES = [
    ("int32", lambda x, fn, types: fn.reinterpret(x, dtype=types.INT32)),
    ("float32-flat", lambda x, fn, types: fn.reinterpret(x, dtype=types.FLOAT, shape=[-1])),
    ("uint16-two-rows", lambda x, fn, types: fn.reinterpret(x, dtype=types.UINT16, shape=[2, -1])),
    ("back-to-uint8", lambda x, fn, types: fn.reinterpret(fn.reinterpret(x, dtype=types.INT32), dtype=types.UINT8)),
]


def _check_equal(theirs, mine):
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape
            np.testing.assert_array_equal(my, their)


@pytest.mark.parametrize("case, build", IMAGE_CASES, ids=[c[0] for c in IMAGE_CASES])
def test_against_dali_on_real_images(ours, dali, images, case, build):
    _check_equal(dali(images, build, "HWC"), ours(images, lambda x: build(x, fn, types), "HWC"))


def _restore(x, fn, types):
    """Each image flattened, then given back its own shape per sample: as an argument input and as
    the second input."""
    flat = fn.reshape(x, shape=[-1])
    dims = fn.shapes(x, dtype=types.INT32)
    planes = fn.expand_dims(x, axes=[0])
    return fn.reshape(flat, shape=dims), fn.reshape(flat, dims), fn.squeeze(planes, axes=[0])


def test_argument_inputs_against_dali(ours, dali, images):
    mine = ours(images, lambda x: _restore(x, fn, types), "HWC")
    _check_equal(dali(images, _restore, "HWC"), mine)
    for samples, _ in mine:
        for got, image in zip(samples, images, strict=True):
            np.testing.assert_array_equal(got, image)


def test_reference_values_without_dali(ours):
    """Explicit expected results, also where DALI is not installed."""
    small = [A, A[:1].copy()]
    (shapes,), (flat,), (rel,), (expanded,), (squeezed,), (like,) = (
        ours(small, lambda x: fn.shapes(x)),
        ours(small, lambda x: fn.reshape(x, shape=[-1, 4]), "HWC"),
        ours(small, lambda x: fn.reshape(x, rel_shape=[0.5, -1])),
        ours(small, lambda x: fn.expand_dims(x, axes=[0, 2], new_axis_names="FN"), "HWC"),
        ours([A[:, :1].copy()], lambda x: fn.squeeze(x, axis_names="W"), "HWC"),
        ours(small, lambda x: fn.cast_like(x, fn.cast(x, dtype=types.FLOAT))),
    )
    assert [s.tolist() for s in shapes[0]] == [[2, 3, 4], [1, 3, 4]] and shapes[0][0].dtype == np.int64
    assert flat[1] == "" and [s.shape for s in flat[0]] == [(6, 4), (3, 4)]
    np.testing.assert_array_equal(flat[0][0], np.arange(24, dtype=np.uint8).reshape(6, 4))
    assert [s.shape for s in rel[0]] == [(1, 24), (1, 12)]  # 0.5 * 1 rounds half up to 1
    assert expanded[1] == "FHNWC" and [s.shape for s in expanded[0]] == [(1, 2, 1, 3, 4), (1, 1, 1, 3, 4)]
    assert squeezed[1] == "HC" and squeezed[0][0].shape == (2, 4)
    np.testing.assert_array_equal(squeezed[0][0], A[:, 0])
    assert like[0][0].dtype == np.float32 and like[0][0].tolist() == A.astype(np.float32).tolist()


def test_argument_inputs_per_sample(ours, images):
    """Without DALI: each sample's own shape as ``shape`` (argument input and second input)."""
    (by_arg, layout), (by_input, _), (squeezed, _) = ours(images, lambda x: _restore(x, fn, types), "HWC")
    assert layout == ""  # the rank comes from data: no layout kept, as DALI's at build time
    for outputs in (by_arg, by_input, squeezed):
        for got, image in zip(outputs, images, strict=True):
            np.testing.assert_array_equal(got, image)


def test_reshaped_rules():
    assert reshaped("reshape", (480, 640, 3), (240, -1), None, None) == (240, 3840)
    assert reshaped("reshape", (480, 640, 3), None, (0.5, -1), None) == (240, 3840)
    assert reshaped("reshape", (300, 200, 1), None, None, (-1, 1, 0)) == (1, 200, 300)
    assert reshaped("reshape", (300, 200, 1), None, (-1, 0.5, 2), (-1, 1, 0)) == (1, 100, 600)
    assert reshaped("reshape", (5, 4), None, (0.7, -1), None) == (4, 5)  # 3.5 rounds half up
    with pytest.raises(ValueError, match=r"cannot be reshaped to \(5, 4\)"):
        reshaped("reshape", (2, 3, 4), (5, 4), None, None)
    with pytest.raises(ValueError, match="src_dims"):
        reshaped("reshape", (2, 3), None, None, (0, 2))


def test_batch_paths_on_numpy():
    """The GPU stage's calls with numpy: shapes as one array, reshape sample by sample."""
    batch = [A, A[:1].copy()]
    ctxs = SampleContexts(0, 0, np.arange(2))
    shapes = Shapes("gpu", 0, dtype=types.INT32).run_batch(np, [batch], {}, ctxs)
    assert shapes.dtype == np.int32 and shapes.tolist() == [[2, 3, 4], [1, 3, 4]]
    flat = Reshape("gpu", 1, shape=[-1]).run_batch(np, [batch], {}, ctxs)
    assert [f.shape for f in flat] == [(24,), (12,)]
    stacked = np.stack([A, A])
    assert [f.shape for f in Reshape("gpu", 2, rel_shape=[1, -1]).run_batch(np, [stacked], {}, ctxs)] == [(2, 12)] * 2


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gpu_device_gives_the_host_results(ours, images, device):
    def build(x):
        x = x.gpu() if device == "gpu" else x
        return (
            fn.shapes(x, device=device),
            fn.squeeze(fn.expand_dims(x, axes=[0], new_axis_names="F", device=device), axes=[0], device=device),
        )

    (shapes, _), (same, layout) = ours(images, build, "HWC")
    assert [s.tolist() for s in shapes] == [list(i.shape) for i in images]
    assert layout == "HWC"
    for got, image in zip(same, images, strict=True):
        np.testing.assert_array_equal(got, image)


@pytest.mark.parametrize(
    "op, kwargs, match",
    [
        ("shapes", {"dtype": types.UINT8}, "dtype must be one of"),
        ("shapes", {"dtype": types.INT32, "type": types.INT64}, "dtype and its deprecated alias type"),
        ("reshape", {"shape": [2, -1], "rel_shape": [1, 1]}, "shape and rel_shape are mutually exclusive"),
        ("reshape", {"shape": [-1, -1]}, "one negative extent"),
        ("reshape", {"shape": [0, 4]}, "an extent of 0"),
        ("reshape", {"shape": [2, 3.5]}, "shape must be an int or a list of ints"),
        ("reshape", {"shape": [6, 4], "layout": "ABC"}, "does not match the 2-D output"),
        ("squeeze", {}, "exactly one of axes and axis_names"),
        ("squeeze", {"axes": [0], "axis_names": "H"}, "exactly one of axes and axis_names"),
        ("squeeze", {"axes": [-1]}, "non-negative"),
        ("squeeze", {"axis_names": "Q"}, "names axes not in the input layout 'HWC'"),
        ("expand_dims", {}, "axes is required"),
        ("expand_dims", {"axes": [-1]}, "distinct non-negative"),
        ("expand_dims", {"axes": [0, 1], "new_axis_names": "A"}, "must name each of the 2 axes"),
    ],
)
def test_argument_errors_before_anything_runs(jpeg_files, op, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return getattr(fn, op)(fn.decoders.image(jpegs), **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"{op}: .*{match}"):
        pipe().build()


def test_volume_mismatch_names_the_sample(ours):
    with pytest.raises(rp.SampleError, match=r"sample 1 .*cannot be reshaped to \(3, 8\)"):
        ours([A, A[:1].copy()], lambda x: fn.reshape(x, shape=[3, 8]))


@pytest.mark.parametrize(("case", "build"), REINTERPRET_CASES, ids=[c[0] for c in REINTERPRET_CASES])
def test_reinterpret_against_dali(ours, dali, case, build):
    mine = ours(REINTERPRET, lambda x: build(x, fn, types), layout="HWC")
    _check_equal(dali(REINTERPRET, build, layout="HWC"), mine)


def test_reinterpret_views_the_bytes_as_another_type(ours):
    ((ints, layout),) = ours(REINTERPRET, lambda x: fn.reinterpret(x, dtype=types.INT32), layout="HWC")
    assert layout == "HWC" and ints[0].shape == (2, 3, 1) and ints[1].shape == (1, 2, 1)
    assert ints[0].ravel().tolist() == np.frombuffer(REINTERPRET[0].tobytes(), np.int32).tolist()
    ((flat, layout),) = ours(REINTERPRET, lambda x: fn.reinterpret(x, dtype=types.UINT16, shape=[-1]), layout="HWC")
    assert layout == "" and [f.shape for f in flat] == [(12,), (4,)] and flat[1].dtype == np.uint16


def test_reinterpret_errors_name_the_sample(ours):
    with pytest.raises(
        rp.errors.SampleError,
        match="innermost extent of a uint8 sample of shape .* is 4 bytes, not a multiple of float64",
    ) as failed:
        ours(REINTERPRET, lambda x: fn.reinterpret(x, dtype=types.FLOAT64))
    assert "sample 0" in str(failed.value)
    with pytest.raises(
        rp.errors.SampleError, match=r"reinterpret: samples of shape \(1, 2, 1\) cannot be reshaped to \(6,\)"
    ):
        ours(REINTERPRET, lambda x: fn.reinterpret(x, dtype=types.INT32, shape=[6]))
