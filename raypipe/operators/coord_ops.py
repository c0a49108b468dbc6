"""``coord_transform`` (``out = M * in + T`` for each point) and ``coord_flip`` (points mirrored
about a centre), as DALI's operators: the inputs are ``(points, dims)`` arrays."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register
from .cast import parse_dtype, saturate_cast

AXES = "xyz"


def _matrix(value, rows: int | None, cols: int) -> np.ndarray:
    """``M`` as a ``(rows, cols)`` float32 matrix: a scalar is that multiple of the identity."""
    m = np.asarray(value, dtype=np.float32)
    if m.size == 1:
        return np.eye(cols, dtype=np.float32) * m.reshape(())
    if m.ndim == 2:
        return m
    count = m.size // cols if rows is None else rows
    if count * cols != m.size:
        raise ValueError(f"coord_transform: M of {m.size} values does not fit points of {cols} dimensions")
    return m.reshape(count, cols)


@register
class CoordTransform(Operator):
    """Each point (row) ``p`` of the input becomes ``M @ p + T``: ``M`` an ``m x n`` matrix (or a
    scalar: a multiple of the identity), ``T`` a vector of ``m`` (or a scalar), or both as ``MT``
    (``m x (n + 1)``); per sample where they are argument inputs. Computed in float32 (as DALI),
    output ``dtype`` (default float32)."""

    schema = Schema("coord_transform", devices=("cpu", "gpu"), arg_inputs=("M", "T", "MT"))

    def configure(self, M=None, T=None, MT=None, dtype=None) -> None:
        if MT is not None and (M is not None or T is not None):
            raise ArgumentError("coord_transform: MT cannot be given with M or T")
        self.M, self.T, self.MT = M, T, MT
        self.dtype = np.dtype(np.float32) if dtype is None else parse_dtype("coord_transform", "dtype", dtype)

    def compute(self, xp, inputs, args, ctx):
        points = np.asarray(inputs[0] if xp is np else xp.asnumpy(inputs[0]))
        if points.ndim != 2:
            raise ValueError(f"coord_transform: expects points of shape (points, dims), got {points.shape}")
        n = points.shape[1]
        mt = args.get("MT", self.MT)
        if mt is not None:
            full = np.asarray(mt, dtype=np.float32)
            full = full.reshape(-1, n + 1) if full.ndim != 2 else full
            m, t = full[:, :n], full[:, n]
        else:
            given = args.get("M", self.M)
            m = np.eye(n, dtype=np.float32) if given is None else _matrix(given, None, n)
            shift = args.get("T", self.T)
            t = np.zeros(len(m), np.float32) if shift is None else np.asarray(shift, np.float32).reshape(-1)
            if t.size == 1:
                t = np.full(len(m), t[0], np.float32)
        if m.shape[1] != n or t.shape != (m.shape[0],):
            raise ValueError(f"coord_transform: M {m.shape} and T {t.shape} do not fit points of {n} dimensions")
        points = points.astype(np.float32)
        out = np.zeros((len(points), len(m)), np.float32)
        for j in range(n):  # summed in order, then shifted: DALI's float32 arithmetic
            out += points[:, j : j + 1] * m[:, j]
        out += t
        out = saturate_cast(np, out, self.dtype)
        return out if xp is np else xp.asarray(out)


def _flip_flag(name: str, value) -> int:
    if value not in (0, 1):
        raise ArgumentError(f"coord_flip: {name} must be 0 or 1, got {value!r}")
    return int(value)


@register
class CoordFlip(Operator):
    """Points (rows of ``(points, dims)``, float32) mirrored about ``center_x/y/z`` along the axes
    whose ``flip_x/y/z`` is 1 (per sample where they are argument inputs): ``c - (p - c)``.
    ``layout`` (``"x"``, ``"xy"``, ``"yx"``, ``"xyz"``...) says which column is which axis."""

    schema = Schema(
        "coord_flip",
        devices=("cpu", "gpu"),
        arg_inputs=("flip_x", "flip_y", "flip_z", "center_x", "center_y", "center_z"),
    )

    def configure(self, layout: str = "", flip_x=1, flip_y=0, flip_z=0, center_x=0.5, center_y=0.5, center_z=0.5):
        if layout and (sorted(layout) != sorted(AXES[: len(layout)])):
            raise ArgumentError(f"coord_flip: layout must be a permutation of 'x', 'xy' or 'xyz', got {layout!r}")
        self.layout = layout
        self.flags = {a: _flip_flag(f"flip_{a}", v) for a, v in zip(AXES, (flip_x, flip_y, flip_z))}
        self.centers = {a: float(v) for a, v in zip(AXES, (center_x, center_y, center_z))}

    def output_layout(self, input_layouts):
        return input_layouts[0] if input_layouts else ""

    def compute(self, xp, inputs, args, ctx):
        points = np.asarray(inputs[0] if xp is np else xp.asnumpy(inputs[0]))
        if points.ndim != 2 or points.shape[1] > 3:
            raise ValueError(f"coord_flip: expects points of shape (points, 1 to 3), got {points.shape}")
        layout = self.layout or AXES[: points.shape[1]]
        if len(layout) != points.shape[1]:
            raise ValueError(f"coord_flip: layout {layout!r} does not fit points of {points.shape[1]} dimensions")
        out = points.astype(np.float32, copy=True)
        for column, axis in enumerate(layout):
            if _flip_flag(f"flip_{axis}", as_scalar(args.get(f"flip_{axis}", self.flags[axis]))):
                center = np.float32(as_scalar(args.get(f"center_{axis}", self.centers[axis])))
                out[:, column] = np.float32(2) * center - out[:, column]
        return out if xp is np else xp.asarray(out)
