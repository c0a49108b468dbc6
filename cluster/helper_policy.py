"""Where CPU helpers go and how many a service runs: pure functions over measurements.

Placement (:func:`choose_node`): CPU-only nodes first, then GPU nodes, and on a GPU node never
the CPUs its trainers need: ``reserve_per_gpu`` CPUs per GPU stay free. Among nodes of a kind,
the one with the most CPUs left after the helpers already chosen.

Scaling (:func:`decide`, for ``cpu_helpers="auto"``): ranks report how long they waited for
data against how long they trained; a helper is added while the worst rank stalls more than
``high`` of the time and a node has room, and removed once every rank has stalled less than
``low`` for ``patience`` evaluations in a row *and* the helpers were idle for at least one
helper's worth of time (so removing one does not bring the stall back). After a change, decisions
wait ``cooldown`` evaluations for it to take effect (a new helper first builds its pipeline).
Every decision carries its reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeInfo:
    """A Ray node as helper placement sees it."""

    node_id: str
    cpus_free: float
    gpus: float


def room(node: NodeInfo, placed: int, cpus_per_helper: float, reserve_per_gpu: float) -> float:
    """CPUs a node can still give helpers after ``placed`` more of them and its trainers' reserve."""
    return node.cpus_free - node.gpus * reserve_per_gpu - placed * cpus_per_helper


def choose_node(
    nodes: list[NodeInfo], placed: dict[str, int], cpus_per_helper: float, reserve_per_gpu: float
) -> str | None:
    """The node for one more helper, or None when no node has room (see the module docstring)."""
    fits = [n for n in nodes if room(n, placed.get(n.node_id, 0), cpus_per_helper, reserve_per_gpu) >= cpus_per_helper]
    if not fits:
        return None
    best = min(
        fits,
        key=lambda n: (n.gpus > 0, -room(n, placed.get(n.node_id, 0), cpus_per_helper, reserve_per_gpu), n.node_id),
    )
    return best.node_id


@dataclass(frozen=True)
class Decision:
    """What the autoscaler does next and why."""

    action: str  # "add" | "remove" | "keep"
    reason: str


def stall_fraction(waited_s: float, trained_s: float) -> float:
    """The share of a rank's time spent waiting for data."""
    total = waited_s + trained_s
    return waited_s / total if total > 0 else 0.0


def decide(
    stalls: dict[int, float],
    helpers: int,
    can_add: bool,
    calm_rounds: int,
    *,
    spare_helpers: float = 0.0,
    cooling: int = 0,
    high: float = 0.10,
    low: float = 0.02,
    patience: int = 3,
    max_helpers: int | None = None,
) -> Decision:
    """The next step for ``helpers`` running helpers, given each rank's recent stall fraction;
    ``calm_rounds`` counts the evaluations in a row that every rank stalled less than ``low``,
    ``spare_helpers`` how many helpers' worth of time the helpers were idle in the last one,
    ``cooling`` how many evaluations are left to wait after the last change."""
    if not stalls:
        return Decision("keep", "no rank has reported timings yet")
    if cooling > 0:
        return Decision("keep", f"waiting {cooling} more round(s) for the last change to take effect")
    rank, worst = max(stalls.items(), key=lambda kv: kv[1])
    if worst > high:
        if max_helpers is not None and helpers >= max_helpers:
            return Decision("keep", f"rank {rank} waits {worst:.0%} of the time, but {helpers} helpers is the maximum")
        if not can_add:
            return Decision("keep", f"rank {rank} waits {worst:.0%} of the time, but no node has a free CPU")
        return Decision("add", f"rank {rank} waits for data {worst:.0%} of the time (> {high:.0%})")
    if worst < low and helpers > 0 and calm_rounds >= patience:
        if spare_helpers < 1.0:
            return Decision(
                "keep",
                f"every rank waits less than {low:.0%}, but the helpers are busy (spare "
                f"{spare_helpers:.1f} helpers): removing one would bring the stall back",
            )
        return Decision(
            "remove",
            f"every rank waited less than {low:.0%} for {calm_rounds} rounds and the helpers had "
            f"{spare_helpers:.1f} helpers' worth of idle time",
        )
    return Decision("keep", f"worst stall {worst:.0%} (rank {rank}) is within [{low:.0%}, {high:.0%}]")
