"""``cpu_helpers="auto"``: what the autoscaler remembers between rounds, and one round.

Each round takes every rank's stall since the last round from the rank's
:class:`~cluster.rank_meter.RankMeter`, the meter whose figures ``svc.stats()["ranks"]`` and the
bottleneck doctor report: the difference of its running sums of waited and trained time. Those
sums leave out the first batch of each pass (its wait is start-up: the pipeline actor starting
or seeking), so a start-up wait alarms the autoscaler no more than it alarms the doctor. With the
helpers' busy seconds since the last round, :func:`cluster.helper_policy.decide` (pure) names
the next step; after a change the autoscaler waits ``COOLDOWN_ROUNDS`` for it to take effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .helper_policy import Decision, decide, stall_fraction
from .rank_meter import RankMeter

COOLDOWN_ROUNDS = 2  # rounds a scaling change is given to take effect before the next decision
CALM_STALL = 0.02  # a round in which every rank stalls less than this is calm


@dataclass
class Autoscaler:
    """The rounds of a service whose helpers each run ``threads`` units at once, every
    ``interval_s``, up to ``max_helpers`` (None: no cap)."""

    interval_s: float
    threads: int
    max_helpers: int | None = None
    stall: dict[int, float] = field(default_factory=dict)  # each rank's, in the last round with timings
    calm: int = 0  # rounds in a row in which every rank stalled less than CALM_STALL
    cooling: int = 0  # rounds left to wait after the last change
    _timed: dict[int, tuple[float, float]] = field(default_factory=dict)  # meters' sums at the last round
    _busy: dict[str, float] = field(default_factory=dict)  # helpers' busy seconds at the last round

    def stalls_since_last_round(self, meters: Mapping[int, RankMeter]) -> dict[int, float]:
        """Each rank's stall over the batches it timed since the last call (ranks that timed none
        are left out); updates :attr:`stall` and :attr:`calm` when any rank timed batches."""
        stalls = {}
        for rank, meter in meters.items():
            waited, trained = meter.timed()
            before_waited, before_trained = self._timed.get(rank, (0.0, 0.0))
            self._timed[rank] = (waited, trained)
            if waited + trained > before_waited + before_trained:
                stalls[rank] = stall_fraction(waited - before_waited, trained - before_trained)
        if stalls:  # a round without timings says nothing: it neither calms nor alarms
            self.stall = stalls
            self.calm = self.calm + 1 if max(stalls.values()) < CALM_STALL else 0
        return stalls

    def decide_round(
        self, stalls: dict[int, float], busy_s: dict[str, float], helpers: int, can_add: Callable[[], bool]
    ) -> Decision | None:
        """The round's decision for ``helpers`` running helpers, given the ranks' ``stalls``
        (:meth:`stalls_since_last_round`), each helper's busy seconds so far and whether a node has
        room for one more (asked only when there is something to decide); None when no rank timed
        a batch this round."""
        busy = sum(max(0.0, b - self._busy.get(name, 0.0)) for name, b in busy_s.items())
        self._busy = dict(busy_s)
        if not stalls:
            return None
        decision = decide(
            stalls,
            helpers,
            can_add(),
            self.calm,
            spare_helpers=helpers - busy / (self.interval_s * self.threads),
            cooling=self.cooling,
            low=CALM_STALL,
            max_helpers=self.max_helpers,
        )
        self.cooling = max(0, self.cooling - 1)
        return decision

    def changed(self, action: str) -> None:
        """A helper was added or removed (``action``): wait for it to take effect; after a removal,
        calm counts again from zero."""
        self.cooling = COOLDOWN_ROUNDS
        if action == "remove":
            self.calm = 0

    def forget(self, ranks: list[int]) -> None:
        """``ranks`` are gone (a smaller group took over): their meters start again if they return."""
        for rank in ranks:
            self._timed.pop(rank, None)
            self.stall.pop(rank, None)
