"""``nonsilent_region``: where a 1-D signal's leading and trailing silence end, as DALI's operator.

The short-term power is the mean square over a sliding window of ``window_length`` samples, at each
start from 0 to ``length - window_length``; in dB against ``reference_power`` (the largest
short-term power when 0), it is silence below ``cutoff_db``. The outputs (int32 scalars) are the
first window start above the cut-off and the length from it to the end of the last such window;
0 and 0 when every window is silent. The running sums are float64 prefix sums, where DALI keeps a
float32 running sum recomputed every ``reset_interval`` samples (validated, not needed here). The
result differs where a window's power is within float32 rounding of the cut-off, and where DALI's
rounding leaves a silent stretch after a loud one above the cut-off until its sum is recomputed
(DALI then counts that silence as sound; raypipe does not).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .axes import is_int

_OP = "nonsilent_region"


@register
class NonsilentRegion(Operator):
    """Begin and length of the part of a 1-D signal between its leading and trailing silence."""

    schema = Schema(_OP, devices=("cpu", "gpu"), num_outputs=2)

    def configure(
        self,
        cutoff_db: float = -60.0,
        window_length: int = 2048,
        reference_power: float = 0.0,
        reset_interval: int = 8192,
    ) -> None:
        self.cutoff_db = check_number(_OP, "cutoff_db", cutoff_db)
        self.reference_power = check_number(_OP, "reference_power", reference_power)
        if self.reference_power < 0:
            raise ArgumentError(f"{_OP}: reference_power must not be negative, got {reference_power!r}")
        for name, value in (("window_length", window_length), ("reset_interval", reset_interval)):
            if not is_int(value) or (value < 1 and not (name == "reset_interval" and value == -1)):
                raise ArgumentError(f"{_OP}: {name} must be a positive int, got {value!r}")
        self.window_length = int(window_length)
        if reset_interval != -1 and reset_interval % self.window_length:
            raise ArgumentError(
                f"{_OP}: reset_interval must be a multiple of window_length (as in DALI), got {reset_interval} and "
                f"{window_length}"
            )

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> tuple[Any, Any]:
        x = inputs[0]
        if x.ndim != 1:
            raise ValueError(f"{_OP}: expects 1-D signals, got a sample of shape {tuple(x.shape)}")
        length = int(x.shape[0])
        window = max(1, min(self.window_length, length))
        if length == 0:
            return _scalar(xp, 0), _scalar(xp, 0)
        sums = xp.zeros(length + 1)
        xp.cumsum(xp.square(x.astype(np.float32, copy=False), dtype=np.float64), out=sums[1:])
        energy = sums[window:] - sums[:-window]  # window times the short-term power
        reference = self.reference_power * window if self.reference_power > 0 else energy.max()
        loud = energy >= reference * 10.0 ** (self.cutoff_db / 10.0)
        begin = int(loud.argmax())  # the first loud window (argmax stops at the first True)
        if not bool(loud[begin]):
            return _scalar(xp, 0), _scalar(xp, 0)
        last = int(loud.shape[0]) - 1 - int(loud[::-1].argmax())
        return _scalar(xp, begin), _scalar(xp, last - begin + window)


def _scalar(xp: ModuleType, value: int) -> Any:
    return xp.asarray(value, dtype=np.int32)
