"""The coordinator's state and the one function that changes it.

Every change is an event (:mod:`cluster.coordinator_events`) passed to
:meth:`CoordinatorState.apply`, as tf.data service's dispatcher does. Attachments, skipped
samples, restarts, resizes and the helpers are recorded (:meth:`CoordinatorState.to_record`,
kept by :mod:`cluster.coordinator_record`), so a restarted coordinator knows them;
acknowledged progress is not (it changes with every batch and the ranks keep their own
positions): after a restart it fills in again as ranks acknowledge their next batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .coordinator_events import (
    Acked,
    Attached,
    Decided,
    Event,
    HelperAdded,
    HelperRemoved,
    Resized,
    Restarted,
    Skipped,
)

DECISIONS_KEPT = 50


@dataclass
class CoordinatorState:
    """Where each rank attached, skipped samples, restarts, the world size when a training group
    of another size took over (None: the size the service was started with), the CPU helpers
    running and the last scaling decisions, and (not recorded) progress."""

    attached: dict[int, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[tuple[int, int], str] = field(default_factory=dict)
    restarts: int = 0
    world_size: int | None = None
    progress: dict[int, tuple[int, int]] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)  # CPU helper name -> node
    decisions: list[dict[str, Any]] = field(default_factory=list)  # helper scaling, newest last

    def apply(self, event: Event) -> bool:
        """Apply ``event``; True when it changed what the record holds (the caller rewrites the
        record). An event that repeats what is known (the same attachment, a sample already
        skipped, the same decision again) changes nothing. TypeError for anything but an event."""
        match event:
            case Attached(rank, location):
                if self.attached.get(rank) == location:
                    return False
                self.attached[rank] = dict(location)
            case Skipped(epoch, sample_index, source):
                if (epoch, sample_index) in self.skipped:
                    return False
                self.skipped[(epoch, sample_index)] = source
            case Restarted():
                self.restarts += 1
            case Resized(world_size):
                self.world_size = world_size
                for ranks in (self.attached, self.progress):
                    for rank in [r for r in ranks if r >= world_size]:
                        del ranks[rank]
            case Acked(rank, epoch, next_batch):
                self.progress[rank] = (epoch, next_batch)
            case HelperAdded(name, node, reason, at):
                self.helpers[name] = node
                self._decide("add", f"{name} on node {node[:12]}: {reason}", at)
            case HelperRemoved(name, reason, at):
                self.helpers.pop(name, None)
                self._decide("remove", f"{name}: {reason}", at)
            case Decided(action, reason, at):
                if self.decisions and (self.decisions[-1]["action"], self.decisions[-1]["reason"]) == (action, reason):
                    return False
                self._decide(action, reason, at)
            case _:
                raise TypeError(f"unknown coordinator event {event!r}: expected one of cluster.coordinator_events")
        return event.recorded

    def _decide(self, action: str, reason: str, at: float) -> None:
        self.decisions.append({"action": action, "reason": reason, "time": at})
        del self.decisions[:-DECISIONS_KEPT]

    def to_record(self) -> dict[str, Any]:
        """What the coordinator's record holds (everything but progress), JSON-serialisable."""
        return {
            "attached": {str(r): loc for r, loc in self.attached.items()},
            "skipped": [[e, i, src] for (e, i), src in sorted(self.skipped.items())],
            "restarts": self.restarts,
            "world_size": self.world_size,
            "helpers": dict(self.helpers),
            "decisions": list(self.decisions),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CoordinatorState:
        """The state a record (:meth:`to_record`) describes, progress empty."""
        return cls(
            attached={int(r): loc for r, loc in record["attached"].items()},
            skipped={(e, i): src for e, i, src in record["skipped"]},
            restarts=record["restarts"],
            world_size=record.get("world_size"),
            helpers=dict(record.get("helpers", {})),
            decisions=list(record.get("decisions", [])),
        )

    def skipped_report(self) -> dict[str, Any]:
        """How many samples were skipped (each epoch counts its own) and which files."""
        return {"count": len(self.skipped), "files": sorted(set(self.skipped.values()))}
