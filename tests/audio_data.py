"""Speech-like test audio written with soundfile: voiced segments (a 120-220 Hz fundamental with
formant-shaped harmonics, amplitude-modulated at syllable rate) between stretches of silence, over a
faint noise floor, as WAV, FLAC or OGG files of a given sample rate and channel count."""

from __future__ import annotations

import os

import numpy as np


def speech_like(rate: int, seconds: float, seed: int, channels: int = 1) -> np.ndarray:
    """``(length, channels)`` float samples in [-1, 1]: silence, a voiced stretch, silence."""
    rng = np.random.default_rng(seed)
    length = int(rate * seconds)
    t = np.arange(length) / rate
    pitch = 120 + 100 * rng.random()
    voiced = sum(
        np.sin(2 * np.pi * pitch * h * t + rng.random() * 6.28) / h for h in range(1, 12) if pitch * h < rate / 2
    )
    syllables = 0.5 * (1 - np.cos(2 * np.pi * (3 + 2 * rng.random()) * t))
    envelope = ((t > 0.2 * seconds) & (t < 0.8 * seconds)).astype(np.float64) * syllables
    mono = 0.25 * voiced * envelope + 1e-3 * rng.standard_normal(length)
    gains = np.linspace(1.0, 0.6, channels)
    return np.clip(mono[:, None] * gains[None, :], -1, 1)


#: name -> (format, subtype, sample rate, seconds, channels)
FILES = {
    "mono16k.wav": ("WAV", "PCM_16", 16000, 1.3, 1),
    "stereo22k.wav": ("WAV", "PCM_16", 22050, 0.9, 2),
    "mono44k.flac": ("FLAC", "PCM_16", 44100, 0.7, 1),
    "stereo8k.flac": ("FLAC", "PCM_24", 8000, 1.6, 2),
    "mono16k.ogg": ("OGG", "VORBIS", 16000, 1.1, 1),
}


def write_files(folder: str, names: tuple[str, ...] = tuple(FILES)) -> dict[str, str]:
    """Write the :data:`FILES` named ``names`` into ``folder``; their paths by name."""
    paths = {}
    for seed, name in enumerate(names):
        fmt, subtype, rate, seconds, channels = FILES[name]
        path = os.path.join(folder, name)
        write(path, speech_like(rate, seconds, seed, channels), rate, fmt, subtype)
        paths[name] = path
    return paths


def write(path: str, samples: np.ndarray, rate: int, fmt: str = "WAV", subtype: str = "PCM_16") -> None:
    """``samples`` as an audio file at ``path``."""
    import soundfile

    soundfile.write(path, samples, rate, format=fmt, subtype=subtype)
