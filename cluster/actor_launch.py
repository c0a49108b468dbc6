"""How a service starts its pipeline actors and CPU helpers, as its record keeps it.

Apart from :mod:`cluster.placement` (which starts them) so that reading a service's record
(:mod:`cluster.service_record`: every loader, ``raypipe stats``) does not import the actor classes.
"""

from __future__ import annotations

import dataclasses

from actors import niceness


@dataclasses.dataclass(frozen=True)
class ActorLaunch:
    """How a service starts its pipeline actors and CPU helpers: what they reserve, and their
    scheduling priority (what they run, they read from :mod:`actors.served_pipeline`)."""

    num_cpus: float
    max_restarts: int
    max_task_retries: int
    startup_timeout_s: float
    niceness: int | None = None

    def niceness_here(self) -> int:
        """The niceness of an actor the calling process starts: ``niceness``, or the caller's own."""
        return self.niceness if self.niceness is not None else niceness.current()
