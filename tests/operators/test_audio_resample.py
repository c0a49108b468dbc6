"""``audio_resample`` against DALI 2.4's CPU operator where installed: rates, scales and output
lengths (per sample too), qualities 0 to 100, mono and multi-channel float audio, integer audio in
its own type and converted to others; bad arguments fail when the pipeline is built.

Float results agree within 1e-5 of full scale (float32 sums taken in another order), integers within
1 (a tie rounded the other way after such a sum)."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(0)
MONO = [RNG.standard_normal(5000).astype(np.float32) * 0.3, RNG.standard_normal(3001).astype(np.float32) * 0.3]
STEREO = [
    RNG.standard_normal((2000, 2)).astype(np.float32) * 0.3,
    RNG.standard_normal((1501, 2)).astype(np.float32) * 0.3,
]
INT16 = [(s * 10000).astype(np.int16) for s in MONO]
UINT8 = [(s * 100 + 128).clip(0, 255).astype(np.uint8) for s in MONO]

CASES = [
    ("44.1 to 16 kHz", MONO, {"in_rate": 44100, "out_rate": 16000}),
    ("upsampled, quality 100", MONO, {"in_rate": 16000, "out_rate": 44100, "quality": 100}),
    ("scale, quality 0", MONO, {"scale": 0.37, "quality": 0}),
    ("scale of a third", MONO, {"scale": 1 / 3}),
    ("out_length, quality 10", MONO, {"out_length": 1234, "quality": 10}),
    ("stereo", STEREO, {"in_rate": 8000, "out_rate": 11025}),
    ("int16", INT16, {"in_rate": 44100, "out_rate": 16000}),
    ("int16 to float", INT16, {"in_rate": 44100, "out_rate": 16000, "dtype": "FLOAT"}),
    ("uint8", UINT8, {"scale": 1.7}),
    ("uint8 to int16", UINT8, {"scale": 1.7, "dtype": "INT16"}),
    ("uint8 to float", UINT8, {"scale": 1.7, "dtype": "FLOAT"}),
    ("float to int16", MONO, {"scale": 0.37, "dtype": "INT16"}),
    ("float to uint8", MONO, {"scale": 0.37, "dtype": "UINT8"}),
]


def _build(args: dict):
    def build(x, f, t, *rates):
        typed = {k: getattr(t, v) if k == "dtype" else v for k, v in args.items()}
        return f.audio_resample(x, **typed, **dict(zip(("in_rate", "out_rate"), rates)))

    return build


def _close(mine, theirs, unsigned_ends: int = 0) -> None:
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
        else:
            inside = slice(unsigned_ends, len(a) - unsigned_ends)
            assert np.abs(a[inside].astype(np.int64) - b[inside].astype(np.int64)).max() <= 1


@pytest.mark.parametrize(("name", "samples", "args"), CASES, ids=[c[0] for c in CASES])
def test_audio_resample_matches_dali(ours, dali, name, samples, args):
    build = _build(args)
    mine = ours(samples, lambda x: build(x, fn, types))
    theirs = dali(samples, build)
    # DALI's first and last outputs of an unsigned type it converts to differ (see the module)
    _close(mine, theirs, unsigned_ends=8 if name == "float to uint8" else 0)


def test_rates_per_sample_match_dali(ours, dali):
    rates = [np.array(44100, np.float32), np.array(22050, np.float32)], [np.array(16000, np.float32)] * 2
    mine = ours(MONO, lambda x, i, o: _build({})(x, fn, types, i, o), per_sample=rates)
    assert [len(s) for s in mine[0][0]] == [int(np.ceil(5000 * 16000 / 44100)), int(np.ceil(3001 * 16000 / 22050))]
    _close(mine, dali(MONO, _build({}), per_sample=rates))


def test_a_tone_keeps_its_frequency(ours):
    """A 1 kHz tone resampled from 48 to 16 kHz is the same tone (where DALI is absent too)."""
    t = np.arange(4800) / 48000
    tone = [np.sin(2 * np.pi * 1000 * t).astype(np.float32)] * 2
    ((out, _),) = ours(tone, lambda x: fn.audio_resample(x, in_rate=48000, out_rate=16000))
    want = np.sin(2 * np.pi * 1000 * np.arange(1600) / 16000)
    assert out[0].shape == (1600,) and np.abs(out[0][100:-100] - want[100:-100]).max() < 1e-3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"scale": 2.0, "out_length": 10}, "give in_rate and out_rate, or scale, or out_length"),
        ({}, "the ratio is missing"),
        ({"in_rate": 16000}, "in_rate and out_rate go together"),
        ({"scale": 2.0, "quality": 101}, r"quality must be in \[0, 100\]"),
        ({"scale": 2.0, "dtype": types.BOOL}, "dtype must be a numeric type"),
        ({"scale": "x"}, "scale must be a number"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(args, message):
    pipe = rp.pipeline_def(
        lambda: fn.audio_resample(fn.zeros(shape=[8], dtype=types.FLOAT), **args), batch_size=1, device_id=None
    )()
    with pytest.raises(ArgumentError, match=f"audio_resample: {message}"):
        pipe.build()


def test_audio_of_another_shape_fails_naming_the_sample(ours):
    with pytest.raises(
        SampleError, match=r"audio_resample: audio must be .* got float32 of shape \(2, 2, 2\)"
    ) as failed:
        ours([np.zeros((2, 2, 2), np.float32)], lambda x: fn.audio_resample(x, scale=2.0))
    assert "sample 0" in str(failed.value)
