"""A batch's per-sample argument inputs, and inputs of one shape, as arrays, for the GPU stage's
batched operators.

An argument input reaches ``run_batch`` as one value per sample (0-d or one-element arrays, or
Python scalars). Turning it into one array takes one numpy call, so building a kernel's per-sample
parameters costs the same whatever the batch size. An input reaches it as one array or a list of
samples; samples of one shape and type stack into one array (:func:`stacked`).
"""

from __future__ import annotations

from types import ModuleType
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


def stacked(xp: ModuleType, batch: Any) -> Any:
    """A batch input as one array with the samples along its first axis (itself when it is one);
    None when its samples differ in shape or type, or it has none."""
    if hasattr(batch, "ndim") and hasattr(batch, "dtype"):
        return batch
    samples = [xp.asarray(x) for x in batch]
    if not samples or any(x.shape != samples[0].shape or x.dtype != samples[0].dtype for x in samples):
        return None
    return xp.stack(samples)
