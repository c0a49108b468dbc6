"""The coordinator: one named Ray actor per service holding its configuration, the
rank -> pipeline-actor assignment, skipped samples and every rank's acknowledged progress.

It is restarted by Ray whenever it dies (``max_restarts=-1``) and reads back its
journaled state (:mod:`cluster.journal`); ranks never need it while iterating (they
talk to their own pipeline actor and tell the coordinator about progress without
waiting), and nothing it does waits on a pipeline actor.
"""

from __future__ import annotations

import os
from typing import Any

import ray

from raypipe.service_config import ServiceConfig

from . import journal
from .coordinator_state import CoordinatorState


class Coordinator:
    """Assigns ranks to pipeline actors (same node first) and records acknowledged batches."""

    def __init__(self, config: ServiceConfig, actors: list, actor_nodes: list[str], pg):
        self._pg = pg
        self._config = config
        self._actors = actors
        self._nodes = actor_nodes
        saved = journal.load(config.name) if ray.get_runtime_context().was_current_actor_reconstructed else None
        self._state = CoordinatorState.restore(saved) if saved else CoordinatorState()
        if saved:
            self._apply(("restart",))
        else:
            journal.save(config.name, self._state.snapshot())

    def _apply(self, event: tuple) -> None:
        if self._state.apply(event):
            journal.save(self._config.name, self._state.snapshot())

    def config(self) -> ServiceConfig:
        return self._config

    def resources(self) -> tuple[list, Any]:
        """The pipeline actors and the placement group, for replacing the service."""
        return self._actors, self._pg

    def attach(self, rank: int, node_id: str | None) -> tuple[Any, int]:
        """The pipeline actor that serves ``rank``: one on ``node_id`` when free, else any free one."""
        if rank not in self._state.assignment:
            taken = set(self._state.assignment.values())
            free = [s for s in range(len(self._actors)) if s not in taken]
            same_node = [s for s in free if self._nodes[s] == node_id]
            preferred = [s for s in free if s == rank]
            self._apply(("attach", rank, (same_node or preferred or free)[0]))
        slot = self._state.assignment[rank]
        return self._actors[slot], slot

    def ack(self, rank: int, epoch: int, next_batch: int, skipped: list[tuple[int, int, str]] = ()) -> None:
        """Rank ``rank`` has consumed every batch of ``epoch`` before ``next_batch``; ``skipped``
        lists (epoch, sample index, file) of samples its batches replaced."""
        for epoch_, index, source in skipped:
            self._apply(("skip", epoch_, index, source))
        self._apply(("ack", rank, epoch, next_batch))

    def snapshot(self) -> dict[str, Any]:
        """Everything needed to restore the service's position: small by design."""
        return {
            "config": self._config,
            "progress": {r: list(p) for r, p in self._state.progress.items()},
            "assignment": dict(self._state.assignment),
        }

    def stats(self) -> dict[str, Any]:
        """Progress per rank, skipped samples, and the coordinator's own restarts and pid."""
        return {
            "progress": {r: list(p) for r, p in self._state.progress.items()},
            "assignment": dict(self._state.assignment),
            "skipped": self._state.skipped_report(),
            "coordinator": {"pid": os.getpid(), "restarts": self._state.restarts},
        }
