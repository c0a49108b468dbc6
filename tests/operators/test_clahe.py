"""``clahe`` against DALI 2.4's CPU operator where installed: real JPEGs, random and low-contrast
images, gray (``HWC`` with one channel; ``HW``, which DALI refuses, against DALI's one-channel
result) and RGB (``luma_only`` on and off), tile grids that divide the image and ones that do not,
several clip limits (none, tiny, huge) and ``bins``, on ``cpu`` and ``gpu``: equal values
throughout; a hand-checked image where DALI is absent; bad arguments and samples fail naming the
operator."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(0)


def _samples(channels: int) -> list[np.ndarray]:
    return [
        RNG.integers(0, 256, (37, 53, channels)).astype(np.uint8),
        (RNG.random((64, 48, channels)) ** 3 * 90 + 60).astype(np.uint8),  # low contrast, skewed
        RNG.integers(100, 140, (16, 16, channels)).astype(np.uint8),
        RNG.integers(0, 256, (5, 3, channels)).astype(np.uint8),  # smaller than some grids
        np.full((9, 7, channels), 77, np.uint8),
    ]


GRIDS = [(8, 8), (4, 3), (1, 1), (5, 7), (16, 2)]
CLIPS = [2.0, 0.0, 0.01, 4.5, 1e9]


def _compare(ours, dali, samples, device="cpu", layout="HWC", **kwargs):
    mine = ours(samples, lambda x: fn.clahe(x.gpu() if device == "gpu" else x, **kwargs), layout=layout)
    hwc = [s[..., None] if s.ndim == 2 else s for s in samples]
    theirs = dali(hwc, lambda x, f, t: f.clahe(x, **kwargs), layout="HWC")
    assert mine[0][1] == layout
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        b = b[..., 0] if a.ndim == 2 else b
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("clip", CLIPS)
def test_gray_matches_dali(ours, dali, grid, clip):
    _compare(ours, dali, _samples(1), tiles_x=grid[0], tiles_y=grid[1], clip_limit=clip)


@pytest.mark.parametrize("luma_only", [True, False])
@pytest.mark.parametrize("grid", GRIDS[:3])
@pytest.mark.parametrize("clip", CLIPS[:3])
def test_rgb_matches_dali(ours, dali, grid, clip, luma_only):
    samples = _samples(3)
    _compare(ours, dali, samples, tiles_x=grid[0], tiles_y=grid[1], clip_limit=clip, luma_only=luma_only)


@pytest.mark.parametrize("luma_only", [True, False])
@pytest.mark.parametrize("args", [(8, 8, 2.0), (3, 5, 3.0), (1, 1, 0.0)])
def test_jpegs_match_dali(ours, dali, images, luma_only, args):
    tiles_x, tiles_y, clip = args
    _compare(ours, dali, list(images), tiles_x=tiles_x, tiles_y=tiles_y, clip_limit=clip, luma_only=luma_only)


def test_every_color_and_gray_level_matches_dali(ours, dali):
    """All 256 gray levels and a spread of colors in one image, equalized as a whole: every entry of
    the Lab tables that these reach, both ways."""
    grays = np.repeat(np.arange(256, dtype=np.uint8), 4)[None, :, None].repeat(3, -1)
    colors = RNG.integers(0, 256, (32, 1024, 3)).astype(np.uint8)
    _compare(ours, dali, [grays, colors], tiles_x=1, tiles_y=1, clip_limit=0.0)


@pytest.mark.parametrize("bins", [256, 128, 64])
def test_bins_do_not_change_the_result(ours, dali, bins):
    _compare(ours, dali, _samples(1)[:2], tiles_x=4, tiles_y=4, clip_limit=2.0, bins=bins)


def test_hw_is_one_gray_channel(ours, dali):
    _compare(ours, dali, [s[..., 0] for s in _samples(1)], layout="HW", tiles_x=4, tiles_y=3, clip_limit=2.0)


@pytest.mark.parametrize("luma_only", [True, False])
def test_gpu_gives_the_cpu_result(ours, dali, images, luma_only):
    samples = _samples(3)[:3] + list(images)[:2]
    _compare(ours, dali, samples, device="gpu", tiles_x=6, tiles_y=4, clip_limit=2.5, luma_only=luma_only)
    _compare(ours, dali, _samples(1), device="gpu", tiles_x=3, tiles_y=7, clip_limit=1.5)


def test_two_levels_map_through_the_cdf(ours):
    """One tile, no clipping: plain equalization, values at ``round(cdf * 255 / n)``."""
    image = np.array([[10, 10, 10, 200]], np.uint8)[..., None]
    ((out, _),) = ours([image], lambda x: fn.clahe(x, tiles_x=1, tiles_y=1, clip_limit=0.0), layout="HWC")
    assert out[0][..., 0].tolist() == [[191, 191, 191, 255]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tiles_y": 2, "clip_limit": 2.0}, "clahe: tiles_x is required"),
        ({"tiles_x": 0, "tiles_y": 2, "clip_limit": 2.0}, "clahe: tiles_x must be a positive int, got 0"),
        ({"tiles_x": 2, "tiles_y": 1.5, "clip_limit": 2.0}, "clahe: tiles_y must be a positive int"),
        ({"tiles_x": 2, "tiles_y": 2}, "clahe: clip_limit is required"),
        ({"tiles_x": 2, "tiles_y": 2, "clip_limit": float("nan")}, "clahe: clip_limit must be finite"),
        ({"tiles_x": 2, "tiles_y": 2, "clip_limit": "x"}, "clahe: clip_limit must be a number"),
        ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0, "bins": 100}, "clahe: bins must be a positive power of two"),
        ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0, "luma_only": 1}, "clahe: luma_only must be a bool"),
    ],
)
def test_bad_arguments_fail(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        ours([np.zeros((4, 4, 1), np.uint8)], lambda x: fn.clahe(x, **kwargs), layout="HWC")


def test_other_layouts_fail(ours):
    with pytest.raises(ArgumentError, match="clahe: expects HWC images"):
        ours([np.zeros((3, 4, 4), np.uint8)], lambda x: fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=2.0), layout="CHW")


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (np.zeros((4, 4, 3), np.float32), "clahe: the input must be uint8, got float32"),
        (np.zeros((4, 4, 2), np.uint8), "clahe: expects HWC images of 1 or 3 channels"),
        (np.zeros((4, 4, 4), np.uint8), "clahe: expects HWC images of 1 or 3 channels"),
    ],
)
def test_bad_samples_fail_naming_the_sample(ours, sample, message):
    with pytest.raises(SampleError, match=message) as failed:
        ours([sample], lambda x: fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=2.0), layout="HWC")
    assert "sample 0" in str(failed.value)
