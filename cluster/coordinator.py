"""The coordinator: one named Ray actor per service holding its configuration, how to start
a pipeline actor, where every rank attached, skipped samples and every rank's acknowledged
progress.

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
from .placement import ActorLaunch


class Coordinator:
    """Tells each rank how to start its pipeline actor, records where it attached and which
    batches it acknowledged. (The actors belong to the ranks, so a rank's actor goes with it.)"""

    def __init__(self, config: ServiceConfig, launch: ActorLaunch):
        self._config = config
        self._launch = launch
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

    def attach(self, rank: int, location: dict[str, Any]) -> ActorLaunch:
        """Rank ``rank`` trains at ``location`` (node, GPU): record it and say how to start its
        pipeline actor there."""
        self._apply(("attach", rank, location))
        return self._launch

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
            "attached": dict(self._state.attached),
        }

    def stats(self) -> dict[str, Any]:
        """Progress per rank, skipped samples, and the coordinator's own restarts and pid."""
        return {
            "progress": {r: list(p) for r, p in self._state.progress.items()},
            "attached": dict(self._state.attached),
            "skipped": self._state.skipped_report(),
            "coordinator": {"pid": os.getpid(), "restarts": self._state.restarts},
        }
