"""``transpose``: permute the axes of each sample (``perm=[2, 0, 1]`` turns HWC into CHW).

The result is contiguous, so later operators and the batch stacking read it linearly.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register


@register
class Transpose(Operator):
    """Permute sample axes: output axis ``i`` is input axis ``perm[i]``."""

    schema = Schema("transpose", devices=("cpu", "gpu"))

    def configure(
        self, perm: Sequence[int] | None = None, output_layout: str | None = None, transpose_layout: bool = True
    ) -> None:
        """``transpose_layout=False`` copies the input's layout unchanged, as in DALI (``output_layout``,
        when given, wins)."""
        if perm is None:
            raise ArgumentError("transpose: perm is required")
        try:
            items = list(perm)
        except TypeError:
            raise ArgumentError(f"transpose: perm must be a sequence of ints, got {perm!r}") from None
        axes = tuple(int(p) for p in items if isinstance(p, (int, np.integer)) and not isinstance(p, bool))
        if not axes or len(axes) != len(items) or sorted(axes) != list(range(len(axes))):
            raise ArgumentError(f"transpose: perm must be a permutation of 0..n-1, got {perm!r}")
        if output_layout is not None and (not isinstance(output_layout, str) or len(output_layout) != len(axes)):
            raise ArgumentError(
                f"transpose: output_layout must be a string of {len(axes)} axis names, got {output_layout!r}"
            )
        if not isinstance(transpose_layout, (bool, np.bool_)):
            raise ArgumentError(f"transpose: transpose_layout must be a bool, got {transpose_layout!r}")
        self.perm = axes
        self.layout = output_layout
        self.transpose_layout = bool(transpose_layout)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        if self.layout is not None:
            return self.layout
        source = input_layouts[0] if input_layouts else ""
        if not self.transpose_layout:
            return source
        return "".join(source[p] for p in self.perm) if len(source) == len(self.perm) else ""

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        x = inputs[0]
        if x.ndim != len(self.perm):
            raise ValueError(f"transpose: perm {list(self.perm)} needs {len(self.perm)}-D samples, got shape {x.shape}")
        return xp.ascontiguousarray(xp.transpose(x, self.perm))
