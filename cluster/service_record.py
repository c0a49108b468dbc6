"""What a service serves (its configuration and how its pipeline actors start), kept in Ray's
GCS key-value store under the service's name.

``rp.serve`` writes it before it starts the coordinator, and a rank's loader reads it from
there, not from the coordinator: the loader starts its pipeline actor while the coordinator is
still starting, so the two worker processes start at once instead of one after the other
(about 0.8 s of the time to the first batch on 2 cores). It never changes while the service
runs, and goes with the coordinator's record (:mod:`cluster.coordinator_record`) at shutdown.
The pipeline itself (factory and keyword arguments, which can be large) is kept apart, for the
actors that build it (:mod:`actors.served_pipeline`).
"""

from __future__ import annotations

from ray import cloudpickle

from actors import service_kv
from raypipe.service_config import ServiceConfig

from .actor_launch import ActorLaunch

PART = "record"


def save(service: str, config: ServiceConfig, launch: ActorLaunch) -> None:
    """Record what ``service`` serves (replacing the record of an earlier service of that name)."""
    blob = cloudpickle.dumps((config, launch))
    service_kv.put(service, PART, blob)


def load(service: str) -> tuple[ServiceConfig, ActorLaunch] | None:
    """``(config, launch)`` of ``service``, or None when no service of that name recorded one."""
    blob = service_kv.get(service, PART)
    return None if blob is None else cloudpickle.loads(blob)
