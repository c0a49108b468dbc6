"""The printed report: what ran where, then one table row per contender, from the summary
that ``--json`` writes (so the table and the JSON always agree)."""

from __future__ import annotations

from typing import Any

TITLE = "ResNet-50 training pipeline: random-area crop decode, resize 224x224, random mirror, normalize, CHW"
NOTES = (
    "img/s: median over rounds, after the first batch and the warm-up; MP/s: img/s x the mean source megapixels",
    "1st batch s: from start-up (building the pipeline, starting workers, serve) to the first batch, median",
    "peak MiB: most memory (PSS) of this process and the contender's worker processes above this process's own "
    "at the start of the round; store MiB: peak Ray object store in use (sampled each second); both medians "
    "over rounds; spill MiB: bytes Ray spilled from the object store to disk during a round, the most of any round",
    "idle %: the machine's CPU time left idle during a round (start-up included); steal %: taken by the "
    "hypervisor for other guests (a virtual machine's noise: compare rows whose steal is alike); both of all "
    "CPUs, medians over rounds",
)


def _number(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def format_report(summary: dict[str, Any]) -> str:
    """The header lines, the table and the notes (reference, skipped and failed contenders)."""
    m, d, s = summary["machine"], summary["dataset"], summary["settings"]
    reference = summary["reference"]
    lines = [
        f"raypipe bench: {TITLE}",
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['gpu']}, Python {m['python']}",
        f"data: {d['images']} JPEGs, mean {d['mean_width']:.0f}x{d['mean_height']:.0f} "
        f"({d['mean_megapixels']:.3f} MP, {d['mean_kib']:.0f} KiB) in {d['root']}"
        + ("" if d["source"] == d["root"] else f" ({d['source']})"),
        f"settings: batch {s['batch_size']}, {s['threads']} threads (or workers) per contender, {s['rounds']} "
        f"alternating round(s); each contender: a first batch (start-up), {s['warmup_batches']} batches untimed, "
        f"then epochs of {s['batches_per_epoch']} batches timed until {s['timed_seconds']:g} s have passed "
        "(the service rows: an epoch, then epochs timed)",
        "",
    ]
    ratio_header = "vs DALI" if reference["name"] == "dali-cpu" else f"vs {reference['name'] or 'ref'}"
    header = (
        "contender",
        "img/s",
        "MP/s",
        ratio_header,
        "1st batch s",
        "peak MiB",
        "store MiB",
        "spill MiB",
        "idle %",
        "steal %",
    )
    rows = [
        (
            row["label"],
            _number(row["images_per_s"], ".0f"),
            _number(row["megapixels_per_s"], ".1f"),
            _number(row["ratio"], ".2f", "x"),
            _number(row["first_batch_s"], ".2f"),
            _number(row["peak_memory_mib"], ".0f"),
            "-" if row["store_peak_mib"] is None else f"{row['store_peak_mib']:.0f}",
            "-" if row.get("store_spilled_mib") is None else f"{row['store_spilled_mib']:.0f}",
            _number(row["idle_pct"], ".0f"),
            _number(row["steal_pct"], ".1f"),
        )
        for row in summary["contenders"]
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))
    lines += ["", f"reference: {reference['note']}", *NOTES]
    lines += [f"skipped {c['name']}: {c['reason']}" for c in summary["skipped"]]
    lines += [f"FAILED {c['name']}: {c['reason']}" for c in summary["failed"]]
    return "\n".join(lines)
