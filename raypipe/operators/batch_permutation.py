"""Samples reordered within their batch, as DALI's (mixup and cutmix pair each sample with another of
its batch): ``permute_batch`` gives output sample ``i`` as input sample ``indices[i]``;
``batch_permutation`` draws those indices, an int32 scalar per sample.

Both need the whole batch, so they run as batch steps (after the CPU stage on ``cpu``, in the GPU
stage on ``gpu``). ``batch_permutation``'s draw is keyed by (seed, epoch, the batch's first sample,
operator), so a batch gets the same permutation however it is computed; ``no_fixed_points`` redraws
until no ``out[i] == i`` (ignored for a batch of one, as DALI does), ``allow_repetitions`` draws each
index on its own.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import int_list

#: redraws of a permutation with a fixed point before giving up (a random permutation of n >= 2 has
#: none with probability about 1/e, so this never fails in practice)
_MAX_REDRAWS = 1000


@register
class PermuteBatch(Operator):
    """Output sample ``i`` is input sample ``indices[i]`` of the batch."""

    schema = Schema("permute_batch", devices=("cpu", "gpu"), arg_inputs=("indices",))
    batch_semantics = True  # on ``gpu`` a batch step with or without a GPU

    def configure(self, indices=None) -> None:
        self.indices = None if indices is None else int_list("permute_batch", "indices", indices)

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        if self.indices is None and "indices" not in arg_inputs:
            raise ArgumentError("permute_batch: indices is required")

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        return True

    def run_batch(self, xp, inputs, args, ctxs):
        batch, count = inputs[0], len(ctxs)
        if "indices" in args:
            indices = [int(np.asarray(v).reshape(-1)[0]) for v in args["indices"]]
        else:
            indices = list(self.indices)
        if len(indices) != count:
            raise ValueError(f"permute_batch: {len(indices)} indices for a batch of {count}")
        outside = [i for i in indices if not 0 <= i < count]
        if outside:
            raise ValueError(f"permute_batch: indices {outside} outside the batch of {count}")
        return [batch[i] for i in indices]


@register
class BatchPermutation(Operator):
    """A random permutation of the batch's indices (or, with repetitions, random indices)."""

    schema = Schema("batch_permutation", devices=("cpu",), min_inputs=0, max_inputs=0)

    def configure(self, allow_repetitions: bool = False, no_fixed_points: bool = False) -> None:
        self.allow_repetitions = bool(allow_repetitions)
        self.no_fixed_points = bool(no_fixed_points)

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        return True

    def output_layout(self, input_layouts) -> str:
        return ""

    def run_batch(self, xp, inputs, args, ctxs):
        count = len(ctxs)
        if not count:
            return []
        rng = self.rng(ctxs[0])
        avoid = self.no_fixed_points and count > 1
        if self.allow_repetitions:
            picks = rng.integers(0, count - 1 if avoid else count, count)
            if avoid:  # each index drawn from the others
                picks = picks + (picks >= np.arange(count))
        else:
            picks = rng.permutation(count)
            for _ in range(_MAX_REDRAWS):
                if not avoid or (picks != np.arange(count)).all():
                    break
                picks = rng.permutation(count)
        return [np.array(p, dtype=np.int32) for p in picks.tolist()]
