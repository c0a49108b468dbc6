"""``jpeg_compression_distortion`` against DALI 2.4's CPU operator where installed: real decoded
JPEGs and a noisy gradient, qualities 1 to 100 (static and per sample), on ``cpu`` and ``gpu`` (the
host's round trip); the artefacts grow as the quality falls; bad input fails naming it."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(0)
_Y, _X = np.mgrid[0:48, 0:64]
GRADIENT = np.clip(
    np.stack([(_X * 4) % 256, (_Y * 5) % 256, ((_X + _Y) * 3) % 256], -1) + RNG.integers(-20, 20, (48, 64, 3)), 0, 255
).astype(np.uint8)


def _same(mine, theirs) -> None:
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("quality", [1, 10, 50, 90, 100])
def test_matches_dali(ours, dali, images, quality, device):
    samples = [GRADIENT, np.ascontiguousarray(GRADIENT[:33, :45]), *images]
    mine = ours(
        samples,
        lambda x: fn.jpeg_compression_distortion(x.gpu() if device == "gpu" else x, quality=quality),
        layout="HWC",
    )
    assert mine[0][1] == "HWC"
    _same(mine, dali(samples, lambda x, f, t: f.jpeg_compression_distortion(x, quality=quality), layout="HWC"))


def test_quality_per_sample_matches_dali(ours, dali):
    samples = [GRADIENT, GRADIENT]
    qualities = [[np.array(5, np.int32), np.array(95, np.int32)]]
    mine = ours(samples, lambda x, q: fn.jpeg_compression_distortion(x, quality=q), layout="HWC", per_sample=qualities)
    errors = [np.abs(s.astype(int) - GRADIENT).mean() for s in mine[0][0]]
    assert errors[0] > 2 * errors[1] > 0, "the lower quality distorts more"
    _same(
        mine,
        dali(
            samples, lambda x, f, t, q: f.jpeg_compression_distortion(x, quality=q), layout="HWC", per_sample=qualities
        ),
    )


def test_bad_quality_and_input_fail():
    for quality in (0, 101, 2.5):
        pipe = rp.pipeline_def(
            lambda q=quality: fn.jpeg_compression_distortion(fn.zeros(shape=[2, 2, 3]), quality=q),
            batch_size=1,
            device_id=None,
        )()
        with pytest.raises(ArgumentError, match="jpeg_compression_distortion: quality must be an int from 1 to 100"):
            pipe.build()


def test_an_image_that_is_not_rgb_fails_naming_the_sample(ours):
    with pytest.raises(SampleError, match=r"must be a uint8 HWC RGB image, got uint8 of shape \(4, 4, 1\)") as failed:
        ours([np.zeros((4, 4, 1), np.uint8)], lambda x: fn.jpeg_compression_distortion(x), layout="HWC")
    assert "sample 0" in str(failed.value)
