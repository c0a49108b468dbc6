"""Axis arguments shared by the shape and layout operators: lists of ints, axis indices checked
against a rank, and axis names looked up in a layout, each failing with an ArgumentError that names
the operator and the argument."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (not a bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def int_list(op: str, name: str, value: Any) -> tuple[int, ...]:
    """An ``int or list of int`` argument (or a 0-d/1-d integer array) as a tuple."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu" or value.ndim > 1:
            raise ArgumentError(f"{op}: {name} must be an int or a list of ints, got {value!r}")
        return tuple(int(v) for v in value.reshape(-1))
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(is_int(v) for v in items):
        raise ArgumentError(f"{op}: {name} must be an int or a list of ints, got {value!r}")
    return tuple(int(v) for v in items)


def float_list(op: str, name: str, value: Any) -> tuple[float, ...]:
    """A ``float or list of float`` argument (or a 0-d/1-d array) as a tuple of floats."""
    items = np.asarray(value).reshape(-1).tolist() if isinstance(value, np.ndarray) else value
    items = list(items) if isinstance(items, (list, tuple)) else [items]
    if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in items):
        raise ArgumentError(f"{op}: {name} must be a number or a list of numbers, got {value!r}")
    return tuple(float(v) for v in items)


def per_sample(value: Any) -> tuple:
    """A per-sample argument input's value (an array or a scalar) as a flat tuple of Python numbers."""
    return tuple(np.asarray(value).reshape(-1).tolist())


def resolve_axes(op: str, name: str, axes: Sequence[int], ndim: int, allow_end: bool = False) -> tuple[int, ...]:
    """``axes`` as indices in ``[0, ndim)`` (``[0, ndim]`` with ``allow_end``); negative ones
    count from the back. ValueError when one is out of range (a property of the data)."""
    limit = ndim + 1 if allow_end else ndim
    resolved = []
    for axis in axes:
        index = axis + limit if axis < 0 else axis
        if not 0 <= index < limit:
            raise ValueError(f"{op}: {name} {axis} is out of range for {ndim}-D samples")
        resolved.append(index)
    return tuple(resolved)


def layout_axes(op: str, name: str, names: str, layout: str) -> tuple[int, ...]:
    """The indices in ``layout`` of each axis named in ``names``; an ArgumentError when the input
    has no layout or lacks one of them."""
    if not layout:
        raise ArgumentError(f"{op}: {name} {names!r} needs an input with a layout; pass axes=")
    missing = [c for c in names if c not in layout]
    if missing:
        raise ArgumentError(f"{op}: {name} {names!r} names axes not in the input layout {layout!r}")
    return tuple(layout.index(c) for c in names)


def check_layout(op: str, name: str, value: Any) -> str:
    """A layout string argument (``"HWC"``; ``""`` for none)."""
    if not isinstance(value, str):
        raise ArgumentError(f"{op}: {name} must be a layout string, got {value!r}")
    if len(set(value)) != len(value):
        raise ArgumentError(f"{op}: {name} {value!r} names an axis twice")
    return value
