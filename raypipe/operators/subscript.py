"""``_subscript``: ``x[...]`` on pipeline data, per sample, as DALI's ``_tensor_subscript``.

Subscript ``i`` of ``num_subscripts`` is an index ``at_i`` (listed in ``indices``; removes the axis; negative counts
from the end; out of range is an error) or a slice ``lo_i:hi_i:step_i`` (Python's bounds: clamped
to the extent, negative from the end; a step of 0 is an error); every bound may be a per-sample
argument input (a 0-d integer). Axes after the last subscript are kept whole; more subscripts
than the sample has axes is an error. ``DataNode.__getitem__`` (:mod:`raypipe.subscript`) builds it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register

#: Subscripts an ``x[...]`` may hold (DALI's subscript has no fixed limit; 8 covers every layout).
MAX_SUBSCRIPTS = 8
PARTS = ("at", "lo", "hi", "step")
NAMES = tuple(f"{part}_{i}" for i in range(MAX_SUBSCRIPTS) for part in PARTS)


@register
class Subscript(Operator):
    """Index and slice each sample: ``at_i`` or ``lo_i``/``hi_i``/``step_i`` for subscript ``i``."""

    schema = Schema("_subscript", devices=("cpu", "gpu"), arg_inputs=NAMES)

    def configure(self, num_subscripts: int = 0, indices: Sequence[int] = (), **bounds: Any) -> None:
        if isinstance(num_subscripts, bool) or not isinstance(num_subscripts, int):
            raise ArgumentError(f"subscript: num_subscripts must be an int, got {num_subscripts!r}")
        if not 0 <= num_subscripts <= MAX_SUBSCRIPTS:
            raise ArgumentError(f"subscript: at most {MAX_SUBSCRIPTS} subscripts, got {num_subscripts}")
        unknown = sorted(set(bounds) - set(NAMES))
        if unknown:
            raise TypeError(f"unexpected arguments {unknown}")
        for name, value in bounds.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ArgumentError(f"subscript: {name} must be an int, got {value!r}")
        if any(bounds.get(f"step_{i}") == 0 for i in range(num_subscripts)):
            raise ArgumentError("subscript: a slice's step cannot be 0")
        self.num_subscripts = num_subscripts
        self.bounds = {k: int(v) for k, v in bounds.items()}
        # the subscripts that are indices (static or per sample): their axes leave the output
        self.indexed = frozenset(int(i) for i in indices)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        return "".join(c for i, c in enumerate(given) if i not in self.indexed)

    def _bound(self, name: str, args: dict[str, Any]) -> int | None:
        if name in args:
            value = as_scalar(args[name])
            if isinstance(value, float) or np.asarray(args[name]).size != 1:
                raise ValueError(f"subscript: {name} must be one integer per sample, got {args[name]!r}")
            return int(value)
        return self.bounds.get(name)

    def compute(self, xp, inputs, args, ctx):
        x = inputs[0]
        if self.num_subscripts > x.ndim:
            raise ValueError(f"subscript: {self.num_subscripts} subscripts for {x.ndim}-D samples (shape {x.shape})")
        index: list[Any] = []
        for i in range(self.num_subscripts):
            extent = x.shape[i]
            if i in self.indexed:
                at = self._bound(f"at_{i}", args)
                if not -extent <= at < extent:
                    raise ValueError(f"subscript: index {at} out of range for axis {i} of extent {extent}")
                index.append(at % extent)
                continue
            step = self._bound(f"step_{i}", args)
            if step == 0:
                raise ValueError(f"subscript: the step of subscript {i} is 0")
            index.append(slice(self._bound(f"lo_{i}", args), self._bound(f"hi_{i}", args), step))
        return xp.array(x[tuple(index)])  # a C-contiguous copy (0-d where every subscript indexes)
