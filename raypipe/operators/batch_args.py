"""A batch's per-sample argument inputs as arrays, for the GPU stage's batched operators.

An argument input reaches ``run_batch`` as one value per sample (0-d or one-element arrays, or
Python scalars). Turning it into one array takes one numpy call, so building a kernel's per-sample
parameters costs the same whatever the batch size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError


def batch_values(args: dict[str, Any], name: str, default: Any, n: int, dtype: np.dtype) -> np.ndarray:
    """Argument ``name`` of each of ``n`` samples as an ``(n,)`` array of ``dtype``: the first
    value of each sample's argument input, or ``default`` for every sample when it is not one."""
    if name not in args:
        return np.full(n, default, dtype=dtype)
    return np.asarray(args[name]).reshape(n, -1)[:, 0].astype(dtype)


def batch_numbers(op: str, args: dict[str, Any], name: str, default: float, n: int) -> np.ndarray:
    """:func:`batch_values` as float64, each a finite number (else an ArgumentError naming ``op``,
    the argument and the first bad value, as ``check_number`` says for one sample)."""
    try:
        values = batch_values(args, name, default, n, np.dtype(np.float64))
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a number, got {args[name]!r}") from None
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise ArgumentError(f"{op}: {name} must be finite, got {float(values[bad[0]])!r}")
    return values
