"""Where a pipeline's time goes: wall time per stage and per operator, summed across threads.

Switched on per pipeline (:meth:`raypipe.Pipeline.enable_profiling`); when off the executor
pays one ``is None`` test per operator call. CPU-stage entries are per sample, GPU-stage
entries per batch (on a GPU they time queuing the kernels, not running them), and
``("cpu", "sample")`` is each sample's whole trip through the CPU stage, so what it has
beyond the operators' own time is the executor's per-sample Python overhead.
"""

from __future__ import annotations

import threading
import time
from typing import Any

SAMPLE = "sample"


class Profile:
    """Thread-safe sums of (calls, seconds) keyed by (stage, name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums: dict[tuple[str, str], list[float]] = {}
        self._started = time.perf_counter()

    def add(self, stage: str, name: str, seconds: float) -> None:
        """Count one call of ``name`` in ``stage`` that took ``seconds``."""
        with self._lock:
            entry = self._sums.setdefault((stage, name), [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def report(self) -> dict[str, Any]:
        """``{"rows": [{"stage", "name", "calls", "total_s", "mean_ms", "per_s"}, ...],
        "overhead_us_per_sample", "wall_s"}``, rows in the order they first appeared; ``per_s`` is
        calls per second of wall time since profiling began (samples/s for CPU-stage rows, batches/s
        for the others); the overhead is None before any sample."""
        with self._lock:
            sums = {key: tuple(value) for key, value in self._sums.items()}
            wall = time.perf_counter() - self._started
        rows = [
            {
                "stage": stage,
                "name": name,
                "calls": int(calls),
                "total_s": total,
                "mean_ms": 1000 * total / calls,
                "per_s": calls / wall if wall > 0 else 0.0,
            }
            for (stage, name), (calls, total) in sums.items()
        ]
        sample = sums.get(("cpu", SAMPLE))
        overhead = None
        if sample:
            operators = sum(total for (stage, name), (_, total) in sums.items() if stage == "cpu" and name != SAMPLE)
            overhead = 1e6 * (sample[1] - operators) / sample[0]
        return {"rows": rows, "overhead_us_per_sample": overhead, "wall_s": wall}
