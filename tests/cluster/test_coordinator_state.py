"""The coordinator's state machine: which events change it, which are journaled, and that a
snapshot restores what was journaled."""

from __future__ import annotations

import json

import pytest

from cluster.coordinator_state import CoordinatorState

HOME = {"node_id": "n1", "gpu": "1", "how": "ray.get_gpu_ids()"}


def test_attach_skip_and_restart_are_journaled_acks_are_not():
    state = CoordinatorState()
    assert state.apply(("attach", 0, HOME)) is True
    assert state.apply(("attach", 0, dict(HOME))) is False, "attaching again at the same place changes nothing"
    assert state.apply(("attach", 0, {**HOME, "gpu": "0"})) is True, "a rank that moved is journaled"
    assert state.apply(("skip", 1, 7, "bad.jpg")) is True
    assert state.apply(("skip", 1, 7, "bad.jpg")) is False
    assert state.apply(("ack", 0, 1, 3)) is False and state.progress == {0: (1, 3)}
    assert state.apply(("restart",)) is True and state.restarts == 1
    with pytest.raises(ValueError, match="unknown coordinator event"):
        state.apply(("detach", 0))


def test_a_snapshot_is_json_and_restores_everything_journaled():
    state = CoordinatorState()
    for event in (("attach", 3, HOME), ("skip", 0, 5, "a.jpg"), ("restart",), ("ack", 3, 0, 2)):
        state.apply(event)
    restored = CoordinatorState.restore(json.loads(json.dumps(state.snapshot())))
    assert restored.attached == {3: HOME} and restored.skipped == {(0, 5): "a.jpg"} and restored.restarts == 1
    assert restored.progress == {}, "progress is not journaled: it refills as ranks acknowledge"
    assert restored.skipped_report() == {"count": 1, "files": ["a.jpg"]}


def test_a_resize_is_journaled_forgets_the_ranks_gone_and_survives_a_restore():
    state = CoordinatorState()
    for rank in range(3):
        state.apply(("attach", rank, {**HOME, "gpu": str(rank)}))
        state.apply(("ack", rank, 0, 4))
    assert state.apply(("resize", 2)) is True
    assert state.world_size == 2 and sorted(state.attached) == [0, 1] and sorted(state.progress) == [0, 1]
    restored = CoordinatorState.restore(json.loads(json.dumps(state.snapshot())))
    assert restored.world_size == 2 and sorted(restored.attached) == [0, 1]
    assert CoordinatorState.restore({"attached": {}, "skipped": [], "restarts": 0}).world_size is None
