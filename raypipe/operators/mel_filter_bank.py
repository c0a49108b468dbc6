"""``mel_filter_bank``: a spectrogram's frequencies summed into triangular mel bands, as DALI's.

The bands' edges are ``nfilter + 2`` points evenly spaced in mel between ``freq_low`` and
``freq_high`` (``sample_rate / 2`` by default), mel being Slaney's scale (linear below 1 kHz,
logarithmic above; librosa's default) or HTK's (``2595 log10(1 + f / 700)``). FFT bin ``k`` lies at
``k * sample_rate / nfft`` Hz, with ``nfft = 2 * (bins - 1)``. With ``normalize`` (the default)
each triangle has unit area (weights times ``2 / (f_right - f_left)``), else unit peak. The weights
are DALI's, applied to the frequency axis (``f`` of the layout; without a layout the first of 1-D
and 2-D samples, the second-last of others), as one matrix product (:class:`MelBank`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .axes import is_int

_OP = "mel_filter_bank"


def hz_to_mel(hz: float, formula: str) -> float:
    """A frequency in mel (Slaney's or HTK's scale)."""
    if formula == "htk":
        return 1127.0 * math.log(1.0 + hz / 700.0)
    return hz / (200.0 / 3.0) if hz < 1000.0 else 15.0 + math.log(hz / 1000.0) / 0.068751777


def mel_to_hz(mel: float, formula: str) -> float:
    """A mel value in Hz (Slaney's or HTK's scale)."""
    if formula == "htk":
        return 700.0 * (math.exp(mel / 1127.0) - 1.0)
    return mel * (200.0 / 3.0) if mel < 15.0 else 1000.0 * math.exp(0.068751777 * (mel - 15.0))


@dataclass(frozen=True)
class MelBank:
    """DALI's filters over ``bins`` FFT bins: bins ``first .. first + len(band) - 1`` each lie in one
    band between two adjacent filter centres (``band``: 0 below the first centre, ``nfilter`` above
    the last); a bin feeds the filter whose centre ends its band with weight ``rising`` and the one
    whose centre starts it with ``falling`` (normalized where asked)."""

    nfilter: int
    bins: int
    first: int
    band: np.ndarray
    rising: np.ndarray
    falling: np.ndarray

    @cached_property
    def matrix(self) -> np.ndarray:
        """The ``(nfilter, bins)`` float32 weights as one matrix (made once per bank). On the host it
        is applied as a matrix product: BLAS runs on one thread in the CPU stage
        (:mod:`raypipe.blas_threads`), where it took 0.08 ms for 402 frames against 0.45 ms for
        sparse sums per band."""
        out = np.zeros((self.nfilter + 2, self.bins), np.float32)
        columns = np.arange(self.first, self.first + self.band.size)
        out[self.band + 1, columns] = self.rising
        out[self.band, columns] = self.falling
        return out[1 : self.nfilter + 1]


@lru_cache(maxsize=32)
def mel_bank(
    nfilter: int, bins: int, sample_rate: float, freq_low: float, freq_high: float, formula: str, normalize: bool
) -> MelBank:
    """DALI's filter bank: each bin between ``freq_low`` and ``freq_high`` weighs into the filters
    whose triangle it is on (its band's two ends)."""
    nfft = 2 * (bins - 1)
    hz_step = sample_rate / nfft
    mel_low, mel_high = hz_to_mel(freq_low, formula), hz_to_mel(freq_high, formula)
    delta = (mel_high - mel_low) / (nfilter + 1)
    first = max(int(math.ceil(freq_low / hz_step)), 0)
    last = min(int(math.floor(freq_high / hz_step)), bins - 1)
    band, falling_edge, norms = [], [], np.ones(nfilter + 2)
    fftbin, mel0 = first, mel_low
    for interval in range(nfilter + 1):
        mel1 = mel_high if interval == nfilter else mel_low + (interval + 1) * delta
        f0, f1 = mel_to_hz(mel0, formula), mel_to_hz(mel1, formula)
        if normalize and interval < nfilter:
            norms[interval + 1] = 2.0 / (mel_to_hz(mel1 + delta, formula) - f0)
        while fftbin <= last and fftbin * hz_step < f1:
            band.append(interval)
            falling_edge.append((f1 - fftbin * hz_step) / (f1 - f0))
            fftbin += 1
        mel0 = mel1
    bands, down = np.asarray(band, np.int64), np.asarray(falling_edge)
    rising = np.where(bands < nfilter, (1.0 - down) * norms[bands + 1], 0.0)
    falling = np.where(bands > 0, down * norms[bands], 0.0)
    return MelBank(nfilter, bins, first, bands, rising.astype(np.float32), falling.astype(np.float32))


def frequency_axis(layout: str, ndim: int) -> int:
    """The frequency axis: ``f`` in ``layout``, else DALI's guess from the rank ("f", "ft", "*ft")."""
    if layout and "f" in layout:
        return layout.index("f")
    return 0 if ndim <= 2 else ndim - 2


@register
class MelFilterBank(Operator):
    """Mel spectrogram from a (power) spectrogram: triangular filters over the frequency axis."""

    schema = Schema(_OP, devices=("cpu", "gpu"))

    def configure(
        self,
        nfilter: int = 128,
        sample_rate: float = 44100.0,
        freq_low: float = 0.0,
        freq_high: float = 0.0,
        mel_formula: str = "slaney",
        normalize: bool = True,
    ) -> None:
        if not is_int(nfilter) or nfilter < 1:
            raise ArgumentError(f"{_OP}: nfilter must be a positive int, got {nfilter!r}")
        self.nfilter = int(nfilter)
        self.sample_rate = check_number(_OP, "sample_rate", sample_rate)
        self.freq_low = check_number(_OP, "freq_low", freq_low)
        high = check_number(_OP, "freq_high", freq_high)
        self.freq_high = high if high > 0 else self.sample_rate / 2
        if self.sample_rate <= 0 or not 0 <= self.freq_low < self.freq_high <= self.sample_rate / 2:
            raise ArgumentError(
                f"{_OP}: need 0 <= freq_low < freq_high <= sample_rate / 2, got {freq_low}, {freq_high}, {sample_rate}"
            )
        if mel_formula not in ("slaney", "htk"):
            raise ArgumentError(f"{_OP}: mel_formula must be 'slaney' or 'htk', got {mel_formula!r}")
        self.formula, self.normalize = mel_formula, bool(normalize)
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return self.layout

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> Any:
        x = inputs[0].astype(np.float32, copy=False)
        axis = frequency_axis(self.layout, x.ndim)
        bands = (self.nfilter, int(x.shape[axis]), self.sample_rate, self.freq_low, self.freq_high)
        bank = mel_bank(*bands, self.formula, self.normalize)
        out = xp.tensordot(xp.asarray(bank.matrix), x, axes=([1], [axis]))
        return xp.ascontiguousarray(xp.moveaxis(out, 0, axis))
