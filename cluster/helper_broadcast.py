"""Telling the ranks' pipeline actors which CPU helpers the service runs, without waiting on them.

The coordinator owns the helpers; the pipeline actors of the ranks attached in the current world
size use them. One thread sends each actor the helpers (``PipelineActor.set_helpers``, name ->
handle) when the set changes and when its rank attaches, and again every ``REPEAT_S`` while there
are helpers: an actor that Ray restarts comes back without helpers and tells no one (nothing a
pipeline actor does calls the coordinator), so only a repeat reaches it. A rank's actor usually
starts just after its rank attached: an actor not found yet is looked up again every ``RETRY_S``.
Every call is fire-and-forget; one that fails (the actor died, or another process's actor now holds
the name) drops the cached handle, so the next round looks the actor up and tells it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import ray

from raypipe import log

from .naming import NAMESPACE, pipeline_actor_name

LOG = log.get(__name__)
RETRY_S = 1.0  # how often the broadcast looks for due actors (a new one, one whose last call failed)
REPEAT_S = 5.0  # how often an actor is told the same helpers again (it may have been restarted)


class HelperBroadcast:
    """The helpers of service ``service`` and the ranks whose pipeline actors must know them."""

    def __init__(self, service: str):
        self._service = service
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._helpers: dict[str, Any] = {}
        self._actors: dict[int, Any] = {}  # handles found by name; Ray restarts an actor under the same handle
        self._told: dict[int, tuple[frozenset[str], float] | None] = {}  # rank -> (names, when), None: not yet
        threading.Thread(target=self._run, name="raypipe-helper-broadcast", daemon=True).start()

    def set_helpers(self, helpers: dict[str, Any]) -> None:
        """The helpers running now, by name: every actor is told at once."""
        with self._lock:
            self._helpers = dict(helpers)
        self._wake.set()

    def set_ranks(self, ranks: Iterable[int]) -> None:
        """The ranks attached in the current world size (the others are forgotten)."""
        with self._lock:
            ranks = set(ranks)
            self._told = {r: self._told.get(r) for r in ranks}
            self._actors = {r: a for r, a in self._actors.items() if r in ranks}
        self._wake.set()

    def attached(self, rank: int) -> None:
        """``rank`` attached, perhaps with a new actor under the old name: find its actor and tell it."""
        with self._lock:
            self._told[rank] = None
            self._actors.pop(rank, None)
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(RETRY_S)
            self._wake.clear()
            try:
                self._tell_due()
            except Exception:  # a Ray hiccup must not end the broadcast: the next round tries again
                LOG.exception("service %r: telling the pipeline actors their CPU helpers failed", self._service)

    def _tell_due(self) -> None:
        """Tell every actor whose turn has come (see the module docstring)."""
        now = time.monotonic()
        with self._lock:
            names = frozenset(self._helpers)
            due = [r for r, told in self._told.items() if self._is_due(told, names, now)]
        for rank in due:
            actor = self._actor(rank)
            if actor is None:
                continue
            with self._lock:
                if rank not in self._told:  # a smaller group took over meanwhile
                    continue
                helpers = dict(self._helpers)
                self._told[rank] = (frozenset(helpers), now)
                ref = actor.set_helpers.remote(helpers)
            ref.future().add_done_callback(lambda done, rank=rank, actor=actor: self._settled(rank, actor, done))

    @staticmethod
    def _is_due(told: tuple[frozenset[str], float] | None, names: frozenset[str], now: float) -> bool:
        if told is None:
            return bool(names)  # a new actor starts without helpers: only helpers are news to it
        told_names, when = told
        return told_names != names or (bool(names) and now - when >= REPEAT_S)

    def _actor(self, rank: int) -> Any | None:
        with self._lock:
            actor = self._actors.get(rank)
        if actor is not None:
            return actor
        try:
            actor = ray.get_actor(pipeline_actor_name(self._service, rank), namespace=NAMESPACE)
        except ValueError:
            return None
        with self._lock:
            if rank in self._told:
                self._actors[rank] = actor
        return actor

    def _settled(self, rank: int, actor: Any, done: Future) -> None:
        """A call's outcome: after a failure the rank's actor is looked up and told again."""
        if done.exception() is None:
            return
        with self._lock:
            if self._actors.get(rank) is actor:
                del self._actors[rank]
            if rank in self._told:
                self._told[rank] = None
