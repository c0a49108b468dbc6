"""``debayer`` against DALI 2.4's CPU operator (OpenCV's Bayer conversions) where installed: every
blue position, uint8 and uint16, sizes from 2x2 up, ``HW``, ``HWC``, ``FHW`` and ``FHWC``,
per-sample positions, the algorithms ``bilinear_ocv``, ``edgeaware_ocv`` and ``gray_ocv``, on
``cpu`` and ``gpu``; the rule checked on small images where DALI is absent; bad arguments and
samples fail naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, ops
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(0)
POSITIONS = [(0, 0), (0, 1), (1, 0), (1, 1)]
SIZES = [(2, 2), (2, 6), (6, 2), (4, 4), (6, 10), (10, 6), (34, 64), (64, 66)]
ALGORITHMS = [None, "bilinear_ocv", "edgeaware_ocv", "gray_ocv"]


def _raw(shape, dtype, low=False):
    top = 4 if low else np.iinfo(dtype).max + 1  # few levels: many ties between gradients
    return RNG.integers(0, top, shape).astype(dtype)


def _kwargs(algorithm):
    return {} if algorithm is None else {"algorithm": algorithm}


def _compare(mine, theirs):
    assert mine[0][1] == theirs[0][1]
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("position", POSITIONS)
def test_debayer_matches_dali(ours, dali, position, dtype, algorithm):
    samples = [_raw(size, dtype, low=i % 2 == 1) for i, size in enumerate(SIZES)]
    kwargs = _kwargs(algorithm)
    mine = ours(samples, lambda x: fn.debayer(x, blue_position=list(position), **kwargs), layout="HW")
    theirs = dali(samples, lambda x, f, t: f.debayer(x, blue_position=list(position), **kwargs), layout="HW")
    assert mine[0][1] == "HWC"
    _compare(mine, theirs)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(
    "layout, shapes",
    [
        ("HW", [(8, 12), (2, 2), (6, 4), (30, 20)]),
        ("HWC", [(8, 12, 1), (2, 4, 1), (6, 6, 1), (16, 10, 1)]),
        ("FHW", [(3, 8, 12), (1, 4, 4), (2, 6, 2), (2, 10, 14)]),
        ("FHWC", [(2, 8, 12, 1), (1, 2, 2, 1), (3, 6, 8, 1), (1, 12, 4, 1)]),
    ],
)
def test_per_sample_positions_layouts_and_devices(ours, dali, layout, shapes, algorithm, dtype, device):
    samples = [_raw(shape, dtype, low=i == 1) for i, shape in enumerate(shapes)]
    positions = [np.array(p, np.int32) for p in POSITIONS]
    kwargs = _kwargs(algorithm)

    def mine_build(x, position):
        return fn.debayer(x.gpu() if device == "gpu" else x, blue_position=position, **kwargs)

    mine = ours(samples, mine_build, layout=layout, per_sample=[positions])
    theirs = dali(
        samples, lambda x, f, t, p: f.debayer(x, blue_position=p, **kwargs), layout=layout, per_sample=[positions]
    )
    assert mine[0][1] == ("FHWC" if layout.startswith("F") else "HWC")
    _compare(mine, theirs)


@pytest.mark.parametrize("position", [0, 1])
def test_one_number_is_both_coordinates_and_samples_without_layout(ours, dali, position):
    samples = [_raw((6, 8), np.uint8), _raw((4, 4, 1), np.uint8)]
    mine = ours(samples[:1], lambda x: fn.debayer(x, blue_position=position))
    theirs = dali(samples[:1], lambda x, f, t: f.debayer(x, blue_position=position))
    _compare(mine, theirs)
    mine = ours(samples[1:], lambda x: ops.Debayer(blue_position=position, algorithm="edgeaware_ocv")(x))
    theirs = dali(samples[1:], lambda x, f, t: f.debayer(x, blue_position=position, algorithm="edgeaware_ocv"))
    _compare(mine, theirs)


def test_the_rule_on_a_small_image(ours):
    """``RG`` (blue at (1, 1) of the tile from the second row and column: red at (1, 1) of the
    image, blue at (2, 2)): the inner pixels interpolate their neighbours, rounded half up; the
    frame copies the nearest inner pixel."""
    raw = np.array([[10, 20, 30, 40], [50, 61, 70, 80], [90, 100, 110, 120], [130, 140, 150, 161]], np.uint8)
    ((out, layout),) = ours([raw], lambda x: fn.debayer(x, blue_position=[1, 1]), layout="HW")
    rgb = out[0]
    assert layout == "HWC" and rgb.shape == (4, 4, 3)
    # (1, 1) is red: blue from the diagonals, green from the four direct neighbours
    assert rgb[1, 1].tolist() == [61, (20 + 50 + 70 + 100 + 2) // 4, (10 + 30 + 90 + 110 + 2) // 4]
    # (1, 2) is green between reds: red from left and right, blue from above and below
    assert rgb[1, 2].tolist() == [(61 + 80 + 1) // 2, 70, (30 + 110 + 1) // 2]
    np.testing.assert_array_equal(rgb[:, 0], rgb[:, 1])
    np.testing.assert_array_equal(rgb[0], rgb[1])
    np.testing.assert_array_equal(rgb[3], rgb[2])
    ((edge, _),) = ours([raw], lambda x: fn.debayer(x, blue_position=[1, 1], algorithm="edgeaware_ocv"))
    # |50 - 70| = 20 is not above |20 - 100| = 80: green from the horizontal pair
    assert edge[0][1, 1, 1] == (50 + 70 + 1) // 2
    ((tiny, _),) = ours([raw[:2, :2]], lambda x: fn.debayer(x, blue_position=0))
    assert tiny[0].shape == (2, 2, 3) and not tiny[0].any()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "debayer: blue_position is required"),
        ({"blue_position": [0, 2]}, "debayer: blue_position must be two values, each 0 or 1"),
        ({"blue_position": [0, 1, 1]}, "debayer: blue_position must be two values"),
        ({"blue_position": [0, 0], "algorithm": "vng_ocv"}, "debayer: algorithm 'vng_ocv' .* is not here"),
        ({"blue_position": [0, 0], "algorithm": "default_npp"}, "debayer: algorithm 'default_npp' .* is not here"),
        ({"blue_position": [0, 0], "algorithm": "nearest"}, "debayer: unsupported algorithm 'nearest'"),
    ],
)
def test_bad_arguments_name_the_operator(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        ours([np.zeros((4, 4), np.uint8)], lambda x: fn.debayer(x, **kwargs), layout="HW")


def test_other_layouts_are_refused(ours):
    with pytest.raises(ArgumentError, match="debayer: the input's layout must be HW, HWC, FHW or FHWC, got 'CHW'"):
        ours([np.zeros((1, 4, 4), np.uint8)], lambda x: fn.debayer(x, blue_position=0), layout="CHW")


@pytest.mark.parametrize(
    "sample, layout, message",
    [
        (np.zeros((5, 4), np.uint8), "HW", "the height and width must be even and positive, got 5 x 4"),
        (np.zeros((4, 3), np.uint16), "HW", "the height and width must be even and positive, got 4 x 3"),
        (np.zeros((0, 4), np.uint8), "HW", "the height and width must be even and positive, got 0 x 4"),
        (np.zeros((4, 4, 3), np.uint8), "HWC", "the input must have one channel, got 3"),
        (np.zeros((4, 4), np.int16), "HW", "the input must be uint8 or uint16, got int16"),
        (np.zeros((4, 4), np.float32), "HW", "the input must be uint8 or uint16, got float32"),
        (np.zeros((0, 4, 4), np.uint8), "FHW", "a sequence must have frames"),
        (np.zeros((2, 4, 4), np.uint8), "HWC", "the input must have one channel, got 4"),
        (np.zeros((2, 2, 4, 4), np.uint8), "", "without a layout the input must be HW or HWC"),
    ],
)
def test_bad_samples_fail_naming_the_operator_and_sample(ours, sample, layout, message):
    with pytest.raises(SampleError, match=f"debayer: {message}") as failed:
        ours([sample], lambda x: fn.debayer(x, blue_position=[1, 0]), layout=layout)
    assert "sample 0" in str(failed.value)


@pytest.mark.parametrize("bad", [[1, 3], [1]])
def test_bad_per_sample_positions_fail_naming_the_sample(ours, bad):
    samples = [np.zeros((4, 4), np.uint8)] * 2
    positions = [np.array([0, 1], np.int32), np.array(bad, np.int32)]
    with pytest.raises(SampleError, match="debayer: blue_position must be two values") as failed:
        ours(samples, lambda x, p: fn.debayer(x, blue_position=p), layout="HW", per_sample=[positions])
    assert "sample 1" in str(failed.value)
