"""``preemphasis_filter``: ``y[t] = x[t] - coeff * x[t - 1]``, as DALI's operator.

Before the first sample, ``x[-1]`` is ``border``'s: 0 ("zero"), ``x[0]`` ("clamp", the default) or
``x[1]`` ("reflect"). ``preemph_coeff`` may differ per sample (an argument input). The filter runs
in float32 and the result is converted to ``dtype`` (float32 by default; integers rounded and
saturated).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, check_number, register
from ..types import DALIDataType
from .cast import parse_dtype, saturate_cast

_OP = "preemphasis_filter"
BORDERS = ("zero", "clamp", "reflect")


@register
class PreemphasisFilter(Operator):
    """Boost high frequencies of 1-D signals: subtract ``preemph_coeff`` times the previous sample."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("preemph_coeff",))

    def configure(
        self,
        preemph_coeff: float = 0.97,
        border: str = "clamp",
        dtype: DALIDataType | np.dtype | str = DALIDataType.FLOAT,
    ) -> None:
        self.coeff = check_number(_OP, "preemph_coeff", preemph_coeff)
        if border not in BORDERS:
            raise ArgumentError(f"{_OP}: border must be one of {', '.join(BORDERS)}, got {border!r}")
        self.border = border
        self.dtype = parse_dtype(_OP, "dtype", dtype)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return input_layouts[0] if input_layouts else ""

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx) -> Any:
        x = inputs[0]
        if x.ndim != 1:
            raise ValueError(f"{_OP}: expects 1-D signals, got a sample of shape {tuple(x.shape)}")
        coeff = np.float32(as_scalar(args["preemph_coeff"]) if "preemph_coeff" in args else self.coeff)
        signal = x.astype(np.float32)
        out = xp.empty_like(signal)
        if signal.shape[0] == 0:
            return saturate_cast(xp, out, self.dtype, overwrite=True)
        out[1:] = signal[1:] - coeff * signal[:-1]
        if self.border == "zero":
            out[0] = signal[0]
        elif self.border == "clamp" or signal.shape[0] < 2:
            out[0] = signal[0] - coeff * signal[0]
        else:
            out[0] = signal[0] - coeff * signal[1]
        return saturate_cast(xp, out, self.dtype, overwrite=True)
