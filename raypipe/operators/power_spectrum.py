"""``power_spectrum``: the power (``power=2``) or magnitude (``power=1``) of the real FFT of each
sample along ``axis``, ``nfft // 2 + 1`` bins (the signal zero-padded or cut to ``nfft`` points, its
length along the axis by default), as DALI's CPU operator. The FFT is the spectrogram's
(:func:`raypipe.host_fft.power_spectrum`: torch's where installed).
"""

from __future__ import annotations

import numpy as np

from .. import host_fft
from ..backend import to_host
from ..errors import ArgumentError
from ..host_fft import power_spectrum
from ..operator import Operator, Schema, register

OP = "power_spectrum"


def _int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or int(value) < low:
        raise ArgumentError(f"{OP}: {name} must be an int of at least {low}, got {value!r}")
    return int(value)


@register
class PowerSpectrum(Operator):
    """Each sample's spectrum along ``axis`` (float32)."""

    schema = Schema(OP, devices=("cpu",))

    def preload(self) -> None:
        host_fft.backend()

    def configure(self, axis: int = -1, nfft=None, power: int = 2) -> None:
        if isinstance(axis, bool) or not float(axis).is_integer():
            raise ArgumentError(f"{OP}: axis must be an int, got {axis!r}")
        self.axis = int(axis)
        self.nfft = None if nfft is None else _int("nfft", nfft, 1)
        if power not in (1, 2) or isinstance(power, bool):
            raise ArgumentError(f"{OP}: power must be 1 (magnitude) or 2 (power), got {power!r}")
        self.power = int(power)

    def compute(self, xp, inputs, args, ctx):
        signal = to_host(inputs[0])
        if signal.dtype != np.float32 or signal.ndim == 0:
            raise ValueError(
                f"{OP}: the input must be float32 with at least one axis (as DALI's), "
                f"got {signal.dtype} of shape {signal.shape}"
            )
        if not -signal.ndim <= self.axis < signal.ndim:
            raise ValueError(f"{OP}: axis {self.axis} is outside the sample's {signal.ndim} axes")
        moved = np.moveaxis(signal, self.axis, -1)
        nfft = self.nfft or moved.shape[-1]
        rows = moved.reshape(-1, moved.shape[-1])
        spectrum = power_spectrum(rows, nfft).reshape(*moved.shape[:-1], nfft // 2 + 1)
        if self.power == 1:
            spectrum = np.sqrt(spectrum)
        return np.moveaxis(spectrum, -1, self.axis)
