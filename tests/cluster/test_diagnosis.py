"""The doctor's rules on stats shaped as ``svc.stats()`` returns them (the real-service cases are
in test_observability.py): each bottleneck, and the suggestions that follow from it."""

from __future__ import annotations

import pytest

from cluster.diagnosis import diagnose, format_report
from cluster.rank_meter import RankMeter


def _rank(stall_ms: float, step_ms: float, synthetic: tuple[int, float] | None = None) -> dict:
    meter = RankMeter()
    for i in range(10):
        meter.add(stall_ms / 1000, (step_ms - stall_ms) / 1000, 1, 2, now=i * step_ms / 1000)
    if synthetic:
        meter.add_synthetic(*synthetic)
    return meter.report()


def _actor(cpu_s: float, gpu_s: float, fills: dict, reader_s: float = 0.01, threads: int = 2, **over) -> dict:
    rows = [
        {"stage": "cpu", "name": "'Reader'", "calls": 100, "total_s": reader_s, "mean_ms": 10 * reader_s, "per_s": 10},
        {"stage": "cpu", "name": "'decoders.image'#1", "calls": 100, "total_s": cpu_s, "mean_ms": 10 * cpu_s,
         "per_s": 10},
        {"stage": "cpu", "name": "sample", "calls": 100, "total_s": cpu_s + reader_s, "mean_ms": 1, "per_s": 10},
        {"stage": "gpu", "name": "'resize'#2", "calls": 10, "total_s": gpu_s, "mean_ms": 100 * gpu_s, "per_s": 1},
    ]  # fmt: skip
    actor = {
        "rank": 0,
        "available": True,
        "threads": threads,
        "reader": "'Reader'",
        "batch_size": 10,
        "batches": 10,
        "stages": {"rows": rows, "wall_s": 10.0, "overhead_us_per_sample": 5.0},
        "queues": {k: {"used": 0, "size": 2, "mean_fill": v} for k, v in fills.items()},
        "process": {"cpu_percent": 190.0, "rss_bytes": 1, "cpu_s": 1, "threads": 5},
        "copied_bytes": 100 * 150_000,
        "memory": {"pool_used_mb": 0.0},
    }
    return {**actor, **over}


def _stats(rank: dict, actor: dict, helpers: int | str = 0) -> dict:
    return {"ranks": {0: rank}, "actors": [actor], "helpers": {"mode": helpers, "running": {}}}


def test_a_busy_cpu_stage_is_cpu_bound_and_names_its_slowest_operator():
    report = diagnose(_stats(_rank(80, 100), _actor(18.0, 0.5, {"cpu": 0.95, "gpu": 0.0, "ready": 0.0})))
    assert (report["verdict"], report["bottleneck"], report["rank"], report["complete"]) == (
        "input-bound",
        "cpu",
        0,
        True,
    )
    assert report["stall"] == pytest.approx(0.8) and report["operators"][0]["name"] == "'decoders.image'#1"
    text = " ".join(report["suggestions"])
    assert 'cpu_helpers="auto"' in text and 'device="mixed"' in text
    assert "num_threads" not in text, "its threads already use 190% of 2 cores"
    assert format_report(report).startswith("verdict: input-bound, limited by the cpu stage")


def test_helpers_already_running_are_not_suggested_again():
    stats = _stats(_rank(80, 100), _actor(18.0, 0.5, {"cpu": 0.95, "gpu": 0.0, "ready": 0.0}), helpers="auto")
    assert "cpu_helpers" not in " ".join(diagnose(stats)["suggestions"])


def test_a_reader_taking_most_of_the_cpu_stage_is_io_bound():
    actor = _actor(1.0, 0.5, {"cpu": 0.9, "gpu": 0.0, "ready": 0.0}, reader_s=17.0, process={"cpu_percent": 20.0})
    report = diagnose(_stats(_rank(50, 100), actor))
    assert report["bottleneck"] == "io" and report["operators"][0]["name"] == "'Reader'"
    text = " ".join(report["suggestions"])
    assert "raypipe convert" in text and "num_threads (now 2)" in text, "a waiting reader wants threads"


def test_a_saturated_gpu_stage_is_gpu_bound():
    report = diagnose(_stats(_rank(40, 100), _actor(2.0, 9.0, {"cpu": 0.1, "gpu": 1.0, "ready": 0.0})))
    assert report["bottleneck"] == "gpu"


def test_ready_batches_waiting_for_a_stalled_rank_mean_the_transfer_is_slow():
    actor = _actor(2.0, 0.5, {"cpu": 0.1, "gpu": 0.0, "ready": 0.9}, copied_bytes=100 * 602_112)
    report = diagnose(_stats(_rank(40, 100), actor))
    assert report["bottleneck"] == "transfer"
    text = " ".join(report["suggestions"])
    assert "602 KB per sample" in text and "types.UINT8" in text and "prefetch" in text


def test_a_rank_that_hardly_waits_is_not_input_bound_unless_synthetic_data_trains_faster():
    fed = _stats(_rank(2, 100), _actor(18.0, 0.5, {"cpu": 0.95, "gpu": 0.0, "ready": 0.0}))
    assert diagnose(fed)["verdict"] == "not input-bound"
    # 100 steps of synthetic data in 5 s (20/s) against the real loader's 10/s
    slowed = _stats(_rank(2, 100, synthetic=(100, 5.0)), _actor(18.0, 0.5, {"cpu": 0.95, "gpu": 0.0, "ready": 0.0}))
    report = diagnose(slowed)
    assert report["verdict"] == "input-bound" and report["synthetic"]["real_over_synthetic"] == pytest.approx(0.5)
    assert "with synthetic data (50%)" in " ".join(report["evidence"])


def test_no_timings_and_a_silent_actor_are_reported_as_such():
    empty = diagnose({"ranks": {}, "actors": []})
    assert empty["verdict"] == "unknown" and not empty["complete"]
    silent = diagnose(_stats(_rank(80, 100), {"rank": 0, "available": False, "why": "no answer"}))
    assert silent["verdict"] == "input-bound" and silent["bottleneck"] is None and not silent["complete"]
    assert "did not answer" in " ".join(silent["evidence"])
