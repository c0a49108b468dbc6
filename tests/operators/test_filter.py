"""filter: against DALI 2.4's CPU operator (OpenCV's ``filter2D``) on real decoded JPEGs, int16,
uint16 and float32 images, channel-first data and sequences (every border, a fill value input,
anchors per sample, mode ``"valid"``, dtype; cpu and gpu); a correlation and the borders checked
by hand, a volume with a 3-D filter (DALI's GPU operator only) against a direct sum; inputs DALI
refuses fail naming the operator (and the sample).

Tolerance: integer results equal DALI's but for a value next to a rounding tie (at most 1, on
one value or at most 0.2% of them); float32 results within 1e-3 on 0..255 data (OpenCV's vector
loop fuses multiply and add, and large filters take its DFT path)."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from tests.operators.outputs import case_samples, on_both


def assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        assert diff.max() <= 1
        assert np.count_nonzero(diff) <= max(1, 2e-3 * diff.size)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3)


_RNG = np.random.default_rng(7)
INT16 = [(_RNG.random(s) * 600 - 300).astype(np.int16) for s in ((23, 31, 3), (17, 12, 3))]
UINT16 = [_RNG.integers(0, 60000, s, dtype=np.uint16) for s in ((19, 27), (8, 40))]
FLOAT = [(_RNG.random(s) * 255).astype(np.float32) for s in ((19, 27), (8, 40))]
SEQUENCES = [_RNG.integers(0, 256, s, dtype=np.uint8) for s in ((3, 8, 9, 2), (2, 6, 11, 2))]
SMALL = [(_RNG.normal(size=(3, 3)) / 3).astype(np.float32) for _ in range(4)]
ODD = [(_RNG.normal(size=s) / 3).astype(np.float32) for s in ((5, 4), (1, 7), (4, 1), (2, 2))]
LARGE = [(_RNG.normal(size=s) / 5).astype(np.float32) for s in ((9, 13), (7, 7), (11, 3), (5, 9))]
ANCHORS = [np.array(a, np.int32) for a in ([0, 0], [-1, 1], [2, -1], [1, 0])]
FILLS_U16 = [np.uint16(v) for v in (500, 60000, 0, 7)]

# (id, samples: None for the JPEGs, layout, extra input batches, per-sample batches,
#  build(x, fn, types, device, *inputs_then_per_sample))
CASES = [
    ("default", None, "HWC", [SMALL], [], lambda x, fn, types, d, f: fn.filter(x, f, device=d)),
    ("wrap", None, "HWC", [ODD], [], lambda x, fn, types, d, f: fn.filter(x, f, border="wrap", device=d)),
    (
        "constant 0",
        None,
        "HWC",
        [LARGE],
        [],
        lambda x, fn, types, d, f: fn.filter(x, f, border="constant", dtype=types.FLOAT, device=d),
    ),
    ("valid", None, "HWC", [LARGE], [], lambda x, fn, types, d, f: fn.filter(x, f, mode="valid", device=d)),
    (
        "anchor per sample",
        None,
        "HWC",
        [SMALL],
        [ANCHORS],
        lambda x, fn, types, d, f, a: fn.filter(x, f, anchor=a, border="reflect_1001", device=d),
    ),
    ("clamp", INT16, "HWC", [ODD], [], lambda x, fn, types, d, f: fn.filter(x, f, border="clamp", device=d)),
    (
        "fill",
        UINT16,
        "HW",
        [LARGE, FILLS_U16],
        [],
        lambda x, fn, types, d, f, v: fn.filter(x, f, v, border="constant", device=d),
    ),
    ("float", FLOAT, "HW", [LARGE], [], lambda x, fn, types, d, f: fn.filter(x, f, anchor=[0, 1], device=d)),
    ("chw", "chw", "CHW", [ODD], [], lambda x, fn, types, d, f: fn.filter(x, f, device=d)),
    ("sequence", SEQUENCES, "FHWC", [LARGE], [], lambda x, fn, types, d, f: fn.filter(x, f, border="wrap", device=d)),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, samples, layout, inputs, values, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, inputs, values, build, device):
    samples = case_samples(samples, images)
    extra = [batch[: len(samples)] for batch in inputs + values]
    theirs, mine = on_both(ours, dali, samples, build, device, layout, per_sample=extra)
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their)


BORDERS = {
    "reflect_101": [212.0, 321.0, 432.0, 543.0, 654.0, 765.0, 876.0, 987.0, 898.0],
    "reflect_1001": [211.0, 321.0, 432.0, 543.0, 654.0, 765.0, 876.0, 987.0, 998.0],
    "wrap": [219.0, 321.0, 432.0, 543.0, 654.0, 765.0, 876.0, 987.0, 198.0],
    "clamp": [211.0, 321.0, 432.0, 543.0, 654.0, 765.0, 876.0, 987.0, 998.0],
    "constant": [210.0, 321.0, 432.0, 543.0, 654.0, 765.0, 876.0, 987.0, 98.0],
}


@pytest.mark.parametrize("border", sorted(BORDERS))
def test_a_correlation_with_each_border(ours, border):
    """``[1, 10, 100]`` over ``1..9``: each output's digits are its three inputs (not flipped)."""
    ramp = np.arange(1, 10, dtype=np.float32)[None]
    taps = np.array([[1, 10, 100]], np.float32)
    (((out,), _),) = ours([ramp], lambda x, f: fn.filter(x, f, border=border), "HW", per_sample=[[taps]])
    assert out[0].tolist() == BORDERS[border]


def test_integer_results_round_half_to_even(ours):
    values = np.arange(12, dtype=np.uint8)[None]
    half = np.array([[0.5]], np.float32)
    (((out,), _),) = ours([values], lambda x, f: fn.filter(x, f), "HW", per_sample=[[half]])
    assert out[0].tolist() == [0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6]


def test_a_volume_with_a_3d_filter(ours):
    volume = _RNG.random((4, 5, 6, 2)).astype(np.float32)
    taps = _RNG.normal(size=(3, 2, 3)).astype(np.float32)
    (((out,), _),) = ours([volume], lambda x, f: fn.filter(x, f, border="wrap"), "DHWC", per_sample=[[taps]])
    expected = np.zeros_like(volume, dtype=np.float64)
    for offset in np.ndindex(taps.shape):
        shift = [a - k for a, k in zip((1, 1, 1), offset, strict=True)]
        expected += taps[offset] * np.roll(volume, shift, axis=(0, 1, 2))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"border": "zero"}, "filter: border must be one of"),
        ({"mode": "full"}, "filter: mode must be 'same' or 'valid'"),
        ({"anchor": 1.5}, "filter: anchor must be an int or a list of ints"),
    ],
)
def test_argument_refusals(ours, kwargs, message):
    taps = np.ones((3, 3), np.float32)
    with pytest.raises(ArgumentError, match=message):
        ours([np.zeros((4, 4), np.uint8)], lambda x, f: fn.filter(x, f, **kwargs), "HW", per_sample=[[taps]])


_U8 = np.zeros((4, 5), np.uint8)
_TAPS = np.ones((3, 3), np.float32)


@pytest.mark.parametrize(
    "sample, layout, taps, kwargs, message",
    [
        (_U8.astype(np.int32), "HW", _TAPS, {}, "the input must be one of"),
        (_U8, "HW", _TAPS, {"dtype": types.INT16}, r"dtype must be the input's type \(uint8\) or float32"),
        (_U8, "HW", _TAPS.astype(np.float64), {}, "the filter must be float32, got float64"),
        (_U8, "HW", _TAPS[0], {}, "the filter must have one axis per spatial axis"),
        (_U8, "HW", np.ones((0, 3), np.float32), {}, "the filter is empty"),
        (_U8, "HW", _TAPS, {"anchor": [3, 0]}, r"anchor \[3, 0\] does not lie within the filter"),
        (_U8, "HW", np.ones((5, 3), np.float32), {"mode": "valid"}, "in mode 'valid' the filter"),
        (np.zeros((4, 3, 5), np.uint8), "HCW", _TAPS, {}, "channels \\(C\\) must come first or last"),
        (np.zeros((3, 2, 4, 5), np.uint8), "CFHW", _TAPS, {}, "frames \\(F\\) must be the outermost axis"),
    ],
)
def test_sample_refusals(ours, sample, layout, taps, kwargs, message):
    with pytest.raises(rp.SampleError, match=f"filter: {message}") as failed:
        ours([sample], lambda x, f: fn.filter(x, f, **kwargs), layout, per_sample=[[taps]])
    assert "sample 0" in str(failed.value)


def test_a_fill_value_of_another_type_fails_naming_the_sample(ours):
    with pytest.raises(rp.SampleError, match=r"filter: fill_value must be a scalar of the input's type") as failed:
        ours(
            [_U8],
            lambda x, f, v: fn.filter(x, f, v, border="constant"),
            "HW",
            per_sample=[[_TAPS], [np.float32(3)]],
        )
    assert "sample 0" in str(failed.value)
