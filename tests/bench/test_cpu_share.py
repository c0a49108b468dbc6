"""The machine's idle and stolen CPU shares around a round, from the kernel's counters."""

from __future__ import annotations

import time

import pytest

from raypipe.bench.cpu_share import CpuShare, cpu_times, shares

pytestmark = pytest.mark.skipif(cpu_times() is None, reason="no /proc/stat (not Linux)")


def test_shares_are_of_all_cpu_time_between_two_readings():
    before = {"user": 100, "nice": 0, "system": 0, "idle": 50, "iowait": 0, "irq": 0, "softirq": 0, "steal": 0}
    after = {"user": 150, "nice": 10, "system": 10, "idle": 60, "iowait": 10, "irq": 0, "softirq": 0, "steal": 10}
    assert shares(before, after) == {"idle_pct": 20.0, "steal_pct": 10.0}
    assert shares(before, before) is None, "no time passed"
    assert shares(None, after) is None


def test_a_busy_round_leaves_less_idle_than_a_sleeping_one():
    with CpuShare() as sleeping:
        time.sleep(0.5)
    with CpuShare() as busy:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            pass
    for share in (sleeping.result, busy.result):
        assert 0 <= share["steal_pct"] <= 100 - share["idle_pct"] + 1e-9 <= 100 + 1e-9  # float rounding
    # one core of the machine's kept busy: its share of the time is not idle
    assert busy.result["idle_pct"] < sleeping.result["idle_pct"]
