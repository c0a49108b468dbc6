"""Profiling a pipeline: every operator call counted, each thread's first samples and then one in
TIMING_STRIDE timed, the per-sample overhead derived."""

from __future__ import annotations

import threading

import pytest

from raypipe import ArgumentError, fn, pipeline_def
from raypipe.profile import COUNTED, EXACT, FULLY_TIMED, SAMPLE, SAMPLED, TIMING_STRIDE, Profile, report_between


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


def test_a_report_between_two_reports_holds_only_what_happened_in_between():
    profile = Profile()
    profile.add("cpu", "op", 2.0)  # a warm-up's slow first call
    profile.add("cpu", SAMPLE, 2.5)
    profile.add("gpu", "op", 1.0)
    before = profile.report()
    for _ in range(4):
        profile.add("cpu", "op", 0.001)
        profile.add("cpu", SAMPLE, 0.0015)
    profile.add("caller", "wait", 0.25)
    after = profile.report()
    between = report_between(before, after)
    rows = {(r["stage"], r["name"]): (r["calls"], r["total_s"], r["mean_ms"]) for r in between["rows"]}
    assert rows.keys() == {("cpu", "op"), ("cpu", SAMPLE), ("caller", "wait")}, "the idle GPU row is left out"
    assert rows[("cpu", "op")] == (4, pytest.approx(0.004), pytest.approx(1.0))
    assert rows[("caller", "wait")] == (1, 0.25, 250.0)
    assert between["wall_s"] == pytest.approx(after["wall_s"] - before["wall_s"])
    assert between["overhead_us_per_sample"] == pytest.approx(500.0)
    assert report_between(after, after) == {"rows": [], "overhead_us_per_sample": None, "wall_s": 0.0}


def test_each_thread_times_its_first_samples_and_then_one_in_the_stride():
    profile = Profile()
    turns = {}
    n = FULLY_TIMED + 2 * TIMING_STRIDE + 1

    def take(name: str) -> None:
        turns[name] = [profile.timing_turn() for _ in range(n)]

    threads = [threading.Thread(target=take, args=(str(i),)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [EXACT] * FULLY_TIMED + ([SAMPLED] + [COUNTED] * (TIMING_STRIDE - 1)) * 2 + [SAMPLED]
    assert turns == {"0": expected, "1": expected}


def test_counted_calls_take_the_mean_of_the_sampled_ones_and_a_slow_first_call_counts_once():
    profile = Profile()
    profile.add("cpu", "op", 0.100)  # a first call's warm-up
    profile.add("cpu", "op", 0.002, SAMPLED)
    profile.count("cpu", ["op"] * 7 + ["never timed"])
    report = profile.report()
    assert [(r["name"], r["calls"], r["total_s"]) for r in report["rows"]] == [("op", 9, pytest.approx(0.116))]
    profile.add("cpu", "never timed", 0.001)
    profile.add("cpu", "exact only", 0.003)
    profile.count("cpu", ["exact only"])
    rows = {r["name"]: (r["calls"], r["total_s"]) for r in profile.report()["rows"]}
    assert rows == {"op": (9, pytest.approx(0.116)), "never timed": (2, 0.002), "exact only": (2, 0.006)}


def test_a_chunk_counts_a_call_per_sample():
    profile = Profile()
    profile.add("cpu", "op", 0.016, EXACT, calls=16)  # a chunk of 16 samples, timed as a whole
    profile.add("cpu", "op", 0.008, SAMPLED, calls=8)
    profile.count("cpu", ["op"], calls=16)
    report = profile.report()
    assert [(r["name"], r["calls"], r["total_s"]) for r in report["rows"]] == [("op", 40, pytest.approx(0.040))]


def test_threads_add_to_sums_of_their_own_that_the_report_adds_up():
    profile = Profile()
    reports = []
    adding = threading.Barrier(4)

    def add() -> None:
        adding.wait()
        for _ in range(5000):
            profile.add("cpu", "op", 0.001)

    threads = [threading.Thread(target=add) for _ in range(3)]
    for t in threads:
        t.start()
    adding.wait()
    while any(t.is_alive() for t in threads):
        reports.append(profile.report())  # while the threads add: never raises
    for t in threads:
        t.join()
    (row,) = profile.report()["rows"]
    assert (row["calls"], row["total_s"]) == (15000, pytest.approx(15.0))
    assert all(r["rows"][0]["calls"] <= 15000 for r in reports if r["rows"])


def test_samples_past_the_stride_and_skipped_ones_are_all_counted(jpeg_files, tmp_path):
    bad = tmp_path / "truncated.jpg"
    data = open(jpeg_files[0], "rb").read()
    bad.write_bytes(data[: len(data) // 3])
    files = [str(bad) if k % 4 == 3 else jpeg_files[k % len(jpeg_files)] for k in range(2 * FULLY_TIMED)]

    @pipeline_def(batch_size=FULLY_TIMED + 2 * TIMING_STRIDE, num_threads=1, seed=0)
    def skipping():
        jpegs, _ = fn.readers.file(files=files, name="Reader")
        images = fn.decoders.image(jpegs, on_error="skip", name="decode")
        return fn.resize(images, resize_x=16, resize_y=16, name="resize")

    with skipping() as pipe:
        pipe.enable_profiling()
        pipe.run()
        assert pipe.skipped_samples
    rows = {r["name"]: r for r in pipe.profile()["rows"] if r["stage"] == "cpu"}
    read = rows["'Reader'"]["calls"]  # samples 0, 1, ... in order (one thread): every fourth is bad
    assert read >= FULLY_TIMED + 2 * TIMING_STRIDE, "the batch's samples, perhaps some prefetched ones"
    assert rows["'decode'"]["calls"] == read, "bad samples were decoded too"
    assert rows["'resize'"]["calls"] == rows[SAMPLE]["calls"] == read - read // 4
    assert rows["'decode'"]["mean_ms"] > 0
    assert rows[SAMPLE]["total_s"] > rows["'resize'"]["total_s"], "timed and counted on the same samples"
