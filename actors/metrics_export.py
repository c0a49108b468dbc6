"""Export raypipe's measurements through Ray's metrics (``ray.util.metrics``), so the Ray
dashboard and Prometheus see them next to Ray's own.

Every value is a gauge tagged with the service and the rank (and the stage, operator or queue
where it has one); Ray prefixes the names with ``ray_`` (``ray_raypipe_rank_stall_fraction``).
Pipeline actors export their own stages, queues and process; the coordinator exports each
rank's batches/s, stall and prefetch depth. Exporting is throttled by the callers
(:data:`EXPORT_INTERVAL_S`).
"""

from __future__ import annotations

from typing import Any

from ray.util.metrics import Gauge

EXPORT_INTERVAL_S = 2.0

# name: (description, tag keys beyond service and rank)
GAUGES = {
    "raypipe_rank_batches_per_second": ("batches a rank received per second (recent window)", ()),
    "raypipe_rank_stall_fraction": ("share of a rank's time spent waiting for input (recent window)", ()),
    "raypipe_rank_prefetch_in_flight": ("batch requests a rank has queued at its pipeline actor", ()),
    "raypipe_stage_per_second": (
        "calls per second of a stage's operator (samples/s on the CPU stage)",
        ("stage", "op"),
    ),
    "raypipe_stage_mean_ms": ("mean wall time of one call of a stage's operator, in ms", ("stage", "op")),
    "raypipe_queue_occupancy": ("mean fill of a pipeline queue, from 0 (empty) to 1 (full)", ("queue",)),
    "raypipe_actor_cpu_percent": ("CPU use of a pipeline actor's process, in percent of one core", ()),
    "raypipe_actor_rss_bytes": ("resident memory of a pipeline actor's process", ()),
    "raypipe_actor_copied_bytes": (
        "bytes of host batches a pipeline actor has copied into its replies, not shared with the rank",
        (),
    ),
    "raypipe_actor_gpu_memory_bytes": ("device memory held by a pipeline actor's pool", ()),
}
_made: dict[str, Gauge] = {}


def _gauge(name: str) -> Gauge:
    gauge = _made.get(name)
    if gauge is None:
        description, extra = GAUGES[name]
        gauge = _made[name] = Gauge(name, description=description, tag_keys=("service", "rank", *extra))
    return gauge


def _set(name: str, value: Any, tags: dict[str, str]) -> None:
    if value is not None:
        _gauge(name).set(float(value), tags=tags)


def export_rank(service: str, rank: int, report: dict[str, Any]) -> None:
    """One rank's figures (:meth:`cluster.rank_meter.RankMeter.report`)."""
    tags = {"service": service, "rank": str(rank)}
    _set("raypipe_rank_batches_per_second", report["batches_per_s"], tags)
    _set("raypipe_rank_stall_fraction", report["stall"], tags)
    _set("raypipe_rank_prefetch_in_flight", report["prefetch"]["in_flight"], tags)


def export_actor(service: str, rank: int, stats: dict[str, Any]) -> None:
    """A pipeline actor's stages, queues and process (its ``stats()``)."""
    tags = {"service": service, "rank": str(rank)}
    for row in stats["stages"]["rows"]:
        row_tags = {**tags, "stage": row["stage"], "op": row["name"]}
        _set("raypipe_stage_per_second", row["per_s"], row_tags)
        _set("raypipe_stage_mean_ms", row["mean_ms"], row_tags)
    for queue, fill in stats["queues"].items():
        _set("raypipe_queue_occupancy", fill["mean_fill"], {**tags, "queue": queue})
    process = stats["process"]
    _set("raypipe_actor_cpu_percent", process["cpu_percent"], tags)
    _set("raypipe_actor_rss_bytes", process["rss_bytes"], tags)
    _set("raypipe_actor_copied_bytes", stats["copied_bytes"], tags)
    _set("raypipe_actor_gpu_memory_bytes", stats["memory"]["pool_used_mb"] * 2**20, tags)
