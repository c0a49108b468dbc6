"""The coordinator's state machine: which events change it, which change its record, and that a
record restores what it holds."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cluster.coordinator_events import (
    Acked,
    Attached,
    Decided,
    HelperAdded,
    HelperRemoved,
    Resized,
    Restarted,
    Skipped,
)
from cluster.coordinator_state import DECISIONS_KEPT, CoordinatorState

HOME = {"node_id": "n1", "gpu": "1", "how": "ray.get_gpu_ids()"}


def test_each_event_says_whether_it_belongs_in_the_record():
    recorded = [
        Attached(0, HOME),
        Skipped(0, 1, "a.jpg"),
        Restarted(),
        Resized(2),
        HelperAdded("s.helper.0", "n", "r", 1.0),
    ]
    assert all(e.recorded for e in [*recorded, HelperRemoved("s.helper.0", "r", 2.0)])
    assert not Acked(0, 1, 2).recorded and not Decided("keep", "r", 1.0).recorded
    with pytest.raises(dataclasses.FrozenInstanceError):
        Acked(0, 1, 2).epoch = 3


def test_attach_skip_and_restart_change_the_record_acks_do_not():
    state = CoordinatorState()
    assert state.apply(Attached(0, HOME)) is True
    assert state.apply(Attached(0, dict(HOME))) is False, "attaching again at the same place changes nothing"
    assert state.apply(Attached(0, {**HOME, "gpu": "0"})) is True, "a rank that moved is recorded"
    assert state.apply(Skipped(1, 7, "bad.jpg")) is True
    assert state.apply(Skipped(1, 7, "bad.jpg")) is False, "a sample skipped again is not recorded again"
    assert state.skipped == {(1, 7): "bad.jpg"}
    assert state.apply(Acked(0, 1, 3)) is False and state.progress == {0: (1, 3)}
    assert state.apply(Restarted()) is True and state.restarts == 1


def test_anything_but_an_event_is_refused():
    state = CoordinatorState()
    with pytest.raises(TypeError, match="unknown coordinator event"):
        state.apply(("attach", 0, HOME))
    with pytest.raises(TypeError, match="unknown coordinator event"):
        state.apply(None)
    assert state == CoordinatorState(), "a refused event changes nothing"


def test_a_record_is_json_and_restores_everything_recorded():
    state = CoordinatorState()
    for event in (
        Attached(3, HOME),
        Skipped(0, 5, "a.jpg"),
        Restarted(),
        Acked(3, 0, 2),
        HelperAdded("s.helper.0", "node-1", "cpu_helpers=1", 10.0),
        Decided("keep", "no node has room", 11.0),
    ):
        state.apply(event)
    restored = CoordinatorState.from_record(json.loads(json.dumps(state.to_record())))
    assert restored.attached == {3: HOME} and restored.skipped == {(0, 5): "a.jpg"} and restored.restarts == 1
    assert restored.helpers == {"s.helper.0": "node-1"} and restored.decisions == state.decisions
    assert restored.progress == {}, "progress is not recorded: it refills as ranks acknowledge"
    assert restored.skipped_report() == {"count": 1, "files": ["a.jpg"]}


def test_a_resize_is_recorded_forgets_the_ranks_gone_and_survives_a_restore():
    state = CoordinatorState()
    for rank in range(3):
        state.apply(Attached(rank, {**HOME, "gpu": str(rank)}))
        state.apply(Acked(rank, 0, 4))
    assert state.apply(Resized(2)) is True
    assert state.world_size == 2 and sorted(state.attached) == [0, 1] and sorted(state.progress) == [0, 1]
    restored = CoordinatorState.from_record(json.loads(json.dumps(state.to_record())))
    assert restored.world_size == 2 and sorted(restored.attached) == [0, 1]
    assert CoordinatorState.from_record({"attached": {}, "skipped": [], "restarts": 0}).world_size is None


def test_helpers_come_and_go_with_their_decisions_and_a_repeated_decision_is_kept_once():
    state = CoordinatorState()
    assert state.apply(HelperAdded("s.helper.0", "node-123456789abcdef", "rank 0 waits", 1.0)) is True
    assert state.helpers == {"s.helper.0": "node-123456789abcdef"}
    assert state.decisions[-1] == {
        "action": "add",
        "reason": "s.helper.0 on node node-1234567: rank 0 waits",
        "time": 1.0,
    }
    assert state.apply(Decided("keep", "within bounds", 2.0)) is False, "a decision alone is not recorded"
    state.apply(Decided("keep", "within bounds", 3.0))
    assert [d["time"] for d in state.decisions] == [1.0, 2.0], "the same decision again is kept once"
    state.apply(Decided("keep", "no node has room", 4.0))
    assert state.apply(HelperRemoved("s.helper.0", "idle", 5.0)) is True and state.helpers == {}
    assert [d["action"] for d in state.decisions] == ["add", "keep", "keep", "remove"]
    for i in range(DECISIONS_KEPT + 5):
        state.apply(Decided("keep", f"round {i}", 6.0 + i))
    assert len(state.decisions) == DECISIONS_KEPT and state.decisions[-1]["reason"] == f"round {DECISIONS_KEPT + 4}"
