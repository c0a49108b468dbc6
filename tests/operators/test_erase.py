"""erase: DALI's results on real JPEGs and on float spectrogram-like arrays (regions named by
layout or by axes, several regions, absolute, normalized and centred coordinates, regions reaching
out of the sample, per-channel fills, per-sample anchors and shapes as Jasper's SpecAugment gives
them), the same on device="gpu", and clear errors for bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError

SPECTROGRAMS = [
    np.random.default_rng(k).standard_normal((64, n)).astype(np.float32) for k, n in enumerate((100, 37, 256, 8))
]
INTS = [np.arange(n, dtype=np.int16) - 5 for n in (10, 3, 17, 1)]

# (id, samples (None: decoded JPEGs), layout, keyword arguments)
CASES = [
    ("hw-one-region", None, "HWC", {"anchor": (10, 20), "shape": (190, 200), "axis_names": "HW"}),
    (
        "w-two-bands-rgb-fill",
        None,
        "HWC",
        {"anchor": (10, 250), "shape": (20, 30), "axis_names": "W", "fill_value": (118, 185, 0)},
    ),  # fmt: skip
    (
        "normalized",
        None,
        "HWC",
        {"anchor": (0.15, 0.15), "shape": (0.3, 0.3), "axis_names": "HW", "fill_value": 100, "normalized": True},
    ),  # fmt: skip
    ("normalized-anchor-only", None, "HWC", {"anchor": (0.15, 0.15), "shape": (20, 30), "normalized_anchor": True}),
    (
        "centered",
        None,
        "HWC",
        {
            "anchor": (100, 120, 0, 0),
            "shape": (50, 61, 33, 17),
            "axis_names": "HW",
            "centered_anchor": True,
            "fill_value": 7,
        },
    ),  # fmt: skip
    ("out-of-bounds", None, "HWC", {"anchor": (-30, -40, 300, 400), "shape": (80, 90, 500, 500), "axes": (0, 1)}),
    ("default-axes-order", None, "HWC", {"anchor": (5, 9), "shape": (11, 250), "axes": (1, 0), "fill_value": 255}),
    ("fill-wraps-as-static-cast", None, "HWC", {"anchor": (0, 0), "shape": (9, 9), "fill_value": 300}),
    ("negative-fill-on-uint8", None, "HWC", {"anchor": (3, 3), "shape": (9, 9), "fill_value": -5}),
    ("fractional-fill", None, "HWC", {"anchor": (3, 3), "shape": (9, 9), "fill_value": 99.7}),
    (
        "spectrogram-time-and-freq",
        SPECTROGRAMS,
        "",
        {"anchor": (0.1, 0.0, 0.0, 0.5), "shape": (10, 100, 64, 5), "axes": (0, 1), "normalized_anchor": True},
    ),  # fmt: skip
    ("spectrogram-no-anchor", SPECTROGRAMS, "", {"shape": (3.7, 2.2), "axes": (0, 1), "fill_value": -1.5}),
    ("int16-1d", INTS, "", {"anchor": (2.9, -1.5), "shape": (4.2, 3.1), "axes": (0,), "fill_value": 40000}),
    ("empty-regions", INTS, "", {"anchor": (), "shape": (), "axes": (0,)}),
]


@pytest.mark.parametrize("case, samples, layout, kwargs", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, kwargs):
    samples = images if samples is None else samples
    theirs = dali(samples, lambda x, fn, types: fn.erase(x, **kwargs), layout)
    mine = ours(samples, lambda x: fn.erase(x, **kwargs), layout)
    on_gpu = ours(samples, lambda x: fn.erase(x.gpu(), device="gpu", **kwargs), layout)
    for (their_samples, their_layout), (my_samples, my_layout), (gpu_samples, _) in zip(
        theirs, mine, on_gpu, strict=True
    ):
        assert my_layout == their_layout
        for their, my, gpu in zip(their_samples, my_samples, gpu_samples, strict=True):
            assert my.dtype == their.dtype and gpu.dtype == their.dtype
            np.testing.assert_array_equal(my, their)
            np.testing.assert_array_equal(gpu, their)


def _cutouts(n: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """SpecAugment-style masks, as Jasper's cutout generator makes them: per sample, time masks
    (normalized anchor on axis 1) and frequency masks, flattened (anchor, shape) over axes (0, 1)."""
    rng = np.random.default_rng(seed)
    anchors, shapes = [], []
    for _ in range(n):
        regions = []
        for _ in range(2):  # frequency masks: a band of rows over all time
            width = int(rng.integers(0, 20))
            regions.append(((float(rng.uniform(0, 1 - width / 64)), 0.0), (width, 1000.0)))
        for _ in range(2):  # time masks: a band of columns over all frequencies
            length = int(rng.integers(0, 30))
            regions.append(((0.0, float(rng.uniform(0, 1))), (64.0, length)))
        anchors.append(np.array([v for a, _ in regions for v in a], np.float32))
        shapes.append(np.array([v for _, s in regions for v in s], np.float32))
    return anchors, shapes


def test_per_sample_anchors_and_shapes_as_specaugment_gives_them(ours, dali):
    anchors, shapes = _cutouts(len(SPECTROGRAMS), seed=3)
    args = {"axes": [0, 1], "fill_value": 0, "normalized_anchor": True}
    theirs = dali(
        SPECTROGRAMS, lambda x, fn, types, a, s: fn.erase(x, anchor=a, shape=s, **args), "", [anchors, shapes]
    )
    mine = ours(
        SPECTROGRAMS, lambda x, a, s: fn.erase(x.gpu(), anchor=a, shape=s, **args), per_sample=[anchors, shapes]
    )
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        np.testing.assert_array_equal(my, their)
    assert any((my == 0).all(axis=1).any() for my in mine[0][0])  # whole frequency rows masked


def test_regions_without_dali(ours):
    data = [np.arange(24, dtype=np.int32).reshape(4, 6)]
    (out,) = ours(data, lambda x: fn.erase(x, anchor=(1, 2), shape=(2, 3), axes=(0, 1), fill_value=-1))
    want = data[0].copy()
    want[1:3, 2:5] = -1
    np.testing.assert_array_equal(out[0][0], want)
    (centred,) = ours(data, lambda x: fn.erase(x, anchor=(0.5,), shape=(0.5,), axes=(1,), normalized=True,
                                                centered_anchor=True))  # fmt: skip
    want = data[0].copy()
    want[:, 1:4] = 0  # centre 3, extent 3: from 1.5 (truncated to 1) to 4.5 (to 4)
    np.testing.assert_array_equal(centred[0][0], want)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"anchor": (1,), "shape": (2,), "normalized": True, "normalized_anchor": False},
         "normalized excludes normalized_anchor and normalized_shape"),
        ({"shape": (2,), "axes": (0,), "fill_value": ()}, "fill_value needs at least one value"),
        ({"shape": (2,), "centered_anchor": 1}, "centered_anchor must be a bool"),
        ({"shape": (2,), "axes": (0,), "fill_value": (1, 2, 3)}, "need an input layout with a C axis"),
        ({"shape": (2,), "axis_names": "W"}, "axis_names 'W' needs an input with a layout"),
        ({"shape": (2,)}, "no layout to take the erased axes from"),
    ],
)  # fmt: skip
def test_bad_arguments_fail_the_build(kwargs, message):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.erase(fn.external_source(source=lambda: [np.zeros(4, np.float32)]), **kwargs)

    with pytest.raises(ArgumentError, match=message):
        pipe().build()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"anchor": (1, 2), "shape": (2,), "axes": (0,)}, "anchor gives 2 coordinates and shape 1"),
        ({"shape": (2, 3, 4), "axes": (0, 1)}, "3 coordinates are not whole regions of the 2 erased axes"),
        ({"shape": (2,), "axes": (3,)}, "axes 3 is out of range for 2-D samples"),
    ],
)
def test_bad_regions_name_the_sample(ours, kwargs, message):
    with pytest.raises(Exception, match=message) as caught:
        ours([np.zeros((4, 4), np.float32), np.zeros((2, 2), np.float32)], lambda x: fn.erase(x, **kwargs))
    assert "sample" in str(caught.value)
