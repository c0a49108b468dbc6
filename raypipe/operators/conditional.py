"""``_conditional``: each sample through one of two branches, as its condition says.

The operator behind ``if`` statements on pipeline data (:mod:`raypipe.conditionals`). It holds the
two branches as :class:`~raypipe.subgraph.Subgraph` objects whose outputs are the variables the
``if`` assigns; its inputs are the data the branches read from before the ``if`` (``sources``: the
regular inputs, then on a GPU operator the host ones as argument inputs ``host0``, ``host1``...) and
the condition (argument input ``predicate``, one bool per sample). On the host a sample runs through
its branch alone; in the GPU stage the samples of each branch run through it together, so a batched
operator inside takes them in one call. Operators in a branch draw from random streams keyed by the
sample, so a sample gets the same values whichever branch-mates, batch or process it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..kernels import launch
from ..kernels.launch import Packed
from ..operator import Operator, Schema, register
from ..sample_contexts import subset
from ..subgraph import Subgraph, SubgraphOwner

#: Host data a conditional on the GPU can read from before its ``if`` (argument inputs ``host<i>``).
MAX_HOST_SOURCES = 64


@register
class Conditional(SubgraphOwner, Operator):
    """An ``if``/``else`` on pipeline data: the variables it assigns, merged per sample."""

    schema = Schema(
        "_conditional",
        devices=("cpu", "gpu"),
        min_inputs=0,
        max_inputs=1 << 16,
        arg_inputs=("predicate", *(f"host{i}" for i in range(MAX_HOST_SOURCES))),
    )

    def configure(
        self,
        where: str,
        branches: Sequence[Subgraph],
        slots: Sequence[Sequence[int]],
        names: Sequence[str],
        host_sources: int = 0,
        logical: bool = False,
    ) -> None:
        """``branches``: the ``if`` and the ``else`` branch; ``slots[k]``: for each placeholder of
        branch ``k``, its source's index; ``names``: the variables, for errors; ``logical``: the
        outputs are truth values too (``and``, ``or``, ``not``: on the CPU, so checked per sample)."""
        self.where = where
        self.branches = self.subgraphs = list(branches)
        self.slots = [list(s) for s in slots]
        self.names = list(names)
        self.host_sources = int(host_sources)
        self.logical = bool(logical)
        self._layouts = [""] * len(self.names)
        self._kinds: list[dict[int, tuple[str, int]]] = [{} for _ in self.names]

    @property
    def num_outputs(self) -> int:
        return len(self.names)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        sources = [*input_layouts, *[""] * self.host_sources]
        per_branch = [b.output_layouts([sources[s] for s in slots]) for b, slots in zip(self.branches, self.slots)]
        self._layouts = []
        for name, first, second in zip(self.names, *per_branch):
            if first and second and first != second:
                raise ValueError(
                    f"{self.where}: variable {name!r} has layout {first!r} in the if branch and {second!r} in the "
                    "else branch; both branches must give it one layout"
                )
            self._layouts.append(first or second)
        return self._layouts[0]

    def output_layouts(self) -> list[str]:
        """Each output's layout (known once :meth:`output_layout` has seen the inputs')."""
        return list(self._layouts)

    def _sources(self, inputs: Sequence[Any], args: dict[str, Any]) -> list[Any]:
        return [*inputs, *(args[f"host{i}"] for i in range(self.host_sources))]

    def _taken(self, value: Any, sample: int) -> bool:
        return truth(value, f"{self.where}: the condition", sample)

    def _taken_batch(self, predicate: Any, ctxs: Sequence[Any]) -> np.ndarray:
        """Each sample's truth value, in one array operation where each sample is one value."""
        try:
            stacked = np.asarray(predicate)  # the samples as one array: one call for a list of scalars
        except ValueError:  # samples of different shapes
            stacked = None
        if stacked is not None and stacked.dtype.kind in "biu" and stacked.size == len(ctxs):
            return stacked.reshape(len(ctxs)).astype(bool)
        return np.array([self._taken(p, ctx.sample_index) for p, ctx in zip(predicate, ctxs)], dtype=bool)

    def _result(self, outputs: list[Any]) -> Any:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _check_kind(self, branch: int, output: int, value: Any) -> None:
        """The first type and number of dimensions each branch gives each output, which the other
        branch must match (as DALI's merge requires): a batch has one type."""
        if not hasattr(value, "dtype"):
            value = np.asarray(value)
        kind = (str(value.dtype), value.ndim)
        seen = self._kinds[output]
        seen.setdefault(branch, kind)
        other = seen.get(1 - branch)
        if other is not None and other != kind:
            by_branch = {branch: kind, 1 - branch: other}
            raise ValueError(
                f"{self.where}: variable {self.names[output]!r} is {by_branch[0][0]} with {by_branch[0][1]} "
                f"dimensions in the if branch and {by_branch[1][0]} with {by_branch[1][1]} in the else branch; "
                "both branches must give it one type and number of dimensions (cast one of them)"
            )

    @property
    def batch_semantics(self) -> bool:
        """A ``gpu`` ``if`` with such a branch runs in the GPU stage on a machine without a GPU too
        (batch by batch on the host), not sample by sample in the CPU stage."""
        return any(branch.whole_batch for branch in getattr(self, "branches", ()))

    def host_batch_step(self, arg_inputs) -> bool:
        """On the host, a branch holding an operator that needs the whole batch (a batch
        ``python_function``) makes the ``if`` a batch step: each branch then runs once on the group
        of samples it takes, as DALI runs it."""
        return self.batch_semantics

    def run_sample(self, inputs, args, ctx):
        k = 0 if self._taken(args["predicate"], ctx.sample_index) else 1
        sources = self._sources(inputs, args)
        outputs = self.branches[k].run_sample([sources[s] for s in self.slots[k]], ctx)
        for o, value in enumerate(outputs):
            self._check_kind(k, o, value)
        if self.logical:
            for value in outputs:
                truth(value, f"{self.where}: an operand", ctx.sample_index)
        return self._result(outputs)

    def run_batch(self, xp, inputs, args, ctxs):
        """The samples of each branch through it as one group; a constant number of array operations
        per branch and output, whatever the batch size, where the data are batch arrays or packed
        batches (the GPU stage's)."""
        sources = self._sources(inputs, args)
        taken = self._taken_batch(args["predicate"], ctxs)
        count = len(taken)
        parts: list[list[tuple[np.ndarray, Any]]] = [[] for _ in self.names]
        for k, mask in enumerate((taken, ~taken)):
            chosen = np.flatnonzero(mask)
            if not len(chosen):
                continue
            values = [_take(xp, sources[s], chosen, count) for s in self.slots[k]]
            outputs = self.branches[k].run_batch(xp, values, subset(ctxs, chosen))
            for o, samples in enumerate(outputs):
                self._check_kind(k, o, samples[0])
                parts[o].append((chosen, samples))
        on_device = xp if self.device == "gpu" else np
        return self._result([_merge(on_device, each, count) for each in parts])


def _take(xp: ModuleType, values: Any, chosen: np.ndarray, count: int) -> Any:
    """The samples at positions ``chosen`` (sorted) of a batch: all of it as it is; rows of a batch
    array (or of a packed batch whose samples lie back to back) in one indexing; a packed batch's
    entries; a list's items."""
    if len(chosen) == count:
        return values
    if isinstance(values, Packed):
        dense = values.dense()
        if dense is None:
            return Packed(values.data, values.shapes[chosen], values.offsets[chosen])
        values = dense
    if hasattr(values, "ndim") and not isinstance(values, (list, tuple)):
        return values[chosen if isinstance(values, np.ndarray) else xp.asarray(chosen)]
    return [values[i] for i in chosen.tolist()]


def _merge(xp: ModuleType, parts: list[tuple[np.ndarray, Any]], count: int) -> Any:
    """One output's batch from each branch's samples (``(positions, samples)``): one batch array
    when every sample has one shape, else a packed batch over both branches' buffers."""
    if len(parts) == 1:
        return _moved(xp, parts[0][1])
    packs = [launch.pack(xp, _moved(xp, samples), "if") for _, samples in parts]
    shapes = np.empty((count, packs[0].shapes.shape[1]), dtype=np.int64)
    for (chosen, _), packed in zip(parts, packs):
        shapes[chosen] = packed.shapes
    if (shapes == shapes[0]).all():
        out = xp.empty((count, *shapes[0].tolist()), dtype=packs[0].dtype)
        for (chosen, _), packed in zip(parts, packs):
            block = packed.dense()
            out[chosen if xp is np else xp.asarray(chosen)] = xp.stack(list(packed)) if block is None else block
        return out
    offsets = np.empty(count, dtype=np.int64)
    start = 0
    for (chosen, _), packed in zip(parts, packs):
        offsets[chosen] = packed.offsets + start
        start += int(packed.data.size)
    return Packed(xp.concatenate([packed.data for packed in packs]), shapes, offsets)


def _moved(xp: ModuleType, samples: Any) -> Any:
    """``samples`` on ``xp``'s device (host samples a branch gave, such as constants, copied there)."""
    if xp is np:
        return samples
    if isinstance(samples, np.ndarray):
        return xp.asarray(samples)
    if isinstance(samples, Packed):
        return (
            samples
            if not isinstance(samples.data, np.ndarray)
            else Packed(xp.asarray(samples.data), samples.shapes, samples.offsets)
        )
    if isinstance(samples, list) and any(isinstance(s, np.ndarray) for s in samples):
        return [xp.asarray(s) for s in samples]
    return samples


def truth(value: Any, what: str, sample: int) -> bool:
    """One sample's truth value: a bool (or integer) scalar; anything else is an error naming the
    sample, as DALI refuses conditions that are not one value per sample."""
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "biu":
        raise ValueError(
            f"{what} must be one bool per sample (a comparison, or fn.random.coin_flip(dtype=types.BOOL)); "
            f"sample {sample} has {array.dtype} of shape {array.shape}"
        )
    return bool(array.reshape(()))
