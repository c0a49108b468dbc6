"""``mfcc``: mel-frequency cepstral coefficients, a DCT of a mel spectrogram, as DALI's operator.

The DCT (``dct_type`` 1 to 4, Wikipedia's definitions as DALI's; ``normalize``: an orthonormal
basis, not with type 1) runs along ``axis`` (0 by default: the mel bands of an "ft" spectrogram)
and keeps ``n_mfcc`` coefficients (at most as many as there are values along ``axis``, as DALI);
``lifter > 0`` scales coefficient ``i`` by ``1 + lifter / 2 * sin(pi * (i + 1) / lifter)``. One
float32 ``(n_mfcc, bands)`` matrix product (numpy's einsum on the host, without BLAS threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .axes import is_int

_OP = "mfcc"


@lru_cache(maxsize=32)
def dct_matrix(kind: int, length: int, count: int, normalize: bool, lifter: float) -> np.ndarray:
    """DALI's cosine table of a type-``kind`` DCT: ``(count, length)``, liftered rows, float32."""
    k = np.arange(count, dtype=np.float64)[:, None]
    n = np.arange(length, dtype=np.float64)[None, :]
    if kind == 1:
        table = np.cos(np.pi / (length - 1) * k * n)
        table[:, 0] = 0.5
        table[:, -1] = np.where(np.arange(count) % 2 == 0, 0.5, -0.5)
    elif kind == 2:
        table = np.cos(np.pi / length * (n + 0.5) * k)
        if normalize:
            table *= np.where(k == 0, 1 / np.sqrt(length), np.sqrt(2 / length))
    elif kind == 3:
        table = np.cos(np.pi / length * n * (k + 0.5))
        table[:, 0] = 1 / np.sqrt(length) if normalize else 0.5
        if normalize:
            table[:, 1:] *= np.sqrt(2 / length)
    else:
        table = np.cos(np.pi / length * (n + 0.5) * (k + 0.5)) * (np.sqrt(2 / length) if normalize else 1.0)
    if lifter > 0:
        table *= (1 + lifter / 2 * np.sin(np.pi * (k + 1) / lifter)).reshape(-1, 1)
    return table.astype(np.float32)


@register
class MFCC(Operator):
    """Cepstral coefficients of mel spectrograms along ``axis``."""

    schema = Schema(_OP, devices=("cpu", "gpu"))

    def configure(
        self, n_mfcc: int = 20, dct_type: int = 2, normalize: bool = False, lifter: float = 0.0, axis: int = 0
    ) -> None:
        if not is_int(n_mfcc) or n_mfcc < 1:
            raise ArgumentError(f"{_OP}: n_mfcc must be a positive int, got {n_mfcc!r}")
        if dct_type not in (1, 2, 3, 4):
            raise ArgumentError(f"{_OP}: dct_type must be 1, 2, 3 or 4, got {dct_type!r}")
        if dct_type == 1 and normalize:
            raise ArgumentError(f"{_OP}: normalize is not supported with dct_type=1 (as in DALI)")
        if not is_int(axis) or axis < 0:
            raise ArgumentError(f"{_OP}: axis must be a non-negative int, got {axis!r}")
        self.n_mfcc, self.dct_type, self.normalize, self.axis = int(n_mfcc), int(dct_type), bool(normalize), int(axis)
        self.lifter = check_number(_OP, "lifter", lifter)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return input_layouts[0] if input_layouts else ""

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> Any:
        x = inputs[0].astype(np.float32)
        if self.axis >= x.ndim:
            raise ValueError(f"{_OP}: axis {self.axis} is outside the {x.ndim}-D samples")
        length = int(x.shape[self.axis])
        if self.dct_type == 1 and length < 2:
            raise ValueError(f"{_OP}: dct_type=1 needs at least 2 values along axis {self.axis}")
        table = dct_matrix(self.dct_type, length, min(self.n_mfcc, length), self.normalize, self.lifter)
        if xp is np:  # numpy's own loops: BLAS threads would contend with the CPU stage's
            out = np.einsum("kn,n...->k...", table, np.moveaxis(x, self.axis, 0))
        else:
            out = xp.tensordot(xp.asarray(table), x, axes=([1], [self.axis]))
        return xp.ascontiguousarray(xp.moveaxis(out, 0, self.axis))
