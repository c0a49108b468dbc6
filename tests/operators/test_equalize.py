"""``equalize`` against DALI 2.4's CPU operator where installed: HWC, CHW and HW images, a channel
of one value, skewed histograms, on ``cpu`` and ``gpu``; the mapping checked on a small image where
DALI is absent; other types fail naming the sample."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import SampleError

RNG = np.random.default_rng(0)
CASES = {
    "HWC": [
        RNG.integers(40, 200, (37, 53, 3)).astype(np.uint8),
        (RNG.random((64, 48, 1)) ** 3 * 255).astype(np.uint8),
        np.full((5, 5, 2), 7, np.uint8),
    ],
    "CHW": [RNG.integers(40, 200, (3, 7, 9)).astype(np.uint8), RNG.integers(0, 3, (2, 4, 4)).astype(np.uint8)],
    "HW": [RNG.integers(40, 200, (7, 9)).astype(np.uint8)],
}


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("layout", sorted(CASES))
def test_equalize_matches_dali(ours, dali, images, layout, device):
    samples = CASES[layout] + (list(images) if layout == "HWC" else [])
    mine = ours(samples, lambda x: fn.equalize(x.gpu() if device == "gpu" else x), layout=layout)
    theirs = dali(samples, lambda x, f, t: f.equalize(x), layout=layout)
    assert mine[0][1] == theirs[0][1] == layout
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_the_mapping_spreads_the_histogram(ours):
    """Values 10, 20, 30, 40 (4, 2, 1, 1 pixels): the first maps to 0, the others to 255 times the
    share of the pixels above the first up to them."""
    image = np.array([[10, 10, 10, 10], [20, 20, 30, 40]], np.uint8)[..., None]
    ((out, _),) = ours([image], lambda x: fn.equalize(x), layout="HWC")
    assert out[0][..., 0].tolist() == [[0, 0, 0, 0], [128, 128, 191, 255]]


def test_other_types_fail_naming_the_sample(ours):
    with pytest.raises(SampleError, match="equalize: the input must be uint8, got float32") as failed:
        ours([np.zeros((2, 2, 3), np.float32)], lambda x: fn.equalize(x), layout="HWC")
    assert "sample 0" in str(failed.value)
