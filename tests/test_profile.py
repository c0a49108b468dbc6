"""Profiling a pipeline: every operator call counted and timed, the per-sample overhead derived."""

from __future__ import annotations

import pytest

from raypipe import ArgumentError, fn, pipeline_def
from raypipe.profile import SAMPLE, Profile


@pipeline_def(batch_size=4, num_threads=2, seed=0)
def decode_resize(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image(jpegs, name="decode")
    return fn.resize(images, resize_x=32, resize_y=24, name="resize"), labels


def test_every_call_is_counted_and_the_overhead_is_what_the_operators_do_not_explain(jpeg_files):
    with decode_resize(jpeg_files[:8]) as pipe:
        with pytest.raises(ArgumentError, match="call enable_profiling"):
            pipe.profile()
        pipe.enable_profiling()
        for _ in range(2):
            pipe.run()
    report = pipe.profile()  # closed: no sample is half counted
    rows = {(r["stage"], r["name"]): r for r in report["rows"]}
    samples = rows[("cpu", SAMPLE)]["calls"]
    assert samples >= 8, "both batches' samples (and perhaps some prefetched ones)"
    for name in ("'decode'", "'resize'", "'Reader'"):
        assert rows[("cpu", name)]["calls"] == samples
    assert rows[("caller", "wait for a batch")]["calls"] == 2
    assert rows[("mixed", "wait for samples, move the batch")]["calls"] >= 2
    operators = sum(r["total_s"] for (stage, name), r in rows.items() if stage == "cpu" and name != SAMPLE)
    assert rows[("cpu", SAMPLE)]["total_s"] >= operators
    assert report["overhead_us_per_sample"] == pytest.approx(
        1e6 * (rows[("cpu", SAMPLE)]["total_s"] - operators) / samples
    )


def test_the_report_sums_per_stage_and_name():
    profile = Profile()
    empty = profile.report()
    assert (empty["rows"], empty["overhead_us_per_sample"]) == ([], None)
    for seconds in (0.001, 0.003):
        profile.add("cpu", "op", seconds)
        profile.add("cpu", SAMPLE, seconds + 0.0005)
    profile.add("gpu", "op", 0.01)
    report = profile.report()
    first = report["rows"][0]
    assert {k: first[k] for k in ("stage", "name", "calls", "total_s", "mean_ms")} == {
        "stage": "cpu",
        "name": "op",
        "calls": 2,
        "total_s": 0.004,
        "mean_ms": 2.0,
    }
    assert first["per_s"] == pytest.approx(2 / report["wall_s"]) and report["wall_s"] >= empty["wall_s"]
    assert [(r["stage"], r["name"]) for r in report["rows"]] == [("cpu", "op"), ("cpu", SAMPLE), ("gpu", "op")]
    assert report["overhead_us_per_sample"] == pytest.approx(500.0)
