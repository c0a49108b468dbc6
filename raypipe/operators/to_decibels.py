"""``to_decibels``: ``multiplier * log10(max(min_ratio, x / reference))``, as DALI's operator.

``min_ratio`` is ``10 ** (cutoff_db / multiplier)``; ``reference`` is the sample's largest value when
not given (0), and a sample that is all zeros then comes out as ``cutoff_db`` everywhere. Float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register

_OP = "to_decibels"


@register
class ToDecibels(Operator):
    """Magnitudes (or powers) in decibels against a reference, saturated below ``cutoff_db``."""

    schema = Schema(_OP, devices=("cpu", "gpu"))

    def configure(self, multiplier: float = 10.0, reference: float = 0.0, cutoff_db: float = -200.0) -> None:
        self.multiplier = check_number(_OP, "multiplier", multiplier)
        self.reference = check_number(_OP, "reference", reference)
        self.cutoff_db = check_number(_OP, "cutoff_db", cutoff_db)
        if self.multiplier == 0 or self.reference < 0:
            raise ArgumentError(
                f"{_OP}: multiplier must not be 0 nor reference negative, got {multiplier}, {reference}"
            )

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return input_layouts[0] if input_layouts else ""

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> Any:
        x = inputs[0].astype(np.float32)
        min_ratio = np.float32(10.0 ** (self.cutoff_db / self.multiplier))
        reference = np.float32(self.reference) if self.reference > 0 else (x.max() if x.size else np.float32(0))
        if not reference > 0:
            ratio = xp.full(x.shape, min_ratio, np.float32)
        else:
            ratio = xp.maximum(x * np.float32(1 / float(reference)), min_ratio)
        return (np.float32(self.multiplier) * xp.log10(ratio)).astype(np.float32)
