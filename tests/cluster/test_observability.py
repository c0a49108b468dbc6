"""Metrics, the bottleneck doctor and the synthetic loader on a real service.

The starved case serves ``slowed`` (an operator sleeping 50 ms per sample on one CPU thread)
to a rank whose training step takes 10 ms: the doctor must call it CPU-bound, name that
operator, and the synthetic-loader comparison must show the real loader far slower. The
control serves a fast pipeline to a rank whose step takes 100 ms: not input-bound.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
import ray

import raypipe as rp
from raypipe.cli import main

from .pipelines import indexed, slowed

STEP_S = 0.01


def _train(batches, step_s: float) -> int:
    """Iterate every batch, "training" ``step_s`` on each (the GPU step of a real job)."""
    seen = 0
    for _ in batches:
        time.sleep(step_s)
        seen += 1
    return seen


@pytest.fixture(scope="module")
def starved(cluster, jpeg_files):
    """A CPU-starved service after 20 synthetic and 12 real training steps of rank 0."""
    svc = rp.serve(slowed, name="svc-starved", files=jpeg_files, world_size=1, seed=1, replace=True)
    loader = rp.loader("svc-starved", rank=0, world_size=1, output="numpy")
    synthetic = rp.synthetic_loader(loader, batches=20)
    assert _train(synthetic, STEP_S) == 20
    for epoch in range(2):
        loader.set_epoch(epoch)
        assert _train(loader, STEP_S) == 5  # 24 files, batch 5, the last one padded
    yield svc, synthetic
    svc.shutdown()


def test_stats_hold_rank_actor_and_stage_metrics(starved):
    svc, _ = starved
    stats = svc.stats()
    rank = stats["ranks"][0]
    assert rank["batches"] == 10 and rank["prefetch"]["depth"] == 2
    assert rank["stall"] > 0.5, "50 ms per sample on one thread against a 10 ms step"
    assert rank["batches_per_s"] < 1 / (5 * 0.05) * 1.2, "at most one batch per 250 ms"
    (actor,) = stats["actors"]
    assert actor["threads"] == 1 and actor["reader"] == "'Reader'" and actor["batch_size"] == 5
    rows = {(r["stage"], r["name"]): r for r in actor["stages"]["rows"]}
    slow = next(r for (stage, name), r in rows.items() if stage == "cpu" and "python_function" in name)
    assert slow["mean_ms"] >= 50 and slow["calls"] >= 50
    assert set(actor["queues"]) == {"cpu", "gpu", "ready"} and actor["queues"]["cpu"]["mean_fill"] > 0.5
    assert actor["process"]["rss_bytes"] > 50 * 2**20 and actor["process"]["threads"] > 1
    assert actor["copied_bytes"] >= 10 * 5 * 32 * 32 * 3, "ten batches of 5 x 32 x 32 x 3 uint8"
    device = actor["device"]  # where the pipeline's parts run: here, no GPU asked for
    assert device["gpu"] is False and device["reason"] and device["kernels"]["path"] == "host"


def test_the_doctor_finds_the_slow_cpu_operator_and_the_synthetic_loader_shows_the_cost(starved):
    svc, synthetic = starved
    report = svc.report()
    assert report["verdict"] == "input-bound" and report["bottleneck"] == "cpu" and report["rank"] == 0
    assert "python_function" in report["operators"][0]["name"], report["operators"]
    assert synthetic.stats()["steps"] == 20
    comparison = report["synthetic"]
    assert comparison["batches"] == 20
    assert comparison["synthetic_batches_per_s"] > 50, "a 10 ms step with no input cost"
    assert comparison["real_over_synthetic"] < 0.2, "250 ms per batch against a 10 ms step"
    text = " ".join(report["suggestions"])
    assert "num_threads" in text and 'cpu_helpers="auto"' in text


def test_stats_and_doctor_commands(starved, capsys):
    assert main(["stats", "svc-starved", "--count", "1"]) == 0
    table = capsys.readouterr().out
    assert "svc-starved" in table and "python_function" in table and "stall %" in table
    lines = [line.split() for line in table.splitlines()]
    at = next(i for i, line in enumerate(lines) if line[:3] == ["rank", "node", "threads"])
    header, row = lines[at], lines[at + 1]
    assert header[3] == "nice" and row[3] == str(os.getpriority(os.PRIO_PROCESS, 0)), "the rank's niceness"
    assert main(["doctor", "svc-starved"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("verdict: input-bound, limited by the cpu stage") and "num_threads" in text
    assert main(["doctor", "svc-starved", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bottleneck"] == "cpu"
    assert main(["doctor", "no-such-service"]) == 1
    assert "no raypipe service named 'no-such-service'" in capsys.readouterr().err


def test_metrics_reach_each_nodes_prometheus_endpoint(starved):
    wanted = ("ray_raypipe_rank_stall_fraction", "ray_raypipe_stage_per_second", "ray_raypipe_actor_rss_bytes")
    found: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(found) < len(wanted):
        found = {}
        for node in ray.nodes():
            url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
            try:
                body = urllib.request.urlopen(url, timeout=5).read().decode()
            except OSError:
                continue
            for line in body.splitlines():
                name = line.split("{", 1)[0]
                if name in wanted and 'service="svc-starved"' in line:
                    found[name] = line
        time.sleep(1)
    assert set(found) == set(wanted), f"exported: {sorted(found)}"
    assert float(found["ray_raypipe_rank_stall_fraction"].rsplit(" ", 1)[1]) > 0.5


def test_a_fast_pipeline_under_a_slow_step_is_not_input_bound(cluster, jpeg_files):
    svc = rp.serve(indexed, name="svc-fed", files=jpeg_files, world_size=1, seed=1, replace=True)
    try:
        loader = rp.loader("svc-fed", rank=0, world_size=1, output="numpy")
        for epoch in range(2):
            loader.set_epoch(epoch)
            _train(loader, 0.1)
        report = svc.report()
        assert report["verdict"] == "not input-bound" and report["bottleneck"] is None
        assert report["stall"] < 0.1
    finally:
        svc.shutdown()


def test_the_doctor_waits_for_timings(cluster, jpeg_files):
    svc = rp.serve(indexed, name="svc-idle", files=jpeg_files, world_size=1, seed=1, replace=True)
    try:
        report = svc.report()
        assert report["verdict"] == "unknown" and report["evidence"] == ["no rank has received a batch yet"]
    finally:
        svc.shutdown()
