"""``spectrogram``: the short-time Fourier transform's magnitude or power of a 1-D signal, as DALI's.

Windows of ``window_length`` samples start every ``window_step`` samples; with ``center_windows``
(the default) window ``k`` is centred on sample ``k * window_step`` (``length // window_step + 1``
windows, the signal mirrored or zero-padded beyond its ends per ``reflect_padding``), otherwise only
whole windows inside the signal are taken. Each is multiplied by ``window_fn`` (DALI's Hann window,
``0.5 * (1 - cos(2 pi (t + 0.5) / window_length))``, by default), zero-padded to ``nfft``
(``window_length`` by default) and transformed; the result is ``|X| ** power`` for the
``nfft // 2 + 1`` non-negative frequencies, float32, laid out "ft" (default) or "tf". All windows of
a sample are one strided view of the (padded) signal and one batched FFT (on the host
:func:`raypipe.host_fft.power_spectrum`, torch's where installed).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .. import host_fft
from ..errors import ArgumentError
from ..host_fft import power_spectrum
from ..operator import Operator, Schema, register
from .axes import float_list, is_int

_OP = "spectrogram"


def hann_window(length: int) -> np.ndarray:
    """DALI's Hann window (sampled at half-sample offsets), float32."""
    phase = 2 * np.pi / length * (np.arange(length) + 0.5)
    return (0.5 * (1.0 - np.cos(phase))).astype(np.float32)


def window_starts(length: int, window_length: int, step: int, center: bool) -> np.ndarray:
    """The first sample of each window (negative where a centred window starts before the signal)."""
    if center:
        return np.arange(length // step + 1, dtype=np.int64) * step - window_length // 2
    count = (length - window_length) // step + 1 if length >= window_length else 0
    return np.arange(count, dtype=np.int64) * step


def reflected(indices: np.ndarray, length: int) -> np.ndarray:
    """Indices mirrored into ``[0, length)`` about the signal's first and last samples, repeatedly."""
    if length == 1:
        return np.zeros_like(indices)
    period = 2 * (length - 1)
    folded = np.mod(indices, period)
    return np.where(folded >= length, period - folded, folded)


def _positive_int(name: str, value: Any) -> int:
    """A positive int argument; a float with an integral value is taken too, as DALI takes it
    (``window_length=window_size * sample_rate`` in ASR scripts)."""
    integral = is_int(value) or (isinstance(value, (float, np.floating)) and float(value).is_integer())
    if not integral or value < 1:
        raise ArgumentError(f"{_OP}: {name} must be a positive int, got {value!r}")
    return int(value)


@register
class Spectrogram(Operator):
    """Power (or magnitude) spectrogram of 1-D signals."""

    schema = Schema(_OP, devices=("cpu", "gpu"))

    def preload(self) -> None:
        host_fft.backend()

    def configure(
        self,
        nfft: int | None = None,
        window_length: int = 512,
        window_step: int = 256,
        window_fn: Sequence[float] | None = None,
        power: int = 2,
        center_windows: bool = True,
        reflect_padding: bool = True,
        layout: str = "ft",
    ) -> None:
        self.window_length = _positive_int("window_length", window_length)
        self.window_step = _positive_int("window_step", window_step)
        self.nfft = self.window_length if nfft is None else _positive_int("nfft", nfft)
        if self.nfft < self.window_length:
            raise ArgumentError(f"{_OP}: nfft ({self.nfft}) must be at least window_length ({self.window_length})")
        if window_fn is None:
            self.window = hann_window(self.window_length)
        else:
            values = float_list(_OP, "window_fn", window_fn)
            if len(values) != self.window_length:
                raise ArgumentError(f"{_OP}: window_fn has {len(values)} values, window_length is {window_length}")
            self.window = np.asarray(values, np.float32)
        if power not in (1, 2):
            raise ArgumentError(f"{_OP}: power must be 1 (magnitude) or 2 (power), got {power!r}")
        if layout not in ("ft", "tf"):
            raise ArgumentError(f"{_OP}: layout must be 'ft' or 'tf', got {layout!r}")
        self.power, self.layout = int(power), layout
        self.center, self.reflect = bool(center_windows), bool(reflect_padding)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layout

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> Any:
        x = inputs[0]
        if x.ndim > 2 or (x.ndim == 2 and 1 not in x.shape):
            raise ValueError(f"{_OP}: expects one channel, (n,), (n, 1) or (1, n), got shape {tuple(x.shape)}")
        signal = x.reshape(-1).astype(np.float32, copy=False)
        length, size, step = int(signal.shape[0]), self.window_length, self.window_step
        starts = window_starts(length, size, step, self.center)
        if starts.size == 0:  # as DALI
            raise ValueError(f"{_OP}: a signal of {length} samples is shorter than a window ({size})")
        left = max(0, -int(starts[0]))
        right = max(0, int(starts[-1]) + size - length)
        padded = self._padded(xp, signal, left, right)
        frames = xp.lib.stride_tricks.sliding_window_view(padded, size)[int(starts[0]) + left :: step]
        windowed = frames * xp.asarray(self.window)
        if xp is np:
            out = power_spectrum(windowed, self.nfft)
        else:
            spectrum = xp.fft.rfft(windowed, n=self.nfft, axis=1)
            out = spectrum.real**2
            out += spectrum.imag**2
            out = out.astype(np.float32, copy=False)
        if self.power == 1:
            out = xp.sqrt(out, out=out)
        return xp.ascontiguousarray(out.T if self.layout == "ft" else out)

    def _padded(self, xp: ModuleType, signal: Any, left: int, right: int) -> Any:
        """``signal`` with ``left`` and ``right`` samples beyond its ends: mirrored (DALI's repeated
        reflection about the first and last samples) or zeros."""
        if not left and not right:
            return signal
        if not self.reflect:
            return xp.concatenate([xp.zeros(left, np.float32), signal, xp.zeros(right, np.float32)])
        length = int(signal.shape[0])
        before = xp.asarray(reflected(np.arange(-left, 0), length))
        after = xp.asarray(reflected(np.arange(length, length + right), length))
        return xp.concatenate([signal[before], signal, signal[after]])
