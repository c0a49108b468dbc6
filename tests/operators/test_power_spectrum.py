"""``power_spectrum`` against DALI 2.4's CPU operator where installed: 1-D and 2-D signals along
either axis, ``nfft`` longer and shorter than the signal, power and magnitude (within 1e-6 of the
largest bin: another FFT); a tone's bin checked where DALI is absent; errors name the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(0)
SIGNALS = [RNG.standard_normal(400).astype(np.float32), RNG.standard_normal(257).astype(np.float32)]
FRAMES = [RNG.standard_normal((3, 64)).astype(np.float32), RNG.standard_normal((2, 64)).astype(np.float32)]
CASES = [
    (SIGNALS, "", {}),
    (SIGNALS, "", {"nfft": 512}),
    (SIGNALS, "", {"nfft": 100}),
    (SIGNALS, "", {"power": 1}),
    (FRAMES, "ft", {}),
    (FRAMES, "", {"axis": 1, "nfft": 64}),
    ([RNG.standard_normal((64, 3)).astype(np.float32)] * 2, "", {"axis": 0, "power": 1}),
]


@pytest.mark.parametrize(("samples", "layout", "args"), CASES, ids=range(len(CASES)))
def test_power_spectrum_matches_dali(ours, dali, samples, layout, args):
    mine = ours(samples, lambda x: fn.power_spectrum(x, **args), layout=layout)
    theirs = dali(samples, lambda x, f, t: f.power_spectrum(x, **args), layout=layout)
    assert mine[0][1] == theirs[0][1] == layout
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * np.abs(b).max())


def test_a_tone_lands_in_its_bin(ours):
    tone = [np.cos(2 * np.pi * 8 * np.arange(64) / 64).astype(np.float32)]
    ((power, _),) = ours(tone, lambda x: fn.power_spectrum(x))
    assert power[0].shape == (33,) and int(np.argmax(power[0])) == 8
    np.testing.assert_allclose(power[0][8], 32.0**2, rtol=1e-5)


def test_bad_arguments_and_samples_fail():
    for args, message in (({"power": 3}, "power must be 1"), ({"nfft": 0}, "nfft must be an int of at least 1")):
        pipe = rp.pipeline_def(
            lambda a=args: fn.power_spectrum(fn.zeros(shape=[8], dtype=rp.types.FLOAT), **a),
            batch_size=1,
            device_id=None,
        )()
        with pytest.raises(ArgumentError, match=f"power_spectrum: {message}"):
            pipe.build()


def test_integer_samples_fail_naming_the_sample(ours):
    with pytest.raises(SampleError, match="power_spectrum: the input must be float32") as failed:
        ours([np.zeros(8, np.int16)], lambda x: fn.power_spectrum(x))
    assert "sample 0" in str(failed.value)
