"""``normalize``: ``out = scale * (in - mean) / stddev + shift``, statistics over ``axes``.

As DALI's operator: ``mean`` and ``stddev`` are computed over the reduced ``axes`` (or
``axis_names``; every axis by default) unless given, as numbers or per-sample argument inputs
shaped like the data with the reduced axes of extent 1. A computed standard deviation is
``sqrt(sum((in - mean)**2) / (n - ddof) + epsilon)``, using the given ``mean`` when there is one; a
given one is ``sqrt(stddev**2 + epsilon)``; where it is 0 the output is ``shift``. The result is
float32 by default, or rounded and saturated to ``dtype``.

``batch=True`` takes the statistics over the whole batch (the reduced axes of every sample
together), which needs the batch at once: a batch step, on ``device="gpu"`` (with or without a
GPU) and on ``device="cpu"`` (after the CPU stage has gathered the batch, :meth:`host_batch_step`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from ..types import DALIDataType
from .axes import int_list, layout_axes, resolve_axes
from .cast import parse_dtype, saturate_cast

_OP = "normalize"


@register
class Normalization(Operator):
    """Normalize to zero mean and unit standard deviation (then ``scale`` and ``shift``) over
    ``axes``, per sample or (``batch=True``) over the batch."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("mean", "stddev"))

    def configure(
        self,
        mean: float | None = None,
        stddev: float | None = None,
        axes: int | Sequence[int] | None = None,
        axis_names: str | None = None,
        batch: bool = False,
        scale: float = 1.0,
        shift: float = 0.0,
        epsilon: float = 0.0,
        ddof: int = 0,
        dtype: DALIDataType | np.dtype | str = DALIDataType.FLOAT,
    ) -> None:
        if axes is not None and axis_names is not None:
            raise ArgumentError(f"{_OP}: axes and axis_names are mutually exclusive")
        self.axes = None if axes is None else int_list(_OP, "axes", axes)
        self.axis_names = axis_names or None
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.stddev = None if stddev is None else np.asarray(stddev, dtype=np.float64)
        self.scale = check_number(_OP, "scale", scale)
        self.shift = check_number(_OP, "shift", shift)
        self.epsilon = check_number(_OP, "epsilon", epsilon)
        if self.epsilon < 0 or isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)) or ddof < 0:
            raise ArgumentError(f"{_OP}: epsilon and ddof must not be negative, got {epsilon!r} and {ddof!r}")
        self.ddof = int(ddof)
        self.batch = bool(batch)
        self.batch_semantics = self.batch  # batch statistics: a batch step even without a GPU
        self.dtype = parse_dtype(_OP, "dtype", dtype)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        given = input_layouts[0] if input_layouts else ""
        if self.axis_names is not None:
            self.axes = layout_axes(_OP, "axis_names", self.axis_names, given)
        return given

    def _reduced(self, ndim: int) -> tuple[int, ...]:
        return tuple(range(ndim)) if self.axes is None else resolve_axes(_OP, "axes", self.axes, ndim)

    def _given(self, args: dict[str, Any], name: str) -> np.ndarray | None:
        value = args.get(name, getattr(self, name))
        return None if value is None else np.asarray(value, dtype=np.float64)

    def _normalize(self, xp: ModuleType, data: Any, mean: Any, stddev: Any) -> Any:
        inverse = xp.where(stddev > 0, self.scale / xp.where(stddev > 0, stddev, 1.0), 0.0).astype(np.float32)
        out = (data.astype(np.float32) - mean.astype(np.float32)) * inverse
        out += np.float32(self.shift)
        return saturate_cast(xp, out, self.dtype, overwrite=True)

    def _statistics(self, xp: ModuleType, data: Any, axes: tuple[int, ...], args: dict[str, Any]) -> tuple[Any, Any]:
        """Mean and standard deviation over ``axes`` of ``data`` (float64, reduced axes kept)."""
        values = data.astype(np.float64)
        given_mean, given_std = self._given(args, "mean"), self._given(args, "stddev")
        mean = values.mean(axis=axes, keepdims=True) if given_mean is None else xp.asarray(given_mean)
        if given_std is not None:
            return mean, xp.sqrt(xp.asarray(given_std) ** 2 + self.epsilon)
        count = int(np.prod([data.shape[a] for a in axes])) - self.ddof
        squares = ((values - mean) ** 2).sum(axis=axes, keepdims=True)
        return mean, xp.sqrt(squares / max(count, 1) + self.epsilon)

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        """On the CPU, batch statistics are a batch step: the CPU stage runs each sample alone."""
        return self.batch

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        data = inputs[0]
        mean, stddev = self._statistics(xp, data, self._reduced(data.ndim), args)
        return self._normalize(xp, data, mean, stddev)

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """Per sample as :meth:`compute`, or with ``batch=True`` the statistics of every sample's
        reduced axes together (the kept axes must agree) applied to each sample."""
        batch = inputs[0]
        if not self.batch:
            return [self._per_sample(xp, x, {k: v[i] for k, v in args.items()}) for i, x in enumerate(batch)]
        samples = list(batch)
        axes = self._reduced(samples[0].ndim)
        kept = [a for a in range(samples[0].ndim) if a not in axes]
        flat = [
            xp.moveaxis(x.astype(np.float64), kept, list(range(len(kept)))).reshape(*[x.shape[a] for a in kept], -1)
            for x in samples
        ]
        if len({f.shape[:-1] for f in flat}) > 1:
            raise ValueError(f"{_OP}: with batch=True the samples' extents of the axes not reduced must agree")
        together = xp.concatenate(flat, axis=-1)
        mean, stddev = self._statistics(xp, together, (together.ndim - 1,), {})
        shape = [1] * samples[0].ndim
        for axis in kept:
            shape[axis] = samples[0].shape[axis]
        mean, stddev = mean.reshape(shape), stddev.reshape(shape)
        return [self._normalize(xp, x, mean, stddev) for x in samples]

    def _per_sample(self, xp: ModuleType, data: Any, args: dict[str, Any]) -> Any:
        mean, stddev = self._statistics(xp, data, self._reduced(data.ndim), args)
        return self._normalize(xp, data, mean, stddev)
