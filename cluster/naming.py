"""Where a service's actors are registered: one fixed namespace, so any process finds them."""

from __future__ import annotations

NAMESPACE = "raypipe"


def coordinator_name(service: str) -> str:
    return f"{service}.coordinator"


def pipeline_actor_name(service: str, rank: int) -> str:
    return f"{service}.pipeline.{rank}"


def helper_name(service: str, index: int) -> str:
    return f"{service}.helper.{index}"
