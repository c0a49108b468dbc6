"""Per-frame arguments: an operator on sequences whose argument inputs hold a value per frame.

DALI marks data as per frame by its layout's leading ``F`` (``fn.per_frame``). An argument input
so marked gives each frame of the operator's input sequence its own value (one value serves every
frame of its sample, DALI's broadcast), and so may some positional inputs (a matrix input of
``warp_affine``, the transforms ``transforms.combine`` combines). :class:`FrameArgs` wraps such an
operator instance: each sample is cut into its frames, the operator runs on them as on images (or,
for ``transforms``, as on single transforms), and the frames' results are stacked back into
sequences. The ``transforms`` operators need no input sequence: the per-frame arguments and inputs
themselves give the frames, and the output is a sequence of transforms.
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


def with_frame_args(op: Operator, per_frame: Collection[str], input_layouts: Sequence[str]) -> Operator | FrameArgs:
    """``op`` itself when no argument or input it takes per frame is marked so, else ``op`` wrapped
    to run frame by frame; an error naming the argument where ``op`` does not take per-frame values
    (as DALI's schema says) or its input is not a sequence."""
    name = op.schema.name
    accepted = getattr(op, "per_frame_args", frozenset())
    for arg in sorted(per_frame):
        if arg not in accepted:
            takes = f" (per-frame arguments of {name}: {', '.join(sorted(accepted))})" if accepted else ""
            raise ArgumentError(f"{name}: argument {arg!r} does not take per-frame values (fn.per_frame){takes}")
    positional = getattr(op, "per_frame_inputs", frozenset())
    frame_inputs = {i for i, layout in enumerate(input_layouts) if i in positional and layout.startswith("F")}
    if not per_frame and not frame_inputs:
        return op
    if not getattr(op, "frames_from_arguments", False):
        layout = input_layouts[0] if input_layouts else ""
        if not layout.startswith("F"):
            what = f"argument {sorted(per_frame)[0]!r}" if per_frame else f"input {min(frame_inputs)}"
            raise ArgumentError(
                f"{name}: {what} is per frame but input 0 is not a sequence "
                f"(its layout {layout!r} does not start with 'F')"
            )
        frame_inputs.add(0)
    return FrameArgs(op, frozenset(per_frame), frozenset(frame_inputs))


class FrameArgs:
    """An operator instance run frame by frame: ``names`` are its per-frame arguments, ``inputs``
    the positions of its inputs cut into frames (the others serve every frame whole); everything
    else (schema, device, outputs, random streams) is the wrapped operator's."""

    def __init__(self, op: Operator, names: frozenset[str], inputs: frozenset[int]):
        self.op = op
        self.names = names
        self.inputs = inputs

    def __getattr__(self, attr: str) -> Any:
        # only what the wrapped operator has beyond these (and never while being unpickled, before
        # ``op`` is set, nor Python's own protocol names)
        if attr in _HIDDEN or attr.startswith("__") or "op" not in self.__dict__:
            raise AttributeError(attr)
        return getattr(self.op, attr)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The wrapped operator's layout for one frame, as a sequence's."""
        frames = [layout[1:] if i in self.inputs else layout for i, layout in enumerate(input_layouts)]
        inner = self.op.output_layout(frames)
        return "F" + inner if inner else ""

    def split(self, inputs: Sequence[Any], args: dict[str, Any], sample: int = 0) -> list[tuple[list, dict]]:
        """Each frame's inputs and arguments of one sample: the per-frame ones picked, the others as
        given (then settled across frames where the operator needs it, as ``rotate``'s one canvas
        for all its frames)."""
        name = self.op.schema.name
        count, source = None, ""
        for i in sorted(self.inputs):
            frames = len(inputs[i])
            if count is None:
                count, source = frames, f"input {i}"
            elif frames != count:
                raise ArgumentError(f"{name}: sample {sample} has {frames} frames in input {i} and {count} in {source}")
        picked = {}
        for arg in sorted(self.names):
            values = np.asarray(args[arg])
            frames = 0 if values.ndim == 0 else len(values)
            if count is None and frames:
                count, source = frames, f"argument {arg!r}"
            elif frames not in (1, count):
                raise ArgumentError(
                    f"{name}: sample {sample} of the per-frame argument {arg!r} has {frames} values "
                    f"for {count} frames of {source} (one per frame, or one for all)"
                )
            picked[arg] = values
        each = [
            (
                [value[f] if i in self.inputs else value for i, value in enumerate(inputs)],
                {**args, **{k: v[0 if len(v) == 1 else f] for k, v in picked.items()}},
            )
            for f in range(count or 0)
        ]
        fit = getattr(self.op, "fit_frames", None)
        if fit is None or not each:
            return each
        fitted = fit([frame_args for _, frame_args in each], each[0][0][0].shape)
        return [(frame_inputs, frame_args) for (frame_inputs, _), frame_args in zip(each, fitted)]

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx: Any) -> Any:
        outs = [self.op.compute(xp, each, each_args, ctx) for each, each_args in self.split(inputs, args)]
        return _stack(xp, outs, self.op.num_outputs)

    def run_sample(self, inputs: Sequence[Any], args: dict[str, Any], ctx: Any, **kwargs: Any) -> Any:
        outs = [
            self.op.run_sample(frame_inputs, frame_args, ctx, **kwargs)
            for frame_inputs, frame_args in self.split(inputs, args)
        ]
        return _stack(np, outs, self.op.num_outputs)

    def run_batch(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, list[Any]], ctxs: Sequence[Any]) -> Any:
        """The batch's frames as one batch of images through the wrapped operator's ``run_batch``
        (its batched kernels where it has them), each frame with its sample's context and values;
        sample by sample where more than the first input comes in frames."""
        if self.inputs != {0}:
            outs = [
                self.compute(xp, [column[i] for column in inputs], {k: v[i] for k, v in args.items()}, ctx)
                for i, ctx in enumerate(ctxs)
            ]
            return outs if self.op.num_outputs == 1 else tuple(list(out) for out in zip(*outs))
        frames, counts = as_frames(xp, inputs[0], self.op.schema.name)
        owners = np.repeat(np.arange(len(counts)), counts)
        firsts = np.cumsum(counts) - counts
        frame_args: dict[str, list[Any]] = {name: [] for name in args}
        for i, first in enumerate(firsts.tolist()):
            # the sample's frames by their shape alone (a view of nothing: no device array per frame)
            sample = np.broadcast_to(np.empty((), bool), (int(counts[i]), *frames.shapes[first].tolist()))
            given = {k: v[i] for k, v in args.items()}
            for _, each in self.split([sample, *(column[i] for column in inputs[1:])], given, i):
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
