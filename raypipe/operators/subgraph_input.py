"""``_subgraph_input``: a placeholder input of a :class:`raypipe.subgraph.Subgraph`, whose owner
gives it a value for each sample; it computes nothing itself."""

from __future__ import annotations

from ..operator import Operator, Schema, register


@register
class SubgraphInput(Operator):
    """Input ``slot`` of a subgraph."""

    schema = Schema("_subgraph_input", devices=("cpu", "gpu"), min_inputs=0, max_inputs=0)

    def configure(self, slot: int) -> None:
        self.slot = int(slot)

    def compute(self, xp, inputs, args, ctx):
        raise RuntimeError(f"_subgraph_input {self.slot} is given its values by the subgraph's owner")
