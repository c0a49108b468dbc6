"""decoders.audio: WAV, FLAC and OGG speech-like files decoded against DALI 2.4's CPU decoder
(dtypes, downmix, resampling at a fixed or per-sample rate, quality), and against soundfile and an
analytic sine without DALI.

Tolerances: both decode with libsndfile, so without resampling WAV and FLAC samples are equal; OGG
Vorbis, decoded by DALI's own libvorbis build, within the resampled bounds below. Resampled,
raypipe's windowed sinc is DALI's (same taps and table) but weighs all of an output's taps with the
first tap's table fraction where DALI rounds each tap's in float32, and sums in another order: float
results within 2e-6 of full scale (under 1e-6 measured), int16 within 1 LSB, int32 within
2**31 * 2e-6."""

from __future__ import annotations

import io

import numpy as np
import pytest

from raypipe import fn, ops, types
from raypipe.errors import ArgumentError
from raypipe.operators.audio_resampling import lobes_for, resampled_length
from tests.audio_data import FILES, write, write_files


@pytest.fixture(scope="module")
def encoded(tmp_path_factory) -> dict[str, np.ndarray]:
    paths = write_files(str(tmp_path_factory.mktemp("audio")))
    return {name: np.fromfile(path, np.uint8) for name, path in paths.items()}


def assert_close(got: np.ndarray, expected: np.ndarray, exact: bool) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(got, expected)
        return
    scale = float(np.iinfo(got.dtype).max) if got.dtype.kind == "i" else 1.0
    bound = 1.0 if got.dtype == np.int16 else 2e-6 * scale
    assert np.abs(got.astype(np.float64) - expected.astype(np.float64)).max() <= bound


# (id, decoder arguments: a function of types)
CASES = [
    ("default", lambda t: {}),
    ("int16", lambda t: {"dtype": t.INT16}),
    ("int32-downmix", lambda t: {"dtype": t.INT32, "downmix": True}),
    ("downmix-16k", lambda t: {"downmix": True, "sample_rate": 16000}),
    ("48k-int16", lambda t: {"sample_rate": 48000.0, "dtype": t.INT16}),
    ("12k-int32-q80", lambda t: {"sample_rate": 12000, "dtype": t.INT32, "quality": 80}),
    ("11k-q0", lambda t: {"sample_rate": 11025, "downmix": True, "quality": 0}),
]


@pytest.mark.parametrize("case, kwargs", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, encoded, case, kwargs):
    samples = list(encoded.values())
    theirs = dali(samples, lambda x, fn, types: tuple(fn.decoders.audio(x, **kwargs(types))))
    mine = ours(samples, lambda x: fn.decoders.audio(x, **kwargs(types)))
    resampled = "sample_rate" in kwargs(types)
    (their_audio, their_layout), (their_rates, _) = theirs
    (my_audio, my_layout), (my_rates, _) = mine
    assert my_layout == their_layout == ""
    for name, got, expected in zip(encoded, my_audio, their_audio, strict=True):
        rate = FILES[name][2]
        exact = not name.endswith(".ogg") and not (resampled and kwargs(types)["sample_rate"] != rate)
        assert_close(got, expected, exact)
    for got, expected in zip(my_rates, their_rates, strict=True):
        assert got.dtype == expected.dtype == np.float32 and got.shape == expected.shape == ()
        assert got == expected


def test_per_sample_rates_against_dali(ours, dali, encoded):
    samples = list(encoded.values())
    rates = [np.float32(r) for r in (16000, 15200, 17600, 8000, 16000)]
    theirs = dali(
        samples, lambda x, fn, types, r: tuple(fn.decoders.audio(x, sample_rate=r, downmix=True)), per_sample=[rates]
    )
    mine = ours(samples, lambda x, r: fn.decoders.audio(x, sample_rate=r, downmix=True), per_sample=[rates])
    for got, expected in zip(mine[0][0], theirs[0][0], strict=True):
        assert_close(got, expected, exact=False)
    assert [float(r) for r in mine[1][0]] == [float(r) for r in theirs[1][0]] == [float(r) for r in rates]


def test_samples_are_soundfiles(ours, encoded):
    import soundfile

    (audio, _), (rates, _) = ours(list(encoded.values()), lambda x: fn.decoders.audio(x, dtype=types.INT16))
    for name, got, rate in zip(encoded, audio, rates, strict=True):
        expected, file_rate = soundfile.read(io.BytesIO(encoded[name].tobytes()), dtype="int16", always_2d=True)
        np.testing.assert_array_equal(got, expected)
        assert rate == file_rate == FILES[name][2]


def test_resampling_keeps_a_sine(ours, tmp_path):
    rate, target, freq = 44100, 16000, 440.0
    t = np.arange(rate) / rate
    path = str(tmp_path / "sine.wav")
    write(path, 0.5 * np.sin(2 * np.pi * freq * t), rate, "WAV", "FLOAT")
    data = np.fromfile(path, np.uint8)
    (audio, _), (rates, _) = ours([data], lambda x: fn.decoders.audio(x, sample_rate=target, downmix=True))
    got = audio[0]
    assert got.shape == (resampled_length(rate, rate, target),) and float(rates[0]) == target
    expected = 0.5 * np.sin(2 * np.pi * freq * np.arange(got.size) / target)
    inner = slice(100, -100)  # away from the edges, where the filter meets the signal's ends
    assert np.abs(got[inner] - expected[inner]).max() < 2e-3


def test_quality_gives_dalis_lobes():
    assert [lobes_for(q) for q in (0, 50, 100)] == [3, 16, 64]


def test_old_names_and_errors(ours, encoded):
    data = [encoded["mono16k.wav"]]
    (a, _), _ = ours(data, lambda x: ops.AudioDecoder(dtype=types.INT16)(x))
    (b, _), _ = ours(data, lambda x: fn.audio_decoder(x, dtype=types.INT16))
    np.testing.assert_array_equal(a[0], b[0])
    assert ops.AudioDecoder is ops.decoders.Audio
    with pytest.raises(ArgumentError, match="dtype must be types.INT16, INT32 or FLOAT"):
        ours(data, lambda x: fn.decoders.audio(x, dtype=types.UINT8))
    with pytest.raises(ArgumentError, match="quality"):
        ours(data, lambda x: fn.decoders.audio(x, quality=101))
    with pytest.raises(Exception, match="cannot decode"):
        ours([np.frombuffer(b"RIFF not audio at all", np.uint8)], lambda x: fn.decoders.audio(x))
