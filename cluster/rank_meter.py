"""One rank's input timings, from its acknowledgements: batches/s, stall and prefetch depth.

A rank's loader reports with every batch how long it waited for that batch and how long the
caller trained on the one before (:meth:`cluster.loader.Loader.__iter__`). The stall fraction
``waited / (waited + trained)`` is the share of the rank's time lost to input: NVIDIA's
measure of a starved GPU. Totals cover the service's life; the recent figures cover the last
``WINDOW`` batches, so a live view follows changes. The first batch of each pass over the
loader has nothing trained before it and a wait that is mostly start-up (the pipeline actor
starting, or seeking to a resumed position): it is counted but not timed. The
``"auto"`` helper autoscaler (:mod:`cluster.autoscaler`) reads the same sums, so it and the
doctor see one stall figure.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

from .helper_policy import stall_fraction

WINDOW = 32  # batches the recent figures cover


@dataclass
class RankMeter:
    """Sums and a recent window of one rank's per-batch timings."""

    batches: int = 0
    acks: int = 0  # acknowledgements that brought them (a rank sends several batches' timings in one)
    waited_s: float = 0.0
    trained_s: float = 0.0
    in_flight: int = 0
    prefetch: int = 0
    recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=WINDOW))
    synthetic: dict[str, float] | None = None

    def add(self, waited: float, trained: float, in_flight: int, prefetch: int, now: float | None = None) -> None:
        """One batch: waited for it ``waited`` s after training ``trained`` s on the one before, with
        ``in_flight`` more requests queued at the pipeline actor out of ``prefetch``."""
        self.batches += 1
        self.in_flight, self.prefetch = in_flight, prefetch
        if trained <= 0:
            return
        self.waited_s += waited
        self.trained_s += trained
        self.recent.append((time.monotonic() if now is None else now, waited, trained))

    def timed(self) -> tuple[float, float]:
        """Seconds waited and trained over every timed batch so far (the first batch of a pass left out)."""
        return self.waited_s, self.trained_s

    def add_synthetic(self, batches: int, trained: float) -> None:
        """Steps trained on a synthetic loader (same shapes, no I/O): the speed without input cost."""
        synthetic = self.synthetic or {"batches": 0, "train_s": 0.0}
        synthetic["batches"] += batches
        synthetic["train_s"] += trained
        self.synthetic = synthetic

    def report(self) -> dict[str, Any]:
        """Plain dict: totals, the recent window's batches/s, stall and step time, prefetch depth,
        and the synthetic loader's speed when one ran (``synthetic`` against ``real`` batches/s)."""
        recent = list(self.recent)
        waited = sum(w for _, w, _ in recent)
        trained = sum(t for _, _, t in recent)
        span = recent[-1][0] - recent[0][0] if len(recent) > 1 else 0.0
        out: dict[str, Any] = {
            "batches": self.batches,
            "acks": self.acks,
            "batches_per_s": round((len(recent) - 1) / span, 3) if span > 0 else None,
            "stall": round(stall_fraction(waited, trained), 4) if recent else None,
            "stall_total": round(stall_fraction(self.waited_s, self.trained_s), 4) if self.batches else None,
            "step_ms": round(1000 * (waited + trained) / len(recent), 3) if recent else None,
            "wait_ms": round(1000 * waited / len(recent), 3) if recent else None,
            "prefetch": {"in_flight": self.in_flight, "depth": self.prefetch},
        }
        if self.synthetic and self.synthetic["batches"]:
            out["synthetic"] = speed_against_synthetic(self.synthetic, waited + trained, len(recent))
        return out


def speed_against_synthetic(synthetic: dict[str, float], real_s: float, real_batches: int) -> dict[str, Any]:
    """Batches/s trained on synthetic data and on the real loader, and their ratio (below 1: the
    loader slows training down by that factor)."""
    synthetic_rate = synthetic["batches"] / synthetic["train_s"] if synthetic["train_s"] > 0 else None
    real_rate = real_batches / real_s if real_s > 0 and real_batches else None
    ratio = real_rate / synthetic_rate if synthetic_rate and real_rate else None
    return {
        "batches": int(synthetic["batches"]),
        "synthetic_batches_per_s": round(synthetic_rate, 3) if synthetic_rate else None,
        "real_batches_per_s": round(real_rate, 3) if real_rate else None,
        "real_over_synthetic": round(ratio, 4) if ratio else None,
    }
