"""color_space_conversion: every pair of RGB, BGR, GRAY and YCbCr against DALI 2.4's CPU operator
on real decoded JPEGs (cpu and gpu devices), and against the BT.601 formulas without DALI.

Tolerance: a difference of 1 on at most 0.5% of the values, as both compute in float32 but DALI
with its own rounded constants, so a result within ~1e-4 of a rounding tie may round the other way.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.operators.color_space import ColorSpaceConversion
from raypipe.sample_contexts import SampleContexts

SPACES = ["RGB", "BGR", "GRAY", "YCbCr"]
PAIRS = [(a, b) for a, b in itertools.product(SPACES, SPACES) if a != b]


def assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype == np.uint8 and got.shape == expected.shape
    diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= 5e-3 * diff.size


def _inputs(images, space):
    return [np.ascontiguousarray(i[:, :, :1]) for i in images] if space == "GRAY" else images


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("source, target", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_against_dali(ours, dali, images, source, target, device):
    samples = _inputs(images, source)

    def build(x, fn, types, device):
        return fn.color_space_conversion(
            x, image_type=getattr(types, source), output_type=getattr(types, target), device=device
        )

    ((theirs, their_layout),) = dali(samples, lambda x, fn, types: build(x, fn, types, "cpu"), "HWC")
    ((mine, my_layout),) = ours(samples, lambda x: build(x.gpu() if device == "gpu" else x, fn, types, device), "HWC")
    assert my_layout == their_layout == "HWC"
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their)


def _u8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_bt601_formulas(ours, images, device):
    def build(x):
        x = x.gpu() if device == "gpu" else x
        ycbcr = fn.color_space_conversion(x, image_type=types.RGB, output_type=types.YCbCr, device=device)
        return (
            fn.color_space_conversion(x, image_type=types.RGB, output_type=types.GRAY, device=device),
            fn.color_space_conversion(x, image_type=types.RGB, output_type=types.BGR, device=device),
            ycbcr,
            fn.color_space_conversion(ycbcr, image_type=types.YCbCr, output_type=types.RGB, device=device),
        )

    (gray, layout), (bgr, _), (ycbcr, _), (back, _) = ours(images, build, "HWC")
    assert layout == "HWC"
    for i, image in enumerate(images):
        r, g, b = (image[..., k].astype(np.float64) for k in range(3))
        assert_close(gray[i], _u8(0.299 * r + 0.587 * g + 0.114 * b)[..., None])
        np.testing.assert_array_equal(bgr[i], image[..., ::-1])
        y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
        cb = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
        cr = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
        assert_close(ycbcr[i], _u8(np.stack([y, cb, cr], axis=-1)))
        assert np.abs(back[i].astype(np.int32) - image).max() <= 2  # two roundings to uint8


def test_refusals(ours, images):
    with pytest.raises(ArgumentError, match="nothing to convert"):
        ours(images, lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.RGB))
    with pytest.raises(ArgumentError, match="output_type must be"):
        ours(images, lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type="HSV"))
    with pytest.raises(Exception, match="takes uint8 images"):
        floats = [i.astype(np.float32) for i in images]
        ours(floats, lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.GRAY))


def test_a_batch_array_is_converted_at_once_as_each_sample_alone():
    batch = np.random.default_rng(4).integers(0, 256, (4, 7, 9, 3), dtype=np.uint8)
    ctxs = SampleContexts(0, 0, np.arange(4))
    op = ColorSpaceConversion("gpu", 0, image_type=types.BGR, output_type=types.YCbCr)
    together = op.run_batch(np, [batch], {}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == batch.shape
    for i in range(4):
        np.testing.assert_array_equal(together[i], op.run_sample([batch[i]], {}, ctxs[i]))
