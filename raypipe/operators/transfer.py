"""``_transfer``: moves host data into the GPU stage (``DataNode.gpu()``)."""

from __future__ import annotations

from ..operator import Operator, Schema, register


@register
class Transfer(Operator):
    """Identity on the host; the Mixed stage moves its output to the device (or, for the output of a
    host batch step, the GPU stage does)."""

    schema = Schema("_transfer", devices=("mixed",))
    batch_transfer = True  # after a host batch step, the GPU stage moves the batch itself

    def compute(self, xp, inputs, args, ctx):
        return xp.asarray(inputs[0])

    def run_sample(self, inputs, args, ctx):
        return inputs[0]
