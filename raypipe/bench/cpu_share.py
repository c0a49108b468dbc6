"""Where the machine's CPU time went during a round: idle, and taken by the hypervisor.

On a virtual machine the host can run other guests on our cores (*steal* time in
``/proc/stat``); a round that lost a tenth of the CPUs that way is slower for reasons that have
nothing to do with the contender. :class:`CpuShare` reads the kernel's counters around a round
and gives those shares, so the report says which rows ran on a disturbed machine and an idle
share says a contender left CPUs unused. Linux only; elsewhere it measures nothing (None).
"""

from __future__ import annotations

from typing import Any

_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times() -> dict[str, int] | None:
    """The machine's CPU time so far in clock ticks, all CPUs summed (``/proc/stat``), or None."""
    try:
        with open("/proc/stat") as f:
            values = f.readline().split()
    except OSError:
        return None
    if not values or values[0] != "cpu":
        return None
    return {name: int(v) for name, v in zip(_FIELDS, values[1:])}


def shares(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, float] | None:
    """Percent of all CPU time between two :func:`cpu_times` that was ``idle`` (with I/O wait)
    and ``steal`` (taken by the hypervisor); None when either is missing or no time passed."""
    if before is None or after is None:
        return None
    delta = {name: after.get(name, 0) - before.get(name, 0) for name in _FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return None
    return {
        "idle_pct": 100 * (delta["idle"] + delta["iowait"]) / total,
        "steal_pct": 100 * delta["steal"] / total,
    }


class CpuShare:
    """A context that measures :func:`shares` over its body: ``result`` afterwards."""

    def __init__(self) -> None:
        self.result: dict[str, float] | None = None
        self._before: dict[str, int] | None = None

    def __enter__(self) -> CpuShare:
        self._before = cpu_times()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.result = shares(self._before, cpu_times())
