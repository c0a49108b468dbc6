"""The coordinator's state and the one function that changes it.

Every change is an event passed to :meth:`CoordinatorState.apply` (as tf.data
service's dispatcher does). Attachments and skipped samples are journaled, so a
restarted coordinator knows them; acknowledged progress is not (it changes with
every batch and the ranks keep their own positions): after a restart it fills in
again as ranks acknowledge their next batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JOURNALED = ("attach", "skip", "restart", "resize", "helper_added", "helper_removed")
DECISIONS_KEPT = 50


@dataclass
class CoordinatorState:
    """Where each rank attached, skipped samples, restarts, the world size when a training group
    of another size took over (None: the size the service was started with), and (not journaled)
    progress."""

    attached: dict[int, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[tuple[int, int], str] = field(default_factory=dict)
    restarts: int = 0
    world_size: int | None = None
    progress: dict[int, tuple[int, int]] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)  # CPU helper name -> node
    decisions: list[dict[str, Any]] = field(default_factory=list)  # helper scaling, newest last

    def apply(self, event: tuple) -> bool:
        """Apply ``event``; True when it must be journaled.

        ``("attach", rank, location)``, ``("skip", epoch, sample_index, source)``,
        ``("restart",)``, ``("resize", world_size)`` (the ranks from ``world_size`` up are gone),
        ``("ack", rank, epoch, next_batch)``, ``("helper_added", name, node,
        reason, time)``, ``("helper_removed", name, reason, time)``, ``("decision", action, reason,
        time)`` (a scaling decision that changed nothing; not journaled)."""
        kind, *args = event
        if kind == "attach":
            rank, location = args
            if self.attached.get(rank) == location:
                return False
            self.attached[rank] = dict(location)
        elif kind == "skip":
            epoch, sample_index, source = args
            if (epoch, sample_index) in self.skipped:
                return False
            self.skipped[(epoch, sample_index)] = source
        elif kind == "restart":
            self.restarts += 1
        elif kind == "resize":
            (self.world_size,) = args
            for ranks in (self.attached, self.progress):
                for rank in [r for r in ranks if r >= self.world_size]:
                    del ranks[rank]
        elif kind == "ack":
            rank, epoch, next_batch = args
            self.progress[rank] = (epoch, next_batch)
        elif kind == "helper_added":
            name, node, reason, when = args
            self.helpers[name] = node
            self._decide("add", f"{name} on node {node[:12]}: {reason}", when)
        elif kind == "helper_removed":
            name, reason, when = args
            self.helpers.pop(name, None)
            self._decide("remove", f"{name}: {reason}", when)
        elif kind == "decision":
            action, reason, when = args
            if self.decisions and (self.decisions[-1]["action"], self.decisions[-1]["reason"]) == (action, reason):
                return False
            self._decide(action, reason, when)
        else:
            raise ValueError(f"unknown coordinator event {event!r}")
        return kind in JOURNALED

    def _decide(self, action: str, reason: str, when: float) -> None:
        self.decisions.append({"action": action, "reason": reason, "time": when})
        del self.decisions[:-DECISIONS_KEPT]

    def snapshot(self) -> dict[str, Any]:
        """The journaled part, JSON-serialisable."""
        return {
            "attached": {str(r): loc for r, loc in self.attached.items()},
            "skipped": [[e, i, src] for (e, i), src in sorted(self.skipped.items())],
            "restarts": self.restarts,
            "world_size": self.world_size,
            "helpers": dict(self.helpers),
            "decisions": list(self.decisions),
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> CoordinatorState:
        """The state a snapshot describes (progress empty)."""
        return cls(
            attached={int(r): loc for r, loc in snapshot["attached"].items()},
            skipped={(e, i): src for e, i, src in snapshot["skipped"]},
            restarts=snapshot["restarts"],
            world_size=snapshot.get("world_size"),
            helpers=dict(snapshot.get("helpers", {})),
            decisions=list(snapshot.get("decisions", [])),
        )

    def skipped_report(self) -> dict[str, Any]:
        """How many samples were skipped (each epoch counts its own) and which files."""
        return {"count": len(self.skipped), "files": sorted(set(self.skipped.values()))}
