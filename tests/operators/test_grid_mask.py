"""``grid_mask`` against DALI 2.4's CPU operator where installed: tiles, ratios, rotations and shifts
(static and per sample), several channel counts and types, on ``cpu`` and ``gpu``; the squares a
grid without rotation zeroes, checked where DALI is absent too."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError
from tests.operators.outputs import assert_same

RNG = np.random.default_rng(0)
IMAGES = [RNG.integers(1, 255, (37, 53, 3)).astype(np.uint8), RNG.integers(1, 255, (64, 48, 1)).astype(np.uint8)]
FLOATS = [RNG.random((20, 30, 3), dtype=np.float32) + 0.5, RNG.random((9, 40, 2), dtype=np.float32) + 0.5]
CASES = [
    {"tile": 4, "ratio": 0.5},
    {"tile": 5, "ratio": 0.4, "shift_x": 1, "shift_y": 2},
    {"tile": 6, "ratio": 0.5, "angle": 0.3},
    {"tile": 17, "ratio": 0.63, "angle": 2.1, "shift_x": -3.3, "shift_y": 7.7},
    {},
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("samples", [IMAGES, FLOATS], ids=["uint8", "float32"])
@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_grid_mask_matches_dali(ours, dali, samples, args, device):
    mine = ours(samples, lambda x: fn.grid_mask(x.gpu() if device == "gpu" else x, **args), layout="HWC")
    assert_same(mine, dali(samples, lambda x, f, t: f.grid_mask(x, **args), layout="HWC"), layout="HWC")


def test_arguments_per_sample_match_dali(ours, dali):
    per_sample = [[np.array(v, np.int32) for v in (7, 11)], [np.array(v, np.float32) for v in (0.25, 1.2)]]

    def build(x, f, t, tile, angle):
        return f.grid_mask(x, tile=tile, angle=angle, ratio=0.6)

    mine = ours(IMAGES, lambda x, tile, angle: build(x, fn, None, tile, angle), layout="HWC", per_sample=per_sample)
    assert_same(mine, dali(IMAGES, build, layout="HWC", per_sample=per_sample), layout="HWC")


def test_an_unrotated_grid_zeroes_its_squares(ours):
    ((masked, _),) = ours([np.ones((8, 8, 1), np.uint8)], lambda x: fn.grid_mask(x, tile=4, ratio=0.5), layout="HWC")
    square = np.logical_and.outer(np.arange(8) % 4 < 2, np.arange(8) % 4 < 2)
    np.testing.assert_array_equal(masked[0][..., 0], (~square).astype(np.uint8))


def test_bad_arguments_and_samples_fail_naming_them(ours):
    for args, message in (({"tile": 0}, "tile must be a positive int"), ({"ratio": "x"}, "ratio must be a number")):
        pipe = rp.pipeline_def(
            lambda a=args: fn.grid_mask(fn.zeros(shape=[2, 2, 1]), **a), batch_size=1, device_id=None
        )()
        with pytest.raises(ArgumentError, match=f"grid_mask: {message}"):
            pipe.build()
    with pytest.raises(SampleError, match=r"grid_mask: the input must be an HWC image, got shape \(4, 4\)") as failed:
        ours([np.ones((4, 4), np.uint8)], lambda x: fn.grid_mask(x, tile=2))
    assert "sample 0" in str(failed.value)
