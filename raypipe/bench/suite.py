"""Run the contenders in alternating rounds (round 1: each once, round 2: each once, ...) so
that a noisy machine affects them alike, then reduce to medians, ratios to the reference
loader and one JSON-able summary (the table is printed from it)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from tqdm import tqdm

from raypipe.backend import gpu_unavailable_reason

from .contenders import Contender, Workload
from .cpu_share import CpuShare
from .dataset import Dataset
from .memory import PeakMemory, StorePeak

MIB = 2**20


@dataclasses.dataclass
class Record:
    """A contender's measured rounds, or why it stopped (it is then left out of later rounds)."""

    contender: Contender
    rounds: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    failure: str | None = None


@contextlib.contextmanager
def local_ray(cpus: int, gpus: int) -> Iterator[None]:
    """A fresh local Ray for one round of one contender, with ``gpus`` logical GPUs for the
    service's ranks. Fresh each time, as a job has it: Ray Data leaves actors of its own running
    (``_StatsActor``, ``_AutoscalingCoordinatorActor``, about 1.3 % of a core each), which would
    otherwise take CPU from every later round on Ray."""
    import ray

    if ray.is_initialized():
        raise RuntimeError("raypipe bench starts a local Ray of its own; this process already has one")
    ray.init(
        address="local",
        num_cpus=cpus,
        num_gpus=gpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    try:
        yield
    finally:
        ray.shutdown()


def run_rounds(
    contenders: list[Contender],
    dataset: Dataset,
    batch_size: int,
    threads: int,
    rounds: int,
    warmup: int = 0,
    seconds: float = 0.0,
) -> list[Record]:
    """Every contender once per round, in order, ``rounds`` times, each timed over whole epochs
    until ``seconds`` have passed, under a progress bar (on a terminal); a contender that raises
    is recorded as failed and left out of later rounds."""
    records = [Record(c) for c in contenders]
    bar = tqdm(total=rounds * len(records), unit="run", file=sys.stderr, disable=None, leave=False)
    with bar:
        for r in range(rounds):
            work = Workload(dataset.root, dataset.paths, batch_size, threads, r, warmup, seconds)
            for record in records:
                bar.set_postfix_str(f"round {r + 1}: {record.contender.name}")
                if record.failure is None:
                    try:
                        record.rounds.append(_one_round(record.contender, work))
                    except Exception as exc:
                        record.failure = f"round {r + 1}: {type(exc).__name__}: {exc}"
                        bar.write(f"{record.contender.name} failed in {record.failure}", file=sys.stderr)
                bar.update()
    return records


def _one_round(contender: Contender, work: Workload) -> dict[str, Any]:
    """Time one round, watching memory (and the object store for contenders on Ray, each on a
    fresh local Ray started before the probes, so its daemons are not counted)."""
    on_ray = contender.uses_ray
    with local_ray(work.threads, contender.ranks) if on_ray else contextlib.nullcontext():
        store = StorePeak() if on_ray else contextlib.nullcontext()
        with PeakMemory() as memory, store, CpuShare() as cpu:
            timing = contender.run(work)
    share = cpu.result or {}
    return {
        "round": work.round + 1,
        "images": timing.images,
        "images_per_s": timing.images_per_s,
        "first_batch_s": timing.first_batch_s,
        "peak_memory_mib": None if memory.extra_bytes is None else memory.extra_bytes / MIB,
        "store_peak_mib": store.peak / MIB if on_ray else None,
        "store_spilled_mib": store.spilled / MIB if on_ray else None,
        "idle_pct": share.get("idle_pct"),
        "steal_pct": share.get("steal_pct"),
    }


def machine() -> dict[str, Any]:
    """CPU count and model (/proc/cpuinfo), the GPU situation, Python and OS."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "gpu": "GPU 0 usable" if gpu_unavailable_reason() is None else f"no GPU ({gpu_unavailable_reason()})",
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def summarize(
    records: list[Record], skipped: dict[Contender, str], dataset: Dataset, settings: dict[str, Any]
) -> dict[str, Any]:
    """The report: machine, data set, settings, one row per contender that finished every
    round (medians of its rounds, whose raw values it keeps), the reference and what was
    skipped or failed."""
    rows = []
    for record in records:
        if record.failure is not None:
            continue
        rounds = record.rounds
        images_per_s = statistics.median(r["images_per_s"] for r in rounds)
        rows.append(
            {
                "name": record.contender.name,
                "label": record.contender.label,
                "images_per_s": images_per_s,
                "megapixels_per_s": images_per_s * dataset.mean_megapixels,
                "first_batch_s": statistics.median(r["first_batch_s"] for r in rounds),
                "peak_memory_mib": _median(r["peak_memory_mib"] for r in rounds),
                "store_peak_mib": _median(r["store_peak_mib"] for r in rounds),
                "store_spilled_mib": _max(r.get("store_spilled_mib") for r in rounds),
                "idle_pct": _median(r["idle_pct"] for r in rounds),
                "steal_pct": _median(r["steal_pct"] for r in rounds),
                "rounds": rounds,
            }
        )
    reference = _reference(records, skipped, rows)
    base = next((row["images_per_s"] for row in rows if row["name"] == reference["name"]), None)
    for row in rows:
        row["ratio"] = row["images_per_s"] / base if base else None
    return {
        "machine": machine(),
        "dataset": dataset.as_dict(),
        "settings": settings,
        "reference": reference,
        "contenders": rows,
        "skipped": [{"name": c.name, "label": c.label, "reason": why} for c, why in skipped.items()],
        "failed": [
            {"name": r.contender.name, "label": r.contender.label, "reason": r.failure, "rounds": r.rounds}
            for r in records
            if r.failure is not None
        ],
    }


def _median(values: Iterable[float | None]) -> float | None:
    """The median, or None when a round could not measure (memory outside Linux)."""
    values = list(values)
    return None if None in values else statistics.median(values)


def _max(values: Iterable[float | None]) -> float | None:
    """The largest, or None when a round did not measure (contenders without Ray)."""
    values = list(values)
    return None if None in values else max(values)


def _reference(records: list[Record], skipped: dict[Contender, str], rows: list[dict]) -> dict[str, Any]:
    """DALI's CPU pipeline when it ran; else the fastest other reference loader (torch, Ray
    Data) that ran, saying why; else none (ratios n/a)."""
    done = {row["name"]: row for row in rows}
    if "dali-cpu" in done:
        return {"name": "dali-cpu", "label": done["dali-cpu"]["label"], "note": "ratios are to DALI's CPU pipeline"}
    why = next((why for c, why in skipped.items() if c.name == "dali-cpu"), None)
    why = why or next((r.failure for r in records if r.contender.name == "dali-cpu"), None) or "not selected"
    others = [done[r.contender.name] for r in records if r.contender.reference and r.contender.name in done]
    if not others:
        return {"name": None, "label": None, "note": f"no DALI ({why}) and no other reference loader ran: ratios n/a"}
    best = max(others, key=lambda row: row["images_per_s"])
    return {
        "name": best["name"],
        "label": best["label"],
        "note": f"no DALI ({why}): ratios are to {best['label']}, the fastest other reference loader",
    }
