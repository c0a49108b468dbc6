"""Where a service's actors are registered: one fixed namespace, so any process finds them."""

from __future__ import annotations

import ray

from actors.service_kv import NAMESPACE as NAMESPACE  # one namespace for the actors and the entries
from raypipe.errors import did_you_mean


def coordinator_name(service: str) -> str:
    return f"{service}.coordinator"


def pipeline_actor_name(service: str, rank: int) -> str:
    return f"{service}.pipeline.{rank}"


def helper_name(service: str, index: int) -> str:
    return f"{service}.helper.{index}"


def running_services() -> list[str]:
    """The services whose coordinator is registered on the cluster this process is connected to."""
    suffix = coordinator_name("")
    named = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]
    return sorted(n[: -len(suffix)] for n in named if n.endswith(suffix))


def no_such_service(name: str) -> str:
    """That no service ``name`` runs, with the names of those that do (the closest first)."""
    running = running_services()
    which = f"running: {', '.join(running)}" if running else "none runs"
    hint = did_you_mean(name, running)
    return f"no raypipe service named {name!r} on this Ray cluster{hint} ({which}; start one with rp.serve)"
