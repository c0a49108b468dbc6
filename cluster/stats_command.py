"""Watch a running service: per rank batches/s, stall and prefetch; per pipeline actor CPU,
memory, object-store bytes, GPU memory and queue fill; per stage and operator calls/s and time.

    raypipe stats imagenet                 # refresh every 2 s until Ctrl-C
    raypipe stats imagenet --count 1       # one table
    raypipe stats imagenet --json          # one JSON object per refresh (svc.stats())

Connects to the Ray cluster in ``RAY_ADDRESS`` (or the local one)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

HELP = "show a running service's metrics live (ranks, pipeline actors, stages)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``raypipe stats``."""
    parser.add_argument("name", help="the service's name (rp.serve(..., name=...))")
    parser.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between refreshes")
    parser.add_argument("--count", type=int, default=0, metavar="N", help="stop after N refreshes (0: never)")
    parser.add_argument("--json", action="store_true", help="print svc.stats() as JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    """Print the service's metrics every ``--interval`` seconds."""
    from .service import connect

    svc = connect(args.name)
    shown = 0
    try:
        while True:
            stats = svc.stats()
            if args.json:
                print(json.dumps(stats, default=str), flush=True)
            else:
                if sys.stdout.isatty() and shown:
                    print("\033[2J\033[H", end="")
                print(format_stats(args.name, stats), flush=True)
            shown += 1
            if args.count and shown >= args.count:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def format_stats(name: str, stats: dict[str, Any]) -> str:
    """``svc.stats()`` as three small tables: ranks, pipeline actors, stages (summed over actors)."""
    lines = [f"raypipe service {name!r}  {time.strftime('%H:%M:%S')}", ""]
    lines.append(_table(["rank", "batches", "batches/s", "stall %", "wait ms", "step ms", "in flight"], _ranks(stats)))
    lines += ["", _table(_ACTOR_HEADER, [_actor_row(a) for a in stats["actors"]])]
    lines += ["", _table(["stage", "operator", "calls/s", "mean ms", "share of CPU"], _stages(stats["actors"]))]
    helpers = stats.get("helpers", {})
    lines += ["", f"CPU helpers: {helpers.get('mode')} requested, {len(helpers.get('running', {}))} running"]
    skipped = stats.get("skipped", {})
    if skipped.get("count"):
        lines.append(f"skipped samples: {skipped['count']}")
    lines.append(_store_line(stats.get("object_store", {})))
    return "\n".join(lines)


def _store_line(store: dict[str, Any]) -> str:
    if not store.get("available"):
        return f"object store: unavailable ({store.get('why', 'not reported')})"
    return (
        f"object store: {store['used_bytes'] / 2**20:.0f} of {store['capacity_bytes'] / 2**20:.0f} MiB in use; "
        f"spilled {store['spilled_bytes'] / 2**20:.0f} MiB ({store['spilled_objects']} objects), restored "
        f"{store['restored_bytes'] / 2**20:.0f} MiB since the cluster started"
    )


_ACTOR_HEADER = [
    "rank", "node", "threads", "nice", "cpu %", "rss MB", "shm MB", "copied MB", "gpu MB", "cpu queue", "ready",
]  # fmt: skip


def _ranks(stats: dict[str, Any]) -> list[list[str]]:
    rows = []
    for rank, r in sorted(stats.get("ranks", {}).items(), key=lambda kv: int(kv[0])):
        stall = "-" if r["stall"] is None else f"{100 * r['stall']:.1f}"
        in_flight = f"{r['prefetch']['in_flight']}/{r['prefetch']['depth']}"
        rows.append([str(rank), str(r["batches"]), _num(r["batches_per_s"]), stall, _num(r["wait_ms"]),
                     _num(r["step_ms"]), in_flight])  # fmt: skip
    return rows


def _actor_row(a: dict[str, Any]) -> list[str]:
    if not a.get("available") or "process" not in a:
        return [str(a["rank"]), a.get("why", "unavailable")] + [""] * (len(_ACTOR_HEADER) - 2)
    q = a["queues"]
    fill = {k: f"{100 * v['mean_fill']:.0f}%" for k, v in q.items()}
    return [
        str(a["rank"]),
        a["node_id"][:8],
        str(a["threads"]),
        str(a.get("niceness", "-")),
        f"{a['process']['cpu_percent']:.0f}",
        f"{a['process']['rss_bytes'] / 2**20:.0f}",
        f"{a['host_ring']['exported_bytes'] / 2**20:.0f}" if a.get("host_ring") else "-",
        f"{a['copied_bytes'] / 2**20:.0f}",
        f"{a['memory']['pool_used_mb']:.0f}",
        fill.get("cpu", "-"),
        fill.get("ready", "-"),
    ]


def _stages(actors: list[dict[str, Any]]) -> list[list[str]]:
    summed: dict[tuple[str, str], list[float]] = {}
    for a in actors:
        for row in a.get("stages", {}).get("rows", []):
            entry = summed.setdefault((row["stage"], row["name"]), [0.0, 0.0, 0.0])
            entry[0] += row["per_s"]
            entry[1] += row["total_s"]
            entry[2] += row["calls"]
    cpu_total = sum(v[1] for (stage, name), v in summed.items() if stage == "cpu" and name != "sample") or 1.0
    rows = []
    for (stage, name), (per_s, total, calls) in summed.items():
        share = f"{100 * total / cpu_total:.0f}%" if stage == "cpu" and name != "sample" else ""
        rows.append([stage, name, f"{per_s:.1f}", f"{1000 * total / max(calls, 1):.2f}", share])
    return rows


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)
