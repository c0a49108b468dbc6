"""``_augment_select``: each sample through the augmentations a selector picks for it.

The operator behind :mod:`raypipe.auto_aug`. It holds each augmentation as a
:class:`~raypipe.subgraph.Subgraph` of inputs ``(data, parameter, shape)`` and its parameter table
(one row per magnitude bin, or per signed bin; None for an augmentation without a magnitude). Per
sample, the selector (:mod:`raypipe.augment_plan`) turns the operator's keyed draws into a plan of
levels; each level applies one augmentation, or none. On the host a sample runs through its
augmentations one after the other; in the GPU stage, level by level, the samples that chose the
same augmentation run through it together, so a batched operator inside it takes them in one call.
A sample gets the same augmentations and parameters whichever path, batch or process computes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..operator import Operator, Schema, register
from ..sample_contexts import subset
from ..subgraph import Subgraph, SubgraphOwner


@register
class AugmentSelect(SubgraphOwner, Operator):
    """A policy's augmentations, chosen per sample."""

    schema = Schema("_augment_select", devices=("cpu", "gpu"), arg_inputs=("shape",))

    def configure(
        self,
        policy: str,
        augmentations: Sequence[Subgraph],
        tables: Sequence[np.ndarray | None],
        selector: Any,
        uint8: bool = False,
    ) -> None:
        """``uint8``: the samples must be uint8 (the built-in suites' augmentations assume 0-255)."""
        self.policy = policy
        self.uint8 = bool(uint8)
        self.augmentations = self.subgraphs = list(augmentations)
        self.tables = list(tables)
        self.selector = selector

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        for augmentation in self.augmentations:
            (out,) = augmentation.output_layouts([layout, "", ""])
            if out != layout:
                raise ValueError(
                    f"{self.policy}: {augmentation.name} turns layout {layout!r} into {out!r}; "
                    "every augmentation of a policy must keep its input's layout"
                )
        return layout

    def _parameter(self, branch: int, row: int) -> Any:
        table = self.tables[branch]
        return None if table is None else table[row]

    def _check(self, sample: Any) -> None:
        if self.uint8 and sample.dtype != np.uint8:
            raise ValueError(f"{self.policy} takes uint8 images (values 0-255, as DALI's), got {sample.dtype}")

    def run_sample(self, inputs, args, ctx):
        self._check(inputs[0])
        branch, row = self.selector.plan(self.draws([ctx], self.selector.draws))
        sample, shape = inputs[0], args.get("shape")
        for level in range(branch.shape[0]):
            b = int(branch[level, 0])
            if b >= 0:
                parameter = self._parameter(b, int(row[level, 0]))
                (sample,) = self.augmentations[b].run_sample([sample, parameter, shape], ctx)
        return sample

    def run_batch(self, xp, inputs, args, ctxs):
        branch, row = self.selector.plan(self.draws(ctxs, self.selector.draws))
        samples = list(inputs[0])
        if samples:
            self._check(samples[0])  # a batch has one dtype
        shapes = args.get("shape")
        for level in range(branch.shape[0]):
            for b in np.unique(branch[level]).tolist():
                if b < 0:
                    continue
                chosen = np.flatnonzero(branch[level] == b)
                parameters = [self._parameter(b, r) for r in row[level, chosen].tolist()]
                values = [
                    [samples[i] for i in chosen],
                    parameters,
                    [None] * len(chosen) if shapes is None else [shapes[i] for i in chosen],
                ]
                (outs,) = self.augmentations[b].run_batch(xp, values, subset(ctxs, chosen))
                for i, out in zip(chosen.tolist(), outs):
                    samples[i] = out
        return samples
