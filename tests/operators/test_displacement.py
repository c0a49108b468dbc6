"""``water`` and ``sphere`` against DALI 2.4's CPU build where installed, value for value: default
and given waves, nearest and linear sampling, fill values (a fractional one in a uint8 image),
uint8 and float32 images of odd sizes and real JPEGs, a per-sample ``mask``; the ``gpu`` device
gives the cpu result; what they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError
from tests.operators.outputs import assert_same

RNG = np.random.default_rng(0)
UINT8 = [RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8), RNG.integers(0, 256, (20, 11, 1), dtype=np.uint8)]
FLOAT = [(RNG.standard_normal((17, 23, 3)) * 50).astype(np.float32), np.ones((4, 4, 3), np.float32)]

WAVE = {"ampl_x": 3.3, "ampl_y": -7.1, "freq_x": 0.3, "freq_y": 0.07, "phase_x": 1.0, "phase_y": -0.4}
CASES = [
    ("water", lambda x, f, t: f.water(x)),
    ("water-linear", lambda x, f, t: f.water(x, interp_type=t.INTERP_LINEAR)),
    ("water-wave", lambda x, f, t: f.water(x, **WAVE, interp_type=t.INTERP_LINEAR, fill_value=100.7)),
    ("water-wave-nn", lambda x, f, t: f.water(x, **WAVE, fill_value=-3)),
    ("sphere", lambda x, f, t: f.sphere(x)),
    ("sphere-linear", lambda x, f, t: f.sphere(x, interp_type=t.INTERP_LINEAR, fill_value=33)),
]


@pytest.mark.parametrize("samples", [UINT8, FLOAT], ids=["uint8", "float32"])
@pytest.mark.parametrize(("name", "build"), CASES, ids=[c[0] for c in CASES])
def test_values_are_dalis(ours, dali, name, build, samples):
    mine = ours(samples, lambda x: build(x, fn, types), layout="HWC")
    assert_same(mine, dali(samples, build, layout="HWC"), layout="HWC")


@pytest.mark.parametrize(("name", "build"), CASES[1:2] + CASES[5:], ids=["water", "sphere"])
def test_real_jpegs_are_dalis(ours, dali, images, name, build):
    assert_same(
        ours(images, lambda x: build(x, fn, types), layout="HWC"), dali(images, build, layout="HWC"), layout="HWC"
    )


def test_a_per_sample_mask_passes_samples_through(ours, dali):
    masks = [np.array(0, np.int32), np.array(1, np.int32)]

    def build(x, f, t, mask):
        return f.water(x, mask=mask), f.sphere(x, mask=mask)

    mine = ours(UINT8, lambda x, m: build(x, fn, types, m), layout="HWC", per_sample=[masks])
    for samples, _ in mine:
        np.testing.assert_array_equal(samples[0], UINT8[0])
        assert not np.array_equal(samples[1], UINT8[1])
    assert_same(mine, dali(UINT8, build, layout="HWC", per_sample=[masks]), layout="HWC")


@pytest.mark.parametrize(("name", "build"), CASES, ids=[c[0] for c in CASES])
def test_the_gpu_device_gives_the_cpu_result(ours, name, build):
    cpu = ours(UINT8, lambda x: build(x, fn, types), layout="HWC")
    assert_same(ours(UINT8, lambda x: build(x.gpu(), fn, types), layout="HWC"), cpu, layout="HWC")


@pytest.mark.parametrize("op", ["water", "sphere"])
@pytest.mark.parametrize("sample", [np.zeros((4, 4, 3), np.int16), np.zeros((4, 4), np.uint8)], ids=["int16", "2-D"])
def test_what_is_not_an_image_fails_naming_the_operator(ours, op, sample):
    with pytest.raises(SampleError, match=f"{op}: needs uint8 or float32 HWC images"):
        ours([sample], lambda x: getattr(fn, op)(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interp_type": types.INTERP_CUBIC}, "interp_type must be INTERP_NN or INTERP_LINEAR"),
        ({"mask": 2}, "mask must be 0 or 1"),
        ({"fill_value": "x"}, "fill_value must be a number"),
    ],
)
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, op, kwargs, message):
    with pytest.raises(ArgumentError, match=f"{op}: {message}"):
        ours(UINT8, lambda x: getattr(fn, op)(x, **kwargs), layout="HWC")


def test_a_bad_wave_fails_naming_its_argument(ours):
    with pytest.raises(ArgumentError, match="water: freq_y must be a number"):
        ours(UINT8, lambda x: fn.water(x, freq_y=[1.0]), layout="HWC")
