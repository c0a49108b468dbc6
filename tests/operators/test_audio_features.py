"""Speech features against DALI 2.4's CPU operators on speech-like signals (voiced stretches between
silences over a faint noise floor), on device="cpu" and "gpu" (the host path where there is no GPU):
preemphasis_filter, nonsilent_region, spectrogram, mel_filter_bank, to_decibels and mfcc, each with
its arguments; and against their definitions without DALI.

Tolerances: float32 throughout, as DALI, with another FFT (numpy's pocketfft against DALI's) and
other summation orders: spectrograms and mel spectrograms within 1e-5 of the sample's largest value;
decibels within 1e-3 dB; MFCCs within 1e-4 of the sample's largest coefficient; the preemphasis
filter and nonsilent regions equal."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, ops
from raypipe.errors import ArgumentError
from raypipe.operators.mel_filter_bank import hz_to_mel, mel_bank
from raypipe.operators.spectrogram import hann_window
from tests.audio_data import speech_like


@pytest.fixture(scope="module")
def signals() -> list[np.ndarray]:
    """Three 16 kHz mono signals of different lengths, float32, and two short ones: 900 samples (less
    than nonsilent_region's window) and 150 (less than half a spectrogram window: mirrored again)."""
    out = [speech_like(16000, s, seed)[:, 0].astype(np.float32) for seed, s in enumerate((1.0, 0.61, 1.37))]
    return out + [out[0][3000:3900].copy(), out[0][6000:6150].copy()]


def _spec(x, fn, **kwargs):
    return fn.spectrogram(x, nfft=512, window_length=400, window_step=160, **kwargs)


def _mel(x, fn, **kwargs):
    return fn.mel_filter_bank(_spec(x, fn), sample_rate=16000, nfilter=64, **kwargs)


# (id, kind of comparison, build(x, fn))
CASES = [
    ("preemphasis", "equal", lambda x, fn: fn.preemphasis_filter(x)),
    ("preemphasis-zero", "equal", lambda x, fn: fn.preemphasis_filter(x, border="zero", preemph_coeff=0.5)),
    ("preemphasis-reflect", "equal", lambda x, fn: fn.preemphasis_filter(x, border="reflect", preemph_coeff=0.9)),
    ("nonsilent", "equal", lambda x, fn: tuple(fn.nonsilent_region(x))),
    ("nonsilent-args", "equal", lambda x, fn: tuple(fn.nonsilent_region(x, cutoff_db=-25, window_length=256))),
    ("nonsilent-reference", "equal", lambda x, fn: tuple(fn.nonsilent_region(x, reference_power=0.01, cutoff_db=-30))),
    ("spectrogram", "scaled", lambda x, fn: _spec(x, fn)),
    ("spectrogram-default", "scaled", lambda x, fn: fn.spectrogram(x)),
    (
        "spectrogram-uncentred",
        "scaled",
        lambda x, fn: _spec(x, fn, center_windows=False, power=1, layout="tf"),
    ),
    ("spectrogram-zero-padding", "scaled", lambda x, fn: _spec(x, fn, reflect_padding=False)),
    (
        "spectrogram-window-fn",
        "scaled",
        lambda x, fn: fn.spectrogram(x, nfft=256, window_length=200, window_step=80, window_fn=list(np.hamming(200))),
    ),
    ("mel", "scaled", lambda x, fn: _mel(x, fn)),
    (
        "mel-htk",
        "scaled",
        lambda x, fn: fn.mel_filter_bank(
            _spec(x, fn, layout="tf"),
            sample_rate=16000,
            nfilter=40,
            mel_formula="htk",
            normalize=False,
            freq_low=100,
            freq_high=7000,
        ),
    ),
    ("decibels", "db", lambda x, fn: fn.to_decibels(_mel(x, fn))),
    (
        "decibels-log",
        "db",
        lambda x, fn: fn.to_decibels(_mel(x, fn), multiplier=np.log(10), reference=1.0, cutoff_db=np.log(1e-20)),
    ),
    ("decibels-cutoff", "db", lambda x, fn: fn.to_decibels(_spec(x, fn, power=1), multiplier=20, cutoff_db=-60)),
    ("mfcc", "scaled4", lambda x, fn: fn.mfcc(fn.to_decibels(_mel(x, fn)), n_mfcc=13)),
    ("mfcc-ortho-lifter", "scaled4", lambda x, fn: fn.mfcc(fn.to_decibels(_mel(x, fn)), normalize=True, lifter=22)),
    ("mfcc-type1-axis1", "scaled4", lambda x, fn: fn.mfcc(fn.to_decibels(_mel(x, fn)), n_mfcc=10, dct_type=1, axis=1)),
    (
        "mfcc-type3",
        "scaled4",
        lambda x, fn: fn.mfcc(fn.to_decibels(_mel(x, fn)), n_mfcc=12, dct_type=3, normalize=True),
    ),
    ("mfcc-type4", "scaled4", lambda x, fn: fn.mfcc(fn.to_decibels(_mel(x, fn)), n_mfcc=12, dct_type=4)),
]
RUNS = [(d, *c) for c in CASES for d in ("cpu", "gpu")]
# DALI refuses these on the 150-sample signal (no whole window; a DCT-I of one window), as raypipe does
NOT_SHORT = {"spectrogram-uncentred", "mfcc-type1-axis1"}


def assert_matches(kind: str, got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if kind == "equal":
        np.testing.assert_array_equal(got, expected)
        return
    diff = np.abs(got.astype(np.float64) - expected)
    if kind == "db":
        assert diff.max() <= 1e-3
    else:
        assert diff.max() <= (1e-5 if kind == "scaled" else 1e-4) * np.abs(expected).max()


@pytest.mark.parametrize("device, case, kind, build", RUNS, ids=[f"{r[1]}-{r[0]}" for r in RUNS])
def test_against_dali(ours, dali, signals, device, case, kind, build):
    if case in NOT_SHORT:
        signals = signals[:4]
    theirs = dali(signals, lambda x, fn, types: build(x, fn))
    mine = ours(signals, lambda x: build(x.gpu() if device == "gpu" else x, fn))
    assert len(mine) == len(theirs)
    for (my_samples, my_layout), (their_samples, their_layout) in zip(mine, theirs, strict=True):
        assert my_layout == their_layout
        for got, expected in zip(my_samples, their_samples, strict=True):
            assert_matches(kind, got, expected)


def test_spectrogram_of_a_tone_peaks_at_its_bin(ours):
    rate, freq, nfft = 16000, 1000.0, 512
    tone = np.sin(2 * np.pi * freq * np.arange(rate) / rate).astype(np.float32)
    ((spec, layout),) = ours([tone], lambda x: fn.spectrogram(x, nfft=nfft, window_length=nfft, window_step=128))
    assert layout == "ft" and spec[0].shape == (nfft // 2 + 1, rate // 128 + 1)
    assert set(np.argmax(spec[0][:, 4:-4], axis=0)) == {round(freq * nfft / rate)}
    # Parseval on an inner window: the power spectrum's total is nfft times the windowed energy
    frame = tone[64 * 128 - nfft // 2 : 64 * 128 + nfft // 2] * hann_window(nfft)
    full = spec[0][:, 64].sum() * 2 - spec[0][0, 64] - spec[0][-1, 64]
    assert abs(full - nfft * np.sum(frame.astype(np.float64) ** 2)) < 1e-3 * full


def test_mel_filters_are_triangles():
    peaks = mel_bank(20, 257, 16000.0, 0.0, 8000.0, "slaney", False).matrix
    assert peaks.shape == (20, 257) and peaks.max() <= 1.0 and np.all(peaks >= 0)
    assert np.all(np.count_nonzero(peaks, axis=0)[1:-1] <= 2), "each bin feeds at most two adjacent bands"
    bank = mel_bank(20, 257, 16000.0, 0.0, 8000.0, "slaney", True)
    areas = bank.matrix.sum(axis=1) * (16000 / 512)
    np.testing.assert_allclose(areas, 1.0, rtol=0.15)  # unit area, sampled at the FFT bins
    assert bank.matrix is bank.matrix  # made once per bank
    assert hz_to_mel(1000.0, "slaney") == pytest.approx(15.0) and hz_to_mel(1000.0, "htk") == pytest.approx(
        1000.0, 0.01
    )


def test_definitions_without_dali(ours, signals):
    x = signals[1]
    (pre, _), (db, _), (mfcc, _), (begin, _), (length, _) = ours(
        [x],
        lambda s: (
            fn.preemphasis_filter(s, preemph_coeff=0.9),
            fn.to_decibels(s * s + 1e-3, multiplier=20.0, reference=2.0),
            fn.mfcc(fn.reshape(s[:640], shape=[64, 10]), n_mfcc=5, normalize=True),
            *fn.nonsilent_region(s, cutoff_db=-40, window_length=400, reset_interval=-1),
        ),
    )
    np.testing.assert_allclose(pre[0][1:], x[1:] - np.float32(0.9) * x[:-1], rtol=1e-6)
    assert pre[0][0] == pytest.approx(x[0] * 0.1)
    np.testing.assert_allclose(db[0], 20 * np.log10((x.astype(np.float64) ** 2 + 1e-3) / 2.0), atol=1e-4)
    bands = x[:640].reshape(64, 10).astype(np.float64)
    n = np.arange(64)
    basis = np.array(
        [np.cos(np.pi / 64 * (n + 0.5) * k) * (np.sqrt(1 / 64) if k == 0 else np.sqrt(2 / 64)) for k in range(5)]
    )
    np.testing.assert_allclose(mfcc[0], basis @ bands, atol=1e-5)
    power = np.convolve(x.astype(np.float64) ** 2, np.ones(400) / 400, mode="valid")
    loud = np.flatnonzero(power >= power.max() * 1e-4)
    assert (int(begin[0]), int(length[0])) == (loud[0], loud[-1] - loud[0] + 400)
    assert 0.1 * x.size < begin[0] < 0.3 * x.size, "the voiced stretch starts after a fifth of the signal"


def test_old_class_names_and_errors(ours, signals):
    assert ops.MFCC.__name__ == "MFCC" and ops.MFCC is ops.MFCC
    for name in ("PreemphasisFilter", "Spectrogram", "MelFilterBank", "ToDecibels", "NonsilentRegion", "MFCC"):
        assert name in dir(ops)
    ((a, _),) = ours(
        signals[:1], lambda x: ops.MFCC(n_mfcc=4)(ops.MelFilterBank(sample_rate=16000)(ops.Spectrogram()(x)))
    )
    ((b, _),) = ours(signals[:1], lambda x: fn.mfcc(fn.mel_filter_bank(fn.spectrogram(x), sample_rate=16000), n_mfcc=4))
    np.testing.assert_array_equal(a[0], b[0])
    for build, message in (
        (lambda x: fn.spectrogram(x, nfft=100, window_length=200), "nfft"),
        (lambda x: fn.spectrogram(x, power=3), "power"),
        (lambda x: fn.mel_filter_bank(fn.spectrogram(x), sample_rate=16000, freq_high=9000), "freq_high"),
        (lambda x: fn.mfcc(x, dct_type=1, normalize=True), "dct_type=1"),
        (lambda x: fn.preemphasis_filter(x, border="wrap"), "border"),
        (lambda x: fn.nonsilent_region(x, window_length=0), "window_length"),
        (lambda x: fn.nonsilent_region(x, window_length=400), "reset_interval must be a multiple of window_length"),
    ):
        with pytest.raises(ArgumentError, match=message):
            ours(signals[:1], build)
    with pytest.raises(Exception, match="shorter than a window"):
        ours(signals[4:], lambda x: fn.spectrogram(x, window_length=400, center_windows=False))
    with pytest.raises(Exception, match="dct_type=1 needs at least 2"):
        ours(signals[4:], lambda x: fn.mfcc(fn.spectrogram(x, window_length=400), dct_type=1, axis=1))
