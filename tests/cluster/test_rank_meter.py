"""A rank's timings: totals, the recent window, the first batch of a pass left untimed."""

from __future__ import annotations

import pytest

from cluster.rank_meter import WINDOW, RankMeter, speed_against_synthetic


def test_the_recent_window_follows_the_last_batches_and_the_totals_everything():
    meter = RankMeter()
    meter.add(5.0, 0.0, 1, 2, now=0.0)  # first batch of a pass: start-up, counted but not timed
    for i in range(1, 41):
        waited = 0.03 if i <= 8 else 0.01  # the first batches wait longer
        meter.add(waited, 0.09, 2, 2, now=i * 0.1)
    report = meter.report()
    assert report["batches"] == 41 and report["prefetch"] == {"in_flight": 2, "depth": 2}
    assert report["stall"] == pytest.approx(0.1), "the last 32 batches only"
    total = (8 * 0.03 + 32 * 0.01) / (8 * 0.03 + 32 * 0.01 + 40 * 0.09)
    assert report["stall_total"] == pytest.approx(total, abs=1e-4), "rounded to 4 places"
    assert report["batches_per_s"] == pytest.approx(10.0) and report["step_ms"] == pytest.approx(100.0)
    assert len(meter.recent) == WINDOW
    assert "synthetic" not in report


def test_nothing_timed_yet_reads_as_none():
    meter = RankMeter()
    meter.add(3.0, 0.0, 0, 2)
    report = meter.report()
    assert report["batches"] == 1 and report["stall"] is None and report["batches_per_s"] is None


def test_synthetic_speed_against_the_real_one():
    assert speed_against_synthetic({"batches": 50, "train_s": 1.0}, real_s=2.0, real_batches=20) == {
        "batches": 50,
        "synthetic_batches_per_s": 50.0,
        "real_batches_per_s": 10.0,
        "real_over_synthetic": 0.2,
    }
    meter = RankMeter()
    meter.add_synthetic(16, 0.4)
    meter.add_synthetic(4, 0.1)
    meter.add(0.0, 0.05, 0, 2, now=0.0)
    meter.add(0.05, 0.05, 0, 2, now=0.1)
    assert meter.report()["synthetic"]["synthetic_batches_per_s"] == pytest.approx(40.0)
    assert meter.report()["synthetic"]["real_over_synthetic"] == pytest.approx(13.333 / 40, abs=1e-3)
