"""The bottleneck doctor: from a service's ``stats()``, which stage limits the ranks and what to
try. A pure function of the measurements, so it is the same for ``svc.report()`` and
``raypipe doctor``.

The questions, in order: is any rank waiting for input at all (its stall fraction, and the
synthetic-loader comparison when one ran)? If so, in the worst rank's pipeline actor, which
stage is saturated: the CPU stage (its threads busy, batches piling up in front of it), the
reader within it (I/O), the GPU stage, or none of them, when finished batches wait for the
rank (the transfer to the rank is the limit)?
"""

from __future__ import annotations

from typing import Any

STALLED = 0.10  # a rank waiting for input this share of its time is input-bound
SLOWER = 0.90  # real loader below this share of the synthetic speed: input costs training time
SATURATED = 0.75  # a stage busy (or its queue full) this share of the time limits throughput
LARGE_SAMPLE_BYTES = 300_000  # float32 224x224x3 is 602 KB; uint8 is a quarter
SAMPLE = "sample"  # raypipe.profile's row for a sample's whole CPU-stage trip


def diagnose(stats: dict[str, Any]) -> dict[str, Any]:
    """``{"verdict", "bottleneck", "rank", "stall", "evidence", "suggestions", "synthetic", "operators",
    "complete"}``: ``verdict`` is ``"input-bound"``, ``"not input-bound"`` or ``"unknown"``; ``bottleneck``
    one of ``"cpu"``, ``"io"``, ``"gpu"``, ``"transfer"`` or None; ``complete`` is False when a needed
    measurement was missing (no timings yet, or the worst rank's pipeline actor did not answer)."""
    ranks = {int(r): v for r, v in stats.get("ranks", {}).items() if v.get("stall") is not None}
    if not ranks:
        evidence, suggestion = ["no rank has received a batch yet"], ["train for a while, then ask again"]
        return _report("unknown", None, None, evidence, suggestion, complete=False)
    rank = max(ranks, key=lambda r: ranks[r]["stall"])
    timing = ranks[rank]
    evidence = [
        f"rank {rank} waits for input {100 * timing['stall']:.1f}% of its time "
        f"({timing['wait_ms']:.1f} of {timing['step_ms']:.1f} ms per step, {timing['batches_per_s']} batches/s)"
    ]
    synthetic = timing.get("synthetic")
    slower = False
    if synthetic and synthetic.get("real_over_synthetic") is not None:
        ratio = synthetic["real_over_synthetic"]
        slower = ratio < SLOWER
        evidence.append(
            f"rank {rank} trains at {synthetic['real_batches_per_s']} batches/s with the real loader and "
            f"{synthetic['synthetic_batches_per_s']} with synthetic data ({100 * ratio:.0f}%)"
        )
    if timing["stall"] < STALLED and not slower:
        return _report(
            "not input-bound",
            None,
            rank,
            evidence,
            ["the loader keeps up: training itself (the model step) sets the pace; input tuning will not help"],
            timing,
        )
    actor = _actor(stats, rank)
    if actor is None:
        why = "its pipeline actor did not answer"
        suggestion = ["ask again while the rank trains (its actor goes with its loader)"]
        return _report("input-bound", None, rank, [*evidence, why], suggestion, timing, complete=False)
    bottleneck, stage_evidence, operators = _stage(actor)
    suggestions = _suggestions(bottleneck, actor, stats, operators)
    store = stats.get("object_store", {})
    if store.get("spilled_bytes"):
        stage_evidence.append(
            f"Ray has spilled {store['spilled_bytes'] / 2**20:.0f} MiB of objects to disk since the cluster started "
            f"(object store: {store['used_bytes'] / 2**20:.0f} of {store['capacity_bytes'] / 2**20:.0f} MiB in use)"
        )
        suggestions.append(
            "keep batches in the object store: lower the loader's prefetch, ship uint8 (rp.Normalize on the rank) "
            "or give the nodes a larger store (ray start --object-store-memory)"
        )
    return _report("input-bound", bottleneck, rank, evidence + stage_evidence, suggestions, timing, operators)


def _actor(stats: dict[str, Any], rank: int) -> dict[str, Any] | None:
    for actor in stats.get("actors", []):
        if actor.get("rank") == rank and actor.get("available") and "stages" in actor:
            return actor
    return None


def _stage(actor: dict[str, Any]) -> tuple[str | None, list[str], list[dict[str, Any]]]:
    """The saturated stage of one pipeline actor, the evidence, and its CPU operators by share of time."""
    profile = actor["stages"]
    wall = profile["wall_s"] or 1e-9
    rows = profile["rows"]
    cpu_ops = [r for r in rows if r["stage"] == "cpu" and r["name"] != SAMPLE]
    sample = next((r for r in rows if r["stage"] == "cpu" and r["name"] == SAMPLE), None)
    cpu_total = sum(r["total_s"] for r in cpu_ops) or 1e-9
    operators = sorted(
        (
            {"name": r["name"], "share": round(r["total_s"] / cpu_total, 3), "mean_ms": round(r["mean_ms"], 3)}
            for r in cpu_ops
        ),
        key=lambda o: -o["share"],
    )
    cpu_busy = sample["total_s"] / (wall * actor["threads"]) if sample else 0.0
    gpu_busy = sum(r["total_s"] for r in rows if r["stage"] == "gpu") / wall
    queues = actor["queues"]
    cpu_fill = queues.get("cpu", {}).get("mean_fill", 0.0)
    ready_fill = queues.get("ready", {}).get("mean_fill", 0.0)
    evidence = [
        f"CPU stage busy {100 * cpu_busy:.0f}% of {actor['threads']} thread(s), its queue "
        f"{100 * cpu_fill:.0f}% full; GPU stage busy {100 * gpu_busy:.0f}%; finished batches waiting for "
        f"the rank {100 * ready_fill:.0f}% of the time"
    ]
    if operators:
        top = operators[0]
        evidence.append(
            f"slowest CPU operator: {top['name']} ({100 * top['share']:.0f}% of CPU-stage time, "
            f"{top['mean_ms']} ms per sample)"
        )
    if cpu_busy >= SATURATED or (cpu_fill >= SATURATED and gpu_busy < SATURATED):
        reader = bool(operators) and operators[0]["name"] == actor.get("reader")
        return ("io" if reader else "cpu"), evidence, operators
    if gpu_busy >= SATURATED:
        return "gpu", evidence, operators
    if ready_fill >= 0.5:
        return "transfer", evidence, operators
    return None, [*evidence, "no stage is saturated: the pipeline actor is idle part of the time"], operators


def _suggestions(
    bottleneck: str | None, actor: dict[str, Any], stats: dict[str, Any], operators: list[dict[str, Any]]
) -> list[str]:
    helpers = stats.get("helpers", {})
    sample_bytes = actor["copied_bytes"] / max(1, actor["batches"] * actor["batch_size"])
    out = []
    if bottleneck in ("cpu", "io"):
        cpu_percent = actor["process"]["cpu_percent"]
        if cpu_percent < 80 * actor["threads"]:
            out.append(
                f"raise num_threads (now {actor['threads']}): the CPU stage is busy but its process uses only "
                f"{cpu_percent:.0f}% CPU, so its threads wait (I/O, sleeping or GIL-bound operators)"
            )
        if helpers.get("mode") in (0, None):
            out.append('add CPU helpers on nodes with spare cores: rp.serve(..., cpu_helpers="auto")')
        if any("decoders" in o["name"] for o in operators[:2]):
            out.append(
                'decode on the GPU: device="mixed" on the decoder (nvImageCodec), which leaves the CPU the reading'
            )
    if bottleneck == "io":
        out.append(
            "read fewer, larger files: convert the dataset to a container (raypipe convert SRC DST --format "
            'webdataset|tfrecord|caffe) and serve it with shuffle="buffer" for sequential reads'
        )
    if bottleneck == "gpu":
        out.append("the GPU stage is saturated: move cheap operators back to the CPU, or batch fewer GPU operators")
    if bottleneck == "transfer" or sample_bytes >= LARGE_SAMPLE_BYTES:
        out.append(
            f"ship fewer bytes ({sample_bytes / 1000:.0f} KB per sample now): dtype=types.UINT8 output and "
            "rp.loader(..., normalize=rp.Normalize(...)) on the rank send 4x fewer"
        )
    if bottleneck == "transfer":
        out.append("raise the loader's prefetch (rp.loader(..., prefetch=4)) to hide the transfer")
    if not out:
        out.append("no single stage stands out: compare with rp.synthetic_loader to confirm the loader is the limit")
    return out


def _report(
    verdict: str,
    bottleneck: str | None,
    rank: int | None,
    evidence: list[str],
    suggestions: list[str],
    timing: dict[str, Any] | None = None,
    operators: list[dict[str, Any]] | None = None,
    complete: bool = True,
) -> dict[str, Any]:
    return {
        "complete": complete,
        "verdict": verdict,
        "bottleneck": bottleneck,
        "rank": rank,
        "stall": timing["stall"] if timing else None,
        "synthetic": timing.get("synthetic") if timing else None,
        "evidence": evidence,
        "suggestions": suggestions,
        "operators": operators or [],
    }


def format_report(report: dict[str, Any]) -> str:
    """The report as a few lines of text, for ``raypipe doctor``."""
    head = report["verdict"] + (f", limited by the {report['bottleneck']} stage" if report["bottleneck"] else "")
    lines = [f"verdict: {head}", "evidence:"]
    lines += [f"  - {e}" for e in report["evidence"]]
    lines.append("try:")
    lines += [f"  - {s}" for s in report["suggestions"]]
    return "\n".join(lines)
