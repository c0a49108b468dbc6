"""The coordinator: one named Ray actor per service holding its configuration, the
rank -> pipeline-actor assignment and every rank's acknowledged progress.

Its state is a few numbers per rank (see :meth:`Coordinator.snapshot`), so it can
be checkpointed and restored. Ranks never wait for each other: each talks to its
own pipeline actor, and the coordinator is only asked at attach time and told about
progress.
"""

from __future__ import annotations

from typing import Any

import ray


class Coordinator:
    """Assigns ranks to pipeline actors (same node first) and records acknowledged batches."""

    def __init__(self, config: dict[str, Any], actors: list, actor_nodes: list[str], pg):
        self._pg = pg
        self._config = config
        self._actors = actors
        self._nodes = actor_nodes
        self._slot_of_rank: dict[int, int] = {}
        self._progress: dict[int, tuple[int, int]] = {}

    def config(self) -> dict[str, Any]:
        return self._config

    def resources(self) -> tuple[list, Any]:
        """The pipeline actors and the placement group, for replacing the service."""
        return self._actors, self._pg

    def attach(self, rank: int, node_id: str | None) -> tuple[Any, int]:
        """The pipeline actor that serves ``rank``: one on ``node_id`` when free, else any free one."""
        if rank not in self._slot_of_rank:
            taken = set(self._slot_of_rank.values())
            free = [s for s in range(len(self._actors)) if s not in taken]
            same_node = [s for s in free if self._nodes[s] == node_id]
            preferred = [s for s in free if s == rank]
            self._slot_of_rank[rank] = (same_node or preferred or free)[0]
        slot = self._slot_of_rank[rank]
        return self._actors[slot], slot

    def ack(self, rank: int, epoch: int, next_batch: int) -> None:
        """Rank ``rank`` has consumed every batch of ``epoch`` before ``next_batch``."""
        self._progress[rank] = (epoch, next_batch)

    def snapshot(self) -> dict[str, Any]:
        """Everything needed to restore the service's position: small by design."""
        return {
            "config": self._config,
            "progress": {r: list(p) for r, p in self._progress.items()},
            "assignment": dict(self._slot_of_rank),
        }

    def stats(self) -> dict[str, Any]:
        """Progress per rank and what each pipeline actor has served."""
        actors = ray.get([a.stats.remote() for a in self._actors])
        return {"progress": {r: list(p) for r, p in self._progress.items()}, "actors": actors}
