"""The host's power spectrum of a batch of windowed frames: torch's real FFT or numpy's.

A spectrogram is one real FFT per frame. numpy 2's FFT is slow in float32 (on the dev VM 1.14 ms
for 402 frames of 512 points, against 0.31 ms in float64), and torch's (MKL or pocketfft,
vectorised) takes 0.09 ms in float32, releasing the GIL. torch is used where installed (the
``torch`` extra, as on every training node), numpy in float64 otherwise;
``RAYPIPE_HOST_FFT=numpy`` or ``torch`` chooses. Each CPU-stage thread runs torch with one
intra-op thread (:mod:`raypipe.torch_threads`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .torch_threads import optional_torch, single_threaded

ENV = "RAYPIPE_HOST_FFT"


@cache
def _torch() -> Any | None:
    return optional_torch(ENV, "numpy")


def backend() -> str:
    """``"torch"`` or ``"numpy"``: which library computes host FFTs in this process."""
    return "torch" if _torch() is not None else "numpy"


def power_spectrum(frames: np.ndarray, nfft: int) -> np.ndarray:
    """``|rfft(frame, nfft)|**2`` of each row of the float32 ``frames`` (zero-padded to ``nfft``
    points), as a float32 ``(rows, nfft // 2 + 1)`` array."""
    torch = _torch()
    if torch is None:
        spectrum = np.fft.rfft(frames.astype(np.float64), n=nfft, axis=1)
        out = spectrum.real**2
        out += spectrum.imag**2
        return out.astype(np.float32)
    single_threaded(torch)
    spectrum = torch.fft.rfft(torch.from_numpy(np.ascontiguousarray(frames, dtype=np.float32)), n=nfft, dim=1)
    out = spectrum.real.square()
    out += spectrum.imag.square()
    return out.numpy()
