"""Where a pipeline's time goes: wall time per stage and per operator, summed across threads.

Switched on per pipeline (:meth:`raypipe.Pipeline.enable_profiling`); when off the executor
pays one ``is None`` test per operator call. CPU-stage entries are per sample, GPU-stage
entries per batch (on a GPU they time queuing the kernels, not running them), and
``("cpu", "sample")`` is each sample's whole trip through the CPU stage, so what it has
beyond the operators' own time is the executor's per-sample Python overhead.

A pipeline actor profiles every sample it makes, and timing each operator call of each sample
cost it about 2 % of its rate (two clock reads and a sum per call, with the caches cold after
every image). So each thread of the CPU stage times its first :data:`FULLY_TIMED` samples
(exactly: a first call's warm-up counts once), then one sample in :data:`TIMING_STRIDE`, whose
times stand for the samples it only counts. Calls are exact; seconds are exact for small runs and
estimated past them. A chunk that the CPU stage runs node by node (where the GPU decodes) is
timed or counted as a whole, each operator call counting a call per sample. Each thread adds to
sums of its own, without a lock; a report adds the threads' sums up.
"""

from __future__ import annotations

import threading
import time
from typing import Any

SAMPLE = "sample"
#: Each CPU-stage thread times this many samples first, then one in :data:`TIMING_STRIDE`.
FULLY_TIMED = 16
TIMING_STRIDE = 8
#: How a sample is profiled (:meth:`Profile.timing_turn`): timed and counted as it is; timed, its
#: times standing for the counted samples too; or only counted.
EXACT, SAMPLED, COUNTED = 0, 1, 2


class Profile:
    """Calls and seconds keyed by (stage, name), one set of sums per thread; :meth:`report` adds
    them up. Safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the lists below, which change only on a thread's or key's first add
        self._tables: list[dict[tuple[str, str], list]] = []
        self._keys: dict[tuple[str, str], None] = {}  # every key, in the order it first appeared
        self._local = threading.local()
        self._started = time.perf_counter()

    def add(self, stage: str, name: str, seconds: float, turn: int = EXACT, calls: int = 1) -> None:
        """Count ``calls`` calls of ``name`` in ``stage`` that took ``seconds`` together (a chunk of
        samples run at once counts a call per sample), timed on ``turn`` (EXACT or SAMPLED)."""
        entry = self._entry(stage, name)
        entry[2 * turn] += calls
        entry[2 * turn + 1] += seconds

    def count(self, stage: str, names: list[str], calls: int = 1) -> None:
        """Count ``calls`` untimed calls of each of ``names`` in ``stage``."""
        for name in names:
            self._entry(stage, name)[4] += calls

    def timing_turn(self) -> int:
        """How the calling thread profiles its next sample: EXACT for its first :data:`FULLY_TIMED`,
        then SAMPLED for one in :data:`TIMING_STRIDE` and COUNTED for the others."""
        local = self._local
        turn = getattr(local, "turn", 0)
        local.turn = turn + 1
        if turn < FULLY_TIMED:
            return EXACT
        return SAMPLED if (turn - FULLY_TIMED) % TIMING_STRIDE == 0 else COUNTED

    def _entry(self, stage: str, name: str) -> list:
        """The calling thread's [exact calls, their seconds, sampled calls, their seconds, counted calls]."""
        try:
            table = self._local.table
        except AttributeError:
            table = self._local.table = {}
            with self._lock:
                self._tables.append(table)
        key = (stage, name)
        entry = table.get(key)
        if entry is None:
            entry = table[key] = [0, 0.0, 0, 0.0, 0]
            with self._lock:
                self._keys.setdefault(key)
        return entry

    def _sums(self) -> dict[tuple[str, str], tuple[int, float]]:
        """Every thread's (calls, seconds) added up, keys in the order they first appeared. Counted
        calls take the mean of the sampled ones (of the exact ones before any is sampled); a key
        with no timed call yet is left out. A call being counted meanwhile may show in its count
        and not yet in its seconds."""
        with self._lock:
            keys, tables = list(self._keys), list(self._tables)
        sums = {key: [0, 0.0, 0, 0.0, 0] for key in keys}
        for table in tables:
            for key, entry in list(table.items()):
                total = sums[key]
                for i, value in enumerate(list(entry)):
                    total[i] += value
        out = {}
        for key, (exact, exact_s, sampled, sampled_s, counted) in sums.items():
            if sampled:
                out[key] = (exact + sampled + counted, exact_s + sampled_s * (sampled + counted) / sampled)
            elif exact:
                out[key] = (exact + counted, exact_s * (exact + counted) / exact)
        return out

    def report(self) -> dict[str, Any]:
        """``{"rows": [{"stage", "name", "calls", "total_s", "mean_ms", "per_s"}, ...],
        "overhead_us_per_sample", "wall_s"}``, rows in the order they first appeared; ``per_s`` is
        calls per second of wall time since profiling began (samples/s for CPU-stage rows, batches/s
        for the others); the overhead is None before any sample."""
        return _as_report(self._sums(), time.perf_counter() - self._started)


def report_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What one :meth:`Profile.report` says happened between two reports of the same profile
    (``before`` taken first): each row's calls and seconds since ``before``, rows without a call
    since left out, and the wall time between the two; the per-sample overhead is of the
    interval too (None without a sample in it). A warm-up's compiles and first allocations
    then stay out of a steady state's figures."""
    earlier = {(row["stage"], row["name"]): (row["calls"], row["total_s"]) for row in before["rows"]}
    since = {}
    for row in after["rows"]:
        key = (row["stage"], row["name"])
        calls, total = earlier.get(key, (0, 0.0))
        if row["calls"] > calls:
            since[key] = (row["calls"] - calls, row["total_s"] - total)
    return _as_report(since, after["wall_s"] - before["wall_s"])


def _as_report(sums: dict[tuple[str, str], tuple[int, float]], wall: float) -> dict[str, Any]:
    """:meth:`Profile.report`'s dict of ``(calls, seconds)`` per (stage, name) over ``wall`` seconds."""
    rows = [
        {
            "stage": stage,
            "name": name,
            "calls": calls,
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
