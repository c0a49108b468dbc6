"""A training rank living in a Ray actor on a chosen node (as Ray Train workers do)."""

from __future__ import annotations

import ray

import raypipe as rp


class RankProcess:
    """Opens ``rank``'s loader from wherever Ray placed this actor and reads one batch."""

    def first_batch(self, service: str, rank: int, world_size: int) -> str:
        loader = rp.loader(service, rank=rank, world_size=world_size, output="numpy")
        next(iter(loader))
        return ray.get_runtime_context().get_node_id()
