"""What a pipeline actor measures about itself beyond its pipeline's profile: its process (CPU,
memory) and how full its executor's queues are on average."""

from __future__ import annotations

import time
from typing import Any

import psutil

MIN_CPU_INTERVAL_S = 0.5  # CPU percent over shorter intervals is noise: keep the last figure


class ProcessMeter:
    """CPU use since the previous report (percent of one core), CPU seconds, resident memory and
    thread count of this process."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._last = (time.monotonic(), self._cpu_s())
        self._percent = 0.0

    def _cpu_s(self) -> float:
        times = self._process.cpu_times()
        return times.user + times.system

    def report(self) -> dict[str, Any]:
        now, cpu = time.monotonic(), self._cpu_s()
        if now - self._last[0] >= MIN_CPU_INTERVAL_S:
            self._percent = 100 * (cpu - self._last[1]) / (now - self._last[0])
            self._last = (now, cpu)
        return {
            "cpu_percent": round(self._percent, 1),
            "cpu_s": round(cpu, 3),
            "rss_bytes": self._process.memory_info().rss,
            "threads": self._process.num_threads(),
        }


class QueueMeter:
    """Mean fill of each executor queue over the samples taken (one per batch request)."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._samples = 0
        self._now: dict[str, dict[str, int]] = {}

    def sample(self, queues: dict[str, dict[str, int]]) -> None:
        """Record one snapshot ``{name: {"used", "size"}}`` (``Executor.queue_stats``)."""
        self._samples += 1
        self._now = queues
        for name, q in queues.items():
            self._sums[name] = self._sums.get(name, 0.0) + q["used"] / q["size"]

    def report(self) -> dict[str, dict[str, Any]]:
        """``{name: {"used", "size", "mean_fill"}}``: the last snapshot and the mean fill (0..1)."""
        return {name: {**q, "mean_fill": round(self._sums[name] / self._samples, 3)} for name, q in self._now.items()}
