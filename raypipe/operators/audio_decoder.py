"""``decoders.audio``: encoded audio (WAV, FLAC, OGG Vorbis/Opus) to samples, as DALI's decoder.

Decoding is libsndfile's, through ``soundfile`` (the ``audio`` extra): the library DALI itself
decodes with, so integer and float samples are the same. As in DALI, the audio comes out as
``(length, channels)`` (interleaved), or ``(length,)`` with ``downmix`` (the channels' mean); with
``sample_rate`` it is resampled by :mod:`.audio_resampling` (DALI's windowed sinc, ``quality``
choosing its lobes). Without either, the samples are read in ``dtype`` directly; otherwise in float
and converted at the end, scaled to the integer range and saturated (DALI's ``ConvertSatNorm``).
The second output is the sample rate of the result (float32), the target rate where resampled.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, DecodeError
from ..operator import Operator, Schema, as_scalar, check_number, register
from ..types import DALIDataType
from .audio_resampling import lobes_for, resample
from .cast import parse_dtype

AUDIO_TYPES = (np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32))


@dataclass(frozen=True)
class AudioOptions:
    """How to decode: target rate (0: keep the file's), downmix to mono, output type, sinc lobes."""

    sample_rate: float = 0.0
    downmix: bool = False
    dtype: np.dtype = np.dtype(np.float32)
    lobes: int = 16


def audio_options(op: str, sample_rate: Any, downmix: Any, dtype: Any, quality: Any) -> AudioOptions:
    """Validate DALI's decoding arguments (``sample_rate`` a number, or None when an argument input)."""
    rate = 0.0 if sample_rate is None else check_number(op, "sample_rate", sample_rate)
    out = parse_dtype(op, "dtype", dtype)
    if out not in AUDIO_TYPES:
        raise ArgumentError(f"{op}: dtype must be types.INT16, INT32 or FLOAT, got {out}")
    q = check_number(op, "quality", quality)
    if not 0 <= q <= 100:
        raise ArgumentError(f"{op}: quality must be in [0, 100], got {quality!r}")
    return AudioOptions(rate, bool(downmix), out, lobes_for(q))


def _soundfile():
    try:
        import soundfile
    except ImportError:  # pragma: no cover - the audio extra is missing
        raise ImportError("decoding audio needs soundfile: pip install 'raypipe[audio]'") from None
    return soundfile


def to_audio_type(samples: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float samples in [-1, 1] as ``dtype``: integers scaled to their range, rounded and saturated."""
    if dtype.kind == "f":
        return samples.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    scaled = np.rint(samples.astype(np.float64) * info.max)
    return np.clip(scaled, info.min, info.max).astype(dtype)


def decode_audio(data: np.ndarray | bytes, options: AudioOptions, source: str = "sample") -> tuple[np.ndarray, float]:
    """The decoded (and resampled, downmixed) samples of encoded ``data``, and the file's sample rate."""
    sf = _soundfile()
    try:
        with sf.SoundFile(io.BytesIO(memoryview(data))) as f:
            rate, channels = float(f.samplerate), f.channels
            resampling = options.sample_rate > 0 and rate != options.sample_rate
            mixing = options.downmix and channels > 1
            direct = not resampling and not mixing
            samples = f.read(dtype=options.dtype.name if direct else "float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        raise DecodeError(f"decoders.audio: cannot decode {source}: {exc}") from None
    if direct:
        return (samples[:, 0] if options.downmix else samples), rate
    if mixing:
        weight = np.float32(1 / channels)
        mixed = samples[:, 0] * weight
        for c in range(1, channels):
            mixed += samples[:, c] * weight
        samples = mixed[:, None]
    if resampling:
        samples = resample(samples, rate, options.sample_rate, options.lobes)
    out = samples[:, 0] if options.downmix else samples
    return to_audio_type(out, options.dtype), rate


@register
class AudioDecoder(Operator):
    """Decode WAV, FLAC or OGG audio to ``dtype`` samples and their sample rate (float32)."""

    schema = Schema("decoders.audio", devices=("cpu",), num_outputs=2, arg_inputs=("sample_rate",))

    def configure(
        self,
        sample_rate: float | None = 0.0,
        downmix: bool = False,
        dtype: DALIDataType | np.dtype | str = DALIDataType.FLOAT,
        quality: float = 50.0,
    ) -> None:
        self.options = audio_options(self.schema.name, sample_rate, downmix, dtype, quality)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def run_sample(self, inputs, args, ctx):
        options = self.options
        if "sample_rate" in args:
            rate = float(as_scalar(args["sample_rate"]))
            options = AudioOptions(rate, options.downmix, options.dtype, options.lobes)
        samples, rate = decode_audio(inputs[0], options, f"sample {ctx.sample_index}")
        return samples, np.asarray(options.sample_rate if options.sample_rate > 0 else rate, np.float32)
