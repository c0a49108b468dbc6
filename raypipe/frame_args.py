"""Per-frame arguments: an operator on sequences whose argument inputs hold a value per frame.

DALI marks an argument input as per frame by its layout's leading ``F`` (``fn.per_frame``): the
operator then processes each frame of a sequence as an image, with the frame's own values of those
arguments and the sample's values of the others. :class:`FrameArgs` wraps such an operator instance
so: each sequence is cut into its frames, the operator runs on them as a batch of images, and the
frames' results are stacked back into sequences. A per-frame value with one frame serves every frame
of its sample (DALI's broadcast); any other count must equal the sample's frames.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .errors import ArgumentError
from .kernels import launch
from .kernels.launch import Packed
from .operator import Operator
from .operators.frames import as_frames, as_sequences
from .sample_contexts import subset

#: Operator methods that would run the wrapped operator on whole sequences: not offered, so the
#: stages call :meth:`FrameArgs.run_sample` and :meth:`FrameArgs.run_batch` instead.
_HIDDEN = frozenset({"run_sample_into", "run_chunk"})


def with_frame_args(op: Operator, per_frame: Collection[str], input_layout: str) -> Operator | FrameArgs:
    """``op`` itself without per-frame arguments, else ``op`` wrapped to take them; an error
    naming the argument where ``op`` does not take per-frame values (as DALI's schema says) or its
    input is not a sequence."""
    if not per_frame:
        return op
    name = op.schema.name
    accepted = getattr(op, "per_frame_args", frozenset())
    for arg in sorted(per_frame):
        if arg not in accepted:
            takes = f" (per-frame arguments of {name}: {', '.join(sorted(accepted))})" if accepted else ""
            raise ArgumentError(f"{name}: argument {arg!r} does not take per-frame values (fn.per_frame){takes}")
    if not input_layout.startswith("F"):
        raise ArgumentError(
            f"{name}: argument {sorted(per_frame)[0]!r} is per frame but input 0 is not a sequence "
            f"(its layout {input_layout!r} does not start with 'F')"
        )
    return FrameArgs(op, frozenset(per_frame))


class FrameArgs:
    """An operator instance run frame by frame, with per-frame values for ``names``; everything
    else (schema, device, outputs, random streams) is the wrapped operator's."""

    def __init__(self, op: Operator, names: frozenset[str]):
        self.op = op
        self.names = names

    def __getattr__(self, attr: str) -> Any:
        if attr in _HIDDEN:
            raise AttributeError(attr)
        return getattr(self.op, attr)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The wrapped operator's layout for the frames, as a sequence's."""
        frames = [input_layouts[0][1:], *input_layouts[1:]] if input_layouts else []
        inner = self.op.output_layout(frames)
        return "F" + inner if inner else ""

    def frame_values(self, args: dict[str, Any], shape: Sequence[int], sample: int = 0) -> list[dict[str, Any]]:
        """Each frame's arguments of the sequence ``sample`` of ``shape``: the per-frame ones picked,
        the others as given (then settled across frames where the operator needs it, as ``rotate``'s
        one canvas for all)."""
        frames = int(shape[0])
        picked = {}
        for name in self.names:
            values = np.asarray(args[name])
            if values.ndim == 0 or len(values) not in (1, frames):
                count = 0 if values.ndim == 0 else len(values)
                raise ArgumentError(
                    f"{self.op.schema.name}: sample {sample} of the per-frame argument {name!r} has {count} values "
                    f"for {frames} frames (one per frame, or one for all)"
                )
            picked[name] = values
        each = [{**args, **{k: v[0 if len(v) == 1 else f] for k, v in picked.items()}} for f in range(frames)]
        fit = getattr(self.op, "fit_frames", None)
        return fit(each, shape[1:]) if fit is not None else each

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx: Any) -> Any:
        frames = inputs[0]
        outs = [
            self.op.compute(xp, [frame, *inputs[1:]], each, ctx)
            for frame, each in zip(frames, self.frame_values(args, frames.shape))
        ]
        return _stack(xp, outs, self.op.num_outputs)

    def run_sample(self, inputs: Sequence[Any], args: dict[str, Any], ctx: Any, **kwargs: Any) -> Any:
        frames = inputs[0]
        outs = [
            self.op.run_sample([frame, *inputs[1:]], each, ctx, **kwargs)
            for frame, each in zip(frames, self.frame_values(args, frames.shape))
        ]
        return _stack(np, outs, self.op.num_outputs)

    def run_batch(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, list[Any]], ctxs: Sequence[Any]) -> Any:
        """The batch's frames as one batch of images through the wrapped operator's ``run_batch``
        (its batched kernels where it has them), each frame with its sample's context and arguments."""
        frames, counts = as_frames(xp, inputs[0], self.op.schema.name)
        owners = np.repeat(np.arange(len(counts)), counts)
        frame_args: dict[str, list[Any]] = {name: [] for name in args}
        firsts = np.cumsum(counts) - counts
        for i, (count, first) in enumerate(zip(counts.tolist(), firsts.tolist())):
            shape = (count, *frames.shapes[first].tolist()) if count else (0,)
            for each in self.frame_values({k: v[i] for k, v in args.items()}, shape, i):
                for name, value in each.items():
                    frame_args[name].append(value)
        others = [[column[i] for i in owners.tolist()] for column in inputs[1:]]
        outs = self.op.run_batch(xp, [frames, *others], frame_args, subset(ctxs, owners))
        if self.op.num_outputs == 1:
            return self._regroup(xp, outs, counts)
        return tuple(self._regroup(xp, out, counts) for out in outs)

    def _regroup(self, xp: ModuleType, frames: Any, counts: np.ndarray) -> Packed:
        """Per-frame results (a sample's frames consecutive) as one sequence per sample."""
        if not isinstance(frames, Packed) and not hasattr(frames, "ndim"):
            frames = launch.pack(xp, frames, self.op.schema.name)
        return as_sequences(frames, counts)


def _stack(xp: ModuleType, outs: list[Any], num_outputs: int) -> Any:
    """Frames' results stacked into one sequence (each output of a multi-output operator)."""
    if num_outputs == 1:
        return xp.stack(outs)
    return tuple(xp.stack([out[k] for out in outs]) for k in range(num_outputs))
