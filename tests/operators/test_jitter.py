"""jitter: pixels move by keyed random whole-pixel offsets within DALI's range, alike on cpu and
gpu and from run to run, with fill_value outside the image and mask per sample. DALI 2.4 runs
jitter on the GPU only (its CPU build has no jitter to compare against), and its offsets come from
its own generator: these tests check the offsets' range and spread, and the result on real JPEGs."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError


def _coded(height: int, width: int) -> np.ndarray:
    """An HWC int32 image whose pixel (y, x) holds ``y * width + x`` (its own position)."""
    return np.arange(height * width, dtype=np.int32).reshape(height, width, 1) + 1


@pytest.mark.parametrize("degree", [2, 3, 6])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_offsets_are_within_dalis_range_and_spread(ours, degree, device):
    samples = [_coded(40, 50), _coded(33, 21)]
    ((outs, layout),) = ours(
        samples,
        lambda x: fn.jitter(x.gpu() if device == "gpu" else x, nDegree=degree, fill_value=-1, device=device),
        "HWC",
    )
    assert layout == "HWC"
    low, high = -(degree // 2), degree - 1 - degree // 2
    for image, out in zip(samples, outs, strict=True):
        height, width = image.shape[:2]
        moved = out[..., 0] > 0
        source = out[..., 0][moved] - 1
        ys, xs = np.nonzero(moved)
        dy, dx = source // width - ys, source % width - xs
        assert dy.min() >= low and dy.max() <= high and dx.min() >= low and dx.max() <= high
        assert set(np.unique(dx).tolist()) == set(range(low, high + 1))  # every offset occurs
        inner = out[-low : height - high, -low : width - high, 0]
        assert (inner > 0).all()  # a source outside the image is the only way to get fill_value
        assert np.mean(dx == 0) == pytest.approx(1 / degree, abs=0.05)


def test_keyed_per_sample_alike_on_both_devices_and_runs(ours, images):
    def jittered(device, seed=7):
        def build(x):
            return fn.jitter(x.gpu() if device == "gpu" else x, nDegree=4, seed=seed, device=device)

        return ours(images, build, "HWC")[0][0]

    cpu, gpu, again, other = jittered("cpu"), jittered("gpu"), jittered("cpu"), jittered("cpu", seed=8)
    for a, b, c, d, image in zip(cpu, gpu, again, other, images, strict=True):
        assert a.dtype == image.dtype and a.shape == image.shape
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
        assert not np.array_equal(a, d) and not np.array_equal(a, image)


def test_mask_leaves_samples_unchanged(ours, images):
    masks = [np.int32(m) for m in (1, 0, 0, 1)]
    ((outs, _),) = ours(images, lambda x, m: fn.jitter(x, mask=m), "HWC", per_sample=[masks])
    for image, out, mask in zip(images, outs, masks, strict=True):
        assert np.array_equal(out, image) != bool(mask)


def test_refusals(ours, images):
    with pytest.raises(ArgumentError, match="nDegree must be a positive int"):
        ours(images, lambda x: fn.jitter(x, nDegree=0), "HWC")
    with pytest.raises(ArgumentError, match="INTERP_NN"):
        ours(images, lambda x: fn.jitter(x, interp_type=rp.types.INTERP_LINEAR), "HWC")
