"""``_transfer``: moves host data into the GPU stage (``DataNode.gpu()``)."""

from __future__ import annotations

from ..operator import Operator, Schema, register


@register
class Transfer(Operator):
    """Identity on the host; the Mixed stage moves its output to the device."""

    schema = Schema("_transfer", devices=("mixed",))

    def run_sample(self, inputs, args, ctx):
        return inputs[0]
