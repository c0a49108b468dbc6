"""The batched color_twist kernel against the operator's host path (``run_sample``).

Tolerances are the operator's stated ones: integer outputs within 1, float outputs within 1e-5
relative and 1e-4 absolute (for 0..255 data).
"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.kernels import launch
from raypipe.operators.color_twist import ColorTwist
from tests.kernels.helpers import contexts, host_samples, on_device, per_sample

ARGS = {
    "brightness": [np.float32(1.3), np.float32(0.7), np.float32(1.0)],
    "contrast": [np.float32(0.6), np.float32(1.4), np.float32(1.1)],
    "saturation": [np.float32(0.0), np.float32(1.8), np.float32(0.5)],
    "hue": [np.float32(-150.0), np.float32(33.0), np.float32(90.0)],
}


def assert_within_tolerance(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if ref.dtype.kind in "iu":
        assert np.abs(got.astype(np.int32) - ref).max() <= 1
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def _check(xp, op, images, args) -> list[np.ndarray]:
    ctxs = contexts(len(images))
    out = op.run_batch(xp, [on_device(xp, images)], args, ctxs)
    got = host_samples(out)
    for i, (sample, image) in enumerate(zip(got, images, strict=True)):
        assert_within_tolerance(sample, op.run_sample([image], per_sample(args, i), ctxs[i]))
    return got


@pytest.mark.parametrize("dtype", [None, np.float32, np.int16])
def test_per_sample_arguments_on_a_ragged_uint8_batch(xp, ragged, dtype):
    images = ragged(seed=8)
    assert launch.available(xp, 2 * sum(i.size for i in images))
    got = _check(xp, ColorTwist("gpu", 0, dtype=dtype), images, ARGS)
    assert got[0].dtype == (dtype or np.uint8)


def test_float_images_use_half_range_one_half(xp, ragged):
    images = [i / np.float32(255) for i in ragged(dtype=np.float32, seed=9)]
    _check(xp, ColorTwist("gpu", 0, brightness=1.5, contrast=0.5, hue=20.0), images, {})


def test_float16_output_on_a_batch_array(xp, ragged):
    images = ragged(sizes=[(6, 5)] * 3, seed=10)
    op = ColorTwist("gpu", 0, saturation=1.5, dtype=np.float16)
    out = op.run_batch(xp, [xp.asarray(np.stack(images))], {}, contexts(3))
    assert isinstance(out, xp.ndarray) and out.dtype == np.float16
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        ref = op.run_sample([image], {}, ctx)
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3)


def test_non_rgb_samples_are_an_error(xp):
    expected = r"color_twist: expects HWC RGB images or FHWC sequences, got a sample of shape \(4, 5, 4\)"
    with pytest.raises(ValueError, match=expected):
        ColorTwist("gpu", 0).run_batch(xp, [[xp.zeros((4, 5, 4), np.uint8)]], {}, contexts(1))


@pytest.mark.gpu
def test_jpegs_on_the_gpu_match_the_host(cp, jpeg_images):
    args = {k: [v[i % 3] for i in range(len(jpeg_images))] for k, v in ARGS.items()}
    _check(cp, ColorTwist("gpu", 0), jpeg_images, args)
    _check(cp, ColorTwist("gpu", 0, dtype=np.float32), jpeg_images, args)
