"""The ``cpu_helpers="auto"`` autoscaler fed by the ranks' meters: one stall figure with the doctor,
start-up waits left out, and the rounds' calm, cooldown and helper idle time."""

from __future__ import annotations

import pytest

from cluster.autoscaler import COOLDOWN_ROUNDS, Autoscaler
from cluster.rank_meter import RankMeter


def _feed(meter: RankMeter, batches: list[tuple[float, float]], start: float = 0.0) -> None:
    for i, (waited, trained) in enumerate(batches):
        meter.add(waited, trained, 1, 2, now=start + i)


def test_a_round_reads_the_same_stall_as_the_meters_report():
    meter = RankMeter()
    _feed(meter, [(4.0, 0.0)] + [(0.01 * (i % 3), 0.05) for i in range(20)])  # a pass: start-up, then 20 batches
    scaler = Autoscaler(interval_s=1.0, threads=1)
    stalls = scaler.stalls_since_last_round({0: meter})
    report = meter.report()
    assert round(stalls[0], 4) == report["stall"] == report["stall_total"]
    _feed(meter, [(0.03, 0.05)] * 10, start=30.0)
    assert scaler.stalls_since_last_round({0: meter})[0] == pytest.approx(0.03 / 0.08), "only the batches since"
    assert scaler.stalls_since_last_round({0: meter}) == {}, "a rank that timed nothing is left out"
    assert scaler.stall == {0: pytest.approx(0.375)}, "and keeps the last round's figure"


def test_a_start_up_wait_does_not_alarm_the_autoscaler():
    meter = RankMeter()
    _feed(meter, [(30.0, 0.0), (0.001, 0.1), (0.001, 0.1)])  # 30 s starting the pipeline actor, then smooth
    scaler = Autoscaler(interval_s=1.0, threads=1)
    stalls = scaler.stalls_since_last_round({0: meter})
    assert stalls[0] == pytest.approx(0.01, abs=1e-3)
    decision = scaler.decide_round(stalls, {}, helpers=0, can_add=lambda: True)
    assert decision.action == "keep", decision.reason
    assert scaler.calm == 1


def test_a_stalled_rank_adds_then_the_change_cools_down():
    meter = RankMeter()
    scaler = Autoscaler(interval_s=1.0, threads=1, max_helpers=2)
    asked = []

    def can_add() -> bool:
        asked.append(True)
        return True

    assert scaler.decide_round(scaler.stalls_since_last_round({0: meter}), {}, 0, can_add) is None, "nothing timed"
    assert asked == [], "no node is looked at for a round without timings"
    _feed(meter, [(0.0, 0.0)] + [(0.05, 0.05)] * 5)
    decision = scaler.decide_round(scaler.stalls_since_last_round({0: meter}), {}, 0, can_add)
    assert decision.action == "add" and "rank 0 waits for data 50%" in decision.reason
    scaler.changed("add")
    for left in range(COOLDOWN_ROUNDS, 0, -1):
        _feed(meter, [(0.05, 0.05)] * 5)
        decision = scaler.decide_round(scaler.stalls_since_last_round({0: meter}), {}, 1, can_add)
        assert decision.action == "keep" and f"waiting {left} more round" in decision.reason
    _feed(meter, [(0.05, 0.05)] * 5)
    assert scaler.decide_round(scaler.stalls_since_last_round({0: meter}), {}, 1, can_add).action == "add"


def test_calm_rounds_remove_a_helper_only_when_the_helpers_were_idle():
    meter = RankMeter()
    scaler = Autoscaler(interval_s=2.0, threads=1)
    busy = {"s.helper.0": 0.0}
    decisions = []
    for _ in range(3):
        _feed(meter, [(0.0, 0.1)] * 5)
        busy = {"s.helper.0": busy["s.helper.0"] + 1.9}  # busy 95% of each round
        decisions.append(scaler.decide_round(scaler.stalls_since_last_round({0: meter}), busy, 1, lambda: True))
    assert scaler.calm == 3 and "the helpers are busy" in decisions[-1].reason
    _feed(meter, [(0.0, 0.1)] * 5)
    decision = scaler.decide_round(scaler.stalls_since_last_round({0: meter}), busy, 1, lambda: True)
    assert decision.action == "remove", "an idle round: a whole helper's worth of spare time"
    scaler.changed("remove")
    assert scaler.calm == 0 and scaler.cooling == COOLDOWN_ROUNDS


def test_ranks_gone_are_forgotten_and_a_new_meter_starts_from_zero():
    scaler = Autoscaler(interval_s=1.0, threads=1)
    old = RankMeter()
    _feed(old, [(0.0, 0.0)] + [(0.0, 0.1)] * 10)
    scaler.stalls_since_last_round({0: RankMeter(), 1: old})
    scaler.forget([1])
    assert 1 not in scaler.stall
    new = RankMeter()
    _feed(new, [(0.0, 0.0), (0.1, 0.1)])
    assert scaler.stalls_since_last_round({1: new}) == {1: pytest.approx(0.5)}
