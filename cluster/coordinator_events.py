"""The events that change a coordinator's state (:class:`cluster.coordinator_state.CoordinatorState`).

Each is a frozen dataclass that says whether it belongs in the coordinator's record
(:mod:`cluster.coordinator_record`): what a restarted coordinator must know again is recorded;
what changes with every batch (acknowledged progress) or says only that nothing changed (a
scaling decision to keep the helpers as they are) is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Attached:
    """Rank ``rank`` trains at ``location`` (node, GPU), where it has started its pipeline actor."""

    rank: int
    location: dict[str, Any]
    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class Skipped:
    """Sample ``sample_index`` of ``epoch`` (from file ``source``) could not be read and was replaced."""

    epoch: int
    sample_index: int
    source: str
    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class Restarted:
    """Ray restarted the coordinator, which read its record back."""

    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class Resized:
    """A training group of ``world_size`` ranks took over: the ranks from ``world_size`` up are gone."""

    world_size: int
    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class Acked:
    """Rank ``rank`` has consumed every batch of ``epoch`` before ``next_batch``."""

    rank: int
    epoch: int
    next_batch: int
    recorded: ClassVar[bool] = False


@dataclass(frozen=True)
class HelperAdded:
    """CPU helper ``name`` started on node ``node`` at ``at`` (seconds since the epoch), for ``reason``."""

    name: str
    node: str
    reason: str
    at: float
    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class HelperRemoved:
    """CPU helper ``name`` stopped, or went with a previous coordinator, at ``at``, for ``reason``."""

    name: str
    reason: str
    at: float
    recorded: ClassVar[bool] = True


@dataclass(frozen=True)
class Decided:
    """A scaling decision at ``at`` that changed no helper (``action`` is ``"keep"``), and why."""

    action: str
    reason: str
    at: float
    recorded: ClassVar[bool] = False


Event = Attached | Skipped | Restarted | Resized | Acked | HelperAdded | HelperRemoved | Decided
