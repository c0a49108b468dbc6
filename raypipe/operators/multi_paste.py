"""``multi_paste``: regions of images pasted onto a zero canvas per output sample, as DALI's (the
mosaic augmentation of YOLO-style detection training).

With ``in_ids`` (one input) output sample ``i`` pastes samples ``in_ids[i]`` of the batch, so the
operator needs the whole batch: it runs as a batch step (after the CPU stage on ``cpu``, in the GPU
stage on ``gpu``). Without it, paste ``k`` of output ``i`` is sample ``i`` of input ``k``. Each paste
takes ``shapes[k]`` (height, width; ``shapes_rel`` as fractions of the source's, rounded up; by
default the rest of the source from its anchor) from
``in_anchors[k]`` of its source to ``out_anchors[k]`` of the canvas (anchors default to the top-left
corner; the ``_rel`` forms are fractions of the source's or canvas's extents, truncated), later
pastes over earlier ones. The canvas is ``output_size`` (height, width), or the inputs' one shape
when every sample has it; its type is ``dtype`` (the input's by default), values converted as
DALI's host does (rounded to nearest with ties away from zero, saturated). A region reaching outside
its source or the canvas fails naming the sample, as in DALI.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .cast import parse_dtype
from .fill import converted

OP = "multi_paste"
#: per-paste arguments: one (height, width) row per paste
PER_PASTE = ("in_anchors", "in_anchors_rel", "out_anchors", "out_anchors_rel", "shapes", "shapes_rel")


def _rows(name: str, value: Any, dtype: type) -> np.ndarray:
    """A per-paste argument as rows of (height, width)."""
    array = np.asarray(value, dtype=dtype)
    if array.size % 2:
        raise ArgumentError(f"{OP}: {name} must hold (height, width) pairs, got {np.asarray(value).tolist()!r}")
    return array.reshape(-1, 2)


@register
class MultiPaste(Operator):
    """Pastes of image regions onto a canvas per output sample."""

    schema = Schema(OP, devices=("cpu", "gpu"), max_inputs=64, arg_inputs=("in_ids", "output_size", *PER_PASTE))
    #: on ``gpu`` the GPU stage runs it batch by batch, with or without a GPU
    batch_semantics = True

    def configure(
        self,
        in_ids=None,
        output_size=None,
        dtype: Any = None,
        in_anchors=None,
        in_anchors_rel=None,
        out_anchors=None,
        out_anchors_rel=None,
        shapes=None,
        shapes_rel=None,
    ) -> None:
        self.in_ids = None if in_ids is None else np.asarray(in_ids, dtype=np.int64).reshape(-1)
        self.output_size = None if output_size is None else _rows("output_size", output_size, np.int64)
        if self.output_size is not None and len(self.output_size) != 1:
            raise ArgumentError(f"{OP}: output_size must be (height, width), got {np.asarray(output_size).tolist()}")
        self.dtype = None if dtype is None else parse_dtype(OP, "dtype", dtype)
        given = {"in_anchors": in_anchors, "in_anchors_rel": in_anchors_rel, "out_anchors": out_anchors}
        given.update(out_anchors_rel=out_anchors_rel, shapes=shapes, shapes_rel=shapes_rel)
        self.static = {
            k: _rows(k, v, np.float32 if k.endswith("_rel") else np.int64) for k, v in given.items() if v is not None
        }
        self._check_exclusive(self.static)

    @staticmethod
    def _check_exclusive(names: Collection[str]) -> None:
        for name in ("in_anchors", "out_anchors", "shapes"):
            if name in names and f"{name}_rel" in names:
                raise ArgumentError(f"{OP}: {name} and {name}_rel exclude each other")

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        self._check_exclusive({*self.static, *arg_inputs})
        if (self.in_ids is not None or "in_ids" in arg_inputs) and count != 1:
            raise ArgumentError(f"{OP}: with in_ids it takes exactly one input, got {count}")

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        """A batch step: with ``in_ids`` an output reads other samples of the batch."""
        return True

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return input_layouts[0] if input_layouts else ""

    def run_batch(self, xp, inputs, args, ctxs):
        """Every output sample's canvas and pastes."""
        count = len(ctxs)
        batches = [[inp[i] for i in range(count)] for inp in inputs]
        every = [s for batch in batches for s in batch]
        for i, sample in enumerate(every):
            if sample.ndim != 3 or sample.shape[2] != every[0].shape[2] or sample.dtype != every[0].dtype:
                raise ValueError(
                    f"{OP}: sample {i % count} of input {i // count} is {sample.dtype} of shape {tuple(sample.shape)}; "
                    f"every sample must be HWC with the first's {every[0].shape[2]} channels and type {every[0].dtype}"
                )
        uniform = {tuple(s.shape[:2]) for s in every}
        outs = []
        for i in range(count):
            sample_args = {k: v[i] for k, v in args.items()}
            outs.append(self._canvas(xp, i, batches, sample_args, uniform))
        return outs

    def _canvas(self, xp, i: int, batches: list[list[Any]], args: dict[str, Any], uniform: set) -> Any:
        if "in_ids" in args or self.in_ids is not None:
            ids = np.asarray(args["in_ids"]).reshape(-1).tolist() if "in_ids" in args else self.in_ids.tolist()
            bad = [j for j in ids if not 0 <= j < len(batches[0])]
            if bad:
                raise ValueError(f"{OP}: sample {i}: in_ids {bad} outside the batch of {len(batches[0])}")
            sources = [batches[0][j] for j in ids]
        else:
            sources = [batch[i] for batch in batches]
        if "output_size" in args:
            height, width = _rows("output_size", args["output_size"], np.int64).reshape(-1)[:2].tolist()
        elif self.output_size is not None:
            height, width = self.output_size[0].tolist()
        elif len(uniform) == 1:
            height, width = next(iter(uniform))
        else:
            raise ValueError(f"{OP}: without output_size every input sample must have one shape, got {sorted(uniform)}")
        first = batches[0][0]
        out_type = self.dtype or first.dtype
        canvas = xp.zeros((height, width, first.shape[2]), dtype=out_type)
        rows = {k: _rows(k, args[k], np.float32 if k.endswith("_rel") else np.int64) for k in PER_PASTE if k in args}
        rows = {**{k: v for k, v in self.static.items() if k not in rows}, **rows}
        for name, values in rows.items():
            if len(values) != len(sources):
                raise ValueError(f"{OP}: sample {i}: {name} has {len(values)} rows for {len(sources)} pastes")
        for k, source in enumerate(sources):
            extent = np.asarray(source.shape[:2], dtype=np.int64)
            start = _anchor(rows, "in_anchors", k, extent)
            if "shapes_rel" in rows:  # fractions of the source, rounded up (anchors are truncated)
                size = np.ceil(rows["shapes_rel"][k] * extent.astype(np.float32)).astype(np.int64)
            else:
                size = rows["shapes"][k] if "shapes" in rows else extent - start
            at = _anchor(rows, "out_anchors", k, np.array([height, width]))
            if (start < 0).any() or (start + size > extent).any() or (size < 0).any():
                raise ValueError(
                    f"{OP}: sample {i}: paste {k} takes {size.tolist()} from {start.tolist()} of a "
                    f"{extent.tolist()} source: outside it"
                )
            if (at < 0).any() or (at + size > [height, width]).any():
                raise ValueError(
                    f"{OP}: sample {i}: paste {k} puts {size.tolist()} at {at.tolist()} of a "
                    f"{[height, width]} canvas: outside it"
                )
            region = source[start[0] : start[0] + size[0], start[1] : start[1] + size[1]]
            canvas[at[0] : at[0] + size[0], at[1] : at[1] + size[1]] = converted(xp, xp.asarray(region), out_type)
        return canvas


def _anchor(rows: dict[str, np.ndarray], name: str, k: int, extent: np.ndarray) -> np.ndarray:
    """Paste ``k``'s anchor: absolute, or relative to ``extent`` (float32, truncated), or 0."""
    if name in rows:
        return rows[name][k].astype(np.int64)
    if f"{name}_rel" in rows:
        return np.trunc(rows[f"{name}_rel"][k] * extent.astype(np.float32)).astype(np.int64)
    return np.zeros(2, dtype=np.int64)
