"""cast: float to int rounds to nearest (ties to even) and saturates; int to narrower int saturates.

All comparisons are exact: the expected values are computed with numpy's own rounding
and clipping in float64, and every input here is exactly representable.
"""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.cast import Cast, saturate_cast


def run(files, device, build):
    """Decode 4 JPEGs, apply ``build(images)`` and return (output samples, decoded images) on the host."""

    @rp.pipeline_def(batch_size=4, num_threads=2, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=files[:4])
        images = fn.decoders.image(jpegs)
        return build(images), images

    with pipe() as p:
        out, images = p.run()
    out = out.as_cpu()
    return [out.at(i) for i in range(len(out))], [images.at(i) for i in range(len(images))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", [types.FLOAT, types.INT16, np.float64, "int32"])
def test_widening_keeps_values(jpeg_files, device, dtype):
    outs, images = run(jpeg_files, device, lambda images: fn.cast(images, device=device, dtype=dtype))
    for got, image in zip(outs, images, strict=True):
        assert got.dtype == types.to_numpy_dtype(dtype)
        np.testing.assert_array_equal(got, image)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_uint8_to_int8_saturates(jpeg_files, device):
    outs, images = run(jpeg_files, device, lambda images: fn.cast(images, device=device, dtype=types.INT8))
    for got, image in zip(outs, images, strict=True):
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, np.minimum(image, 127).astype(np.int8))
        assert got.max() == 127 and image.max() > 127


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_float_to_uint8_rounds_and_saturates(jpeg_files, device):
    """1.25 * x - 40 is exact in float32, has fractions .0/.25/.5/.75 (ties at .5) and
    spans [-40, 278.75], so both rounding and saturation at either end are exercised."""

    def build(images):
        scaled = fn.crop_mirror_normalize(images, scale=1.25, shift=-40.0, output_layout="HWC")
        return fn.cast(scaled, device=device, dtype=types.UINT8)

    outs, images = run(jpeg_files, device, build)
    for got, image in zip(outs, images, strict=True):
        expected = np.clip(np.rint(image.astype(np.float64) * 1.25 - 40.0), 0, 255).astype(np.uint8)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, expected)
        assert got.min() == 0 and got.max() == 255


def test_to_bool_is_nonzero(jpeg_files):
    outs, images = run(jpeg_files, "cpu", lambda images: fn.cast(images, dtype=types.BOOL))
    for got, image in zip(outs, images, strict=True):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, image != 0)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.uint8, [0, 0, 0, 0, 2, 2, 254, 255, 255]),
        (np.int8, [-128, -2, 0, 0, 2, 2, 127, 127, 127]),
        (np.int32, [-(2**31), -2, 0, 0, 2, 2, 254, 256, 2**31 - 1]),
        (np.int64, [-(2**63), -2, 0, 0, 2, 2, 254, 256, 2**63 - 1]),
        (np.uint64, [0, 0, 0, 0, 2, 2, 254, 256, 2**64 - 1]),
    ],
)
@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
def test_saturate_cast_edges(src, dtype, expected):
    """Ties go to even; out-of-range values clamp to the exact type limits, even where the
    float type cannot represent the limit (float32(2**31 - 1) rounds to 2**31). float16
    stores 254.4 as 254.375 and 255.5 exactly, so the expected values are the same."""
    values = np.array([-np.inf, -2.5, -0.5, 0.5, 1.5, 2.5, 254.4, 255.5, np.inf], dtype=src)
    got = saturate_cast(np, values, np.dtype(dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.array(expected, dtype=dtype))
    scalars = [saturate_cast(np, np.array(value), np.dtype(dtype)) for value in values]  # 0-d samples
    assert [s.dtype for s in scalars] == [np.dtype(dtype)] * len(values) and all(s.shape == () for s in scalars)
    np.testing.assert_array_equal(scalars, np.array(expected, dtype=dtype))


@pytest.mark.parametrize(
    "batch",
    [
        [np.array([v], np.int64) for v in (3, -(2**40), 2**40, 0)],  # one shape: one call for the chunk
        [np.array([v], np.float32) for v in (2.5, -3.5, 1e10, -1e10)],
        [np.array([1.5], np.float64), np.array([[2.5, 3e9]]), np.zeros((0,)), np.array([7.0], np.float32)],
    ],
    ids=["int64 labels", "float32 labels", "mixed shapes and types"],
)
def test_a_chunk_converts_as_its_samples_would_one_by_one(batch):
    """The CPU stage of a pipeline whose decode is deferred to the GPU runs a node for a chunk at a
    time (``run_chunk``), as it does the readers' labels."""
    got = Cast("cpu", 0, dtype=types.INT32).run_chunk([batch], {}, [None] * len(batch))
    expected = [saturate_cast(np, x, np.dtype(np.int32)) for x in batch]
    assert len(got) == len(batch)
    for g, e in zip(got, expected):
        assert g.dtype == np.int32 and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    got[0][...] = 99  # each sample its own values, even as rows of one converted chunk
    assert not any(np.any(g == 99) for g in got[1:])


def test_saturate_cast_overwrite_reuses_the_buffer():
    values = np.array([1.4, 300.0, -3.0], dtype=np.float32)
    got = saturate_cast(np, values, np.dtype(np.uint8), overwrite=True)
    np.testing.assert_array_equal(got, [1, 255, 0])
    np.testing.assert_array_equal(values, [1.0, 255.0, 0.0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "dtype is required"),
        ({"dtype": "no-such-type"}, "dtype must be a types"),
        ({"dtype": np.complex64}, "dtype must be a numeric or bool type"),
        ({"dtype": types.FLOAT, "mode": "wrap"}, "unexpected keyword argument 'mode'"),
    ],
)
def test_argument_errors(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.cast(fn.decoders.image(jpegs), **kwargs)

    with pipe() as p:
        with pytest.raises(rp.ArgumentError, match=f"cast: .*{match}"):
            p.build()
