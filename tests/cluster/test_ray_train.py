"""Ray Train restarts and resizes carry the data position: a worker's death and a group of
another size train every sample of every epoch exactly once (real Ray Train, real processes)."""

from __future__ import annotations

import collections
import gc
import json
import threading
import time
from pathlib import Path

import pytest
import ray
from ray.experimental import internal_kv
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

import raypipe as rp
from cluster import object_store
from cluster.naming import NAMESPACE
from tests.cluster.pipelines import indexed
from tests.cluster.train_worker import REMOVE_KEY, train_loop

pytestmark = pytest.mark.slow

#: How often Ray Train's controller polls its workers in these tests (2 s by default): it notices
#: a finished, failed or lost group, and collects the workers' checkpoint reports, at these polls.
HEALTH_CHECK_INTERVAL_S = "0.5"

#: How long a worker waits after a checkpoint that comes before its failure: three of the
#: controller's polls, so that the restart starts from that checkpoint.
SETTLE_S = 1.5


@pytest.fixture(autouse=True)
def frequent_health_checks(monkeypatch):
    """:data:`HEALTH_CHECK_INTERVAL_S` in the driver's environment, which Ray Train passes to its controller."""
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", HEALTH_CHECK_INTERVAL_S)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory) -> list[str]:
    """70 small JPEGs."""
    from raypipe.datasets import make_jpeg_folder
    from raypipe.operators.readers import list_file_root

    root = str(tmp_path_factory.mktemp("train-jpegs"))
    make_jpeg_folder(root, num_classes=2, per_class=35, size=(64, 48), progress=False)
    return list_file_root(root)[0]


def _serve(files: list[str], name: str, world: int):
    return rp.serve(
        indexed, name=name, world_size=world, seed=0, num_cpus_per_actor=0, replace=True, files=files,
        shuffle="global", last_batch="pad",
    )  # fmt: skip


def _fit(name: str, tmp: Path, workers: int, **config):
    """Train on ``workers`` workers in run ``name``."""
    (tmp / "logs").mkdir(exist_ok=True)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"service": name, "logs": str(tmp / "logs"), "epochs": 2, "every": 4} | config,
        scaling_config=ScalingConfig(num_workers=workers, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(name=name, storage_path=str(tmp / "runs"), failure_config=FailureConfig(max_failures=1)),
    )
    return trainer.fit()


def _processes(logs: Path) -> list[dict]:
    """Each worker process's log: its start line and its steps, oldest group first."""
    out = []
    for path in sorted(logs.glob("*.jsonl")):
        start, *steps = [json.loads(line) for line in path.read_text().splitlines()]
        out.append({"start": start, "steps": steps, "restored": start["restored"]})
    return out


def _groups(processes: list[dict], sizes: list[int]) -> list[list[dict]]:
    """The worker groups in the order they started, of the given sizes."""
    ordered = sorted(processes, key=lambda p: p["start"]["began"])
    out = []
    for size in sizes:
        out.append(sorted(ordered[:size], key=lambda p: p["steps"][0]["rank"]))
        ordered = ordered[size:]
    assert not ordered, f"more worker processes than groups of sizes {sizes}"
    return out


def _effective(groups: list[list[dict]]) -> tuple[list[dict], list[tuple[dict, dict]]]:
    """The steps the final model rests on (each group's up to the checkpoint the next one started
    from, then the last group's), and pairs of (abandoned, redone) steps of equal step and rank."""
    kept, redone = [], []
    for i, group in enumerate(groups):
        steps = [s for p in group for s in p["steps"]]
        if i + 1 < len(groups):
            resumed_at = groups[i + 1][0]["restored"]
            later = {(s["step"], s["rank"]): s for p in groups[i + 1] for s in p["steps"]}
            redone += [(s, later.get((s["step"], s["rank"]))) for s in steps if s["step"] > resumed_at]
            steps = [s for s in steps if s["step"] <= resumed_at]
        kept += steps
    return kept, redone


def _assert_exactly_once(kept: list[dict], samples: int, epochs: int) -> None:
    for epoch in range(epochs):
        seen = collections.Counter(
            i for s in kept if s["epoch"] == epoch for i, pad in zip(s["indices"], s["pad"]) if not pad
        )
        assert sorted(seen) == list(range(samples)) and set(seen.values()) == {1}, (epoch, seen)


#: What Ray Train's controller keeps in the object store after a run (its training function and
#: config, 1.3 KB for an empty function): less than one batch of these tests (15 KB).
RAY_TRAIN_KEEPS = 8 * 1024


def _assert_released(name: str, store_baseline: int) -> None:
    """No named actor of service ``name`` (coordinator, pipeline actors, helpers) left alive, and
    the object store back to its use before the run (plus what Ray Train keeps of its runs)."""
    gc.collect()  # the run's Ray Train objects the test still referenced
    deadline = time.monotonic() + 30
    while True:
        alive = [
            a["name"]
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == NAMESPACE and a["name"].startswith(f"{name}.")
        ]
        used = object_store.usage().used_bytes
        if (not alive and used <= store_baseline) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not alive, alive
    assert used <= store_baseline, (used, store_baseline)


def test_a_killed_worker_restarts_from_the_checkpoint_and_reads_the_same_batches_again(cluster, many_files, tmp_path):
    """One run of two workers: rank 1 kills its own process at step 6, Ray Train restarts the
    group from the checkpoint of step 4, and it trains both epochs to the end. The steps after
    the checkpoint are redone with the same samples, byte for byte, and every sample of each
    epoch is trained once. (A group of another size is the elastic test's, below; resuming into
    more ranks mid-epoch is tests/cluster/test_reliability.py's.)"""
    name = "train-fail"
    files = many_files[:70]  # batch 5: 7 steps an epoch in 2 ranks
    baseline = object_store.usage().used_bytes
    svc = _serve(files, name, 2)
    try:
        run = _fit(name, tmp_path, 2, fail_at=6, fail_rank=1, settle_s=SETTLE_S)
        assert run.error is None and run.checkpoint is not None, run.error
        groups = _groups(_processes(tmp_path / "logs"), [2, 2])
        assert [p["restored"] for g in groups for p in g] == [0, 0, 4, 4], "restarts from step 4"
        kept, redone = _effective(groups)
        _assert_exactly_once(kept, len(files), 2)
        assert max(s["step"] for s in kept) == 14
        assert {(s["step"], s["rank"]) for s, _ in redone} >= {(5, 0), (5, 1), (6, 1)}
        for abandoned, again in redone:
            assert again is not None and (abandoned["indices"], abandoned["digest"]) == (
                again["indices"],
                again["digest"],
            ), "a redone step reads the same samples, byte for byte"
        died = max(s["time"] for s in groups[0][1]["steps"] if s["rank"] == 1)
        restarted = min(s["time"] for p in groups[1] for s in p["steps"])
        loader_s = max(p["start"]["loader_ready"] - p["start"]["began"] for p in groups[1])
        print(f"\ndeath to first batch after the restart: {restarted - died:.1f} s; loader opened in {loader_s:.1f} s")
        assert sorted(svc.stats()["attached"]) == [0, 1]
        del run
    finally:
        svc.shutdown()
    _assert_released(name, baseline + RAY_TRAIN_KEEPS)


def test_a_group_of_another_size_waits_for_the_one_before_it(cluster, jpeg_files, monkeypatch):
    import cluster.loader as loader_module

    monkeypatch.setattr(loader_module, "RESIZE_WAIT_S", 1.0)
    baseline = object_store.usage().used_bytes
    svc = _serve(jpeg_files[:20], "train-busy", 2)
    try:
        running = rp.loader("train-busy", rank=0, world_size=2, output="numpy")
        with pytest.raises(
            rp.ArgumentError, match=r"world_size=3 but service 'train-busy' serves 2 ranks, and ranks \[0\]"
        ):
            rp.loader("train-busy", rank=0, world_size=3, output="numpy")
        del running
        with pytest.raises(rp.ArgumentError, match="give rank and world_size"):
            rp.loader("train-busy", rank=0)
    finally:
        svc.shutdown()
    _assert_released("train-busy", baseline)
    assert ray.is_initialized()


@pytest.fixture
def trainer_nodes(cluster):
    """Two nodes of one ``trainer`` slot each, added for one test and removed after it (those still there)."""
    nodes = [cluster.add_node(num_cpus=1, resources={"trainer": 1}) for _ in range(2)]
    cluster.wait_for_nodes()
    _refresh_autoscaling_coordinator()
    yield nodes
    for node in nodes:
        if node in cluster.worker_nodes:
            cluster.remove_node(node)
    internal_kv._internal_kv_del(REMOVE_KEY)


def _refresh_autoscaling_coordinator() -> None:
    """Have Ray's autoscaling coordinator list the cluster's nodes now. Ray Train's elastic mode
    sizes a group by the nodes this detached actor lists, and it lists them again only every 20 s:
    made by an earlier run on this cluster, it would not yet know nodes added since, and the group
    would start with fewer workers than fit."""
    try:
        coordinator = ray.get_actor("AutoscalingCoordinator", namespace="AutoscalingCoordinator")
    except ValueError:
        return  # none yet: the run makes one, which lists the nodes as they are then
    ray.get(coordinator.get_reserved_resources.remote("raypipe-tests", recompute=True), timeout=60)


def _remove_when_asked(cluster, nodes: list, stop: threading.Event) -> None:
    """Remove the node a worker names under ``REMOVE_KEY``."""
    while not stop.is_set():
        named = internal_kv._internal_kv_get(REMOVE_KEY)
        if named:
            for node in nodes:
                if node.node_id == named.decode():
                    cluster.remove_node(node)
                    _refresh_autoscaling_coordinator()  # the restart sizes its group without the node
                    return
        time.sleep(0.2)


#: Ray Train's controller may first try the group size of before the node was lost, while the
#: cluster's resources still count that node, and waits this long for its placement group (60 s
#: by default) before it tries the size that fits. Only the placement group's wait counts, and on
#: this cluster of logical resources a group that fits is placed at once (0.00 s in its logs).
GROUP_START_TIMEOUT_S = "5"


def test_ray_train_elastic_mode_losing_a_node_continues_in_one_worker_exactly_once(
    cluster, trainer_nodes, many_files, tmp_path, monkeypatch
):
    """``ScalingConfig(num_workers=(1, 2))`` on two nodes of one ``trainer`` slot each, and the node
    of rank 1 removed mid-epoch (at step 6, when rank 1 asks): Ray Train restarts with the one
    worker that fits, the service then serves 1 rank, and every sample of both epochs is trained once."""
    monkeypatch.setenv("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", GROUP_START_TIMEOUT_S)  # the driver's, passed on
    name = "elastic"
    files = many_files[:60]
    (tmp_path / "logs").mkdir()
    baseline = object_store.usage().used_bytes
    svc = _serve(files, name, 2)
    stop = threading.Event()
    threading.Thread(target=_remove_when_asked, args=(cluster, trainer_nodes, stop), daemon=True).start()
    try:
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={
                "service": name,
                "logs": str(tmp_path / "logs"),
                "epochs": 2,
                "every": 4,
                "settle_s": SETTLE_S,
                "lose_node_at": 6,
            },  # fmt: skip
            scaling_config=ScalingConfig(num_workers=(1, 2), resources_per_worker={"trainer": 1}),
            run_config=RunConfig(
                name=name, storage_path=str(tmp_path / "runs"), failure_config=FailureConfig(max_failures=1)
            ),
        )
        run = trainer.fit()
        assert run.error is None, run.error
        assert svc.config.world_size == 1
        del run, trainer
    finally:
        stop.set()
        svc.shutdown()
    groups = _groups(_processes(tmp_path / "logs"), [2, 1])
    assert [p["restored"] for g in groups for p in g] == [0, 0, 4]
    kept, redone = _effective(groups)
    _assert_exactly_once(kept, len(files), 2)
    assert redone, "the steps after the checkpoint were trained again"
    _assert_released(name, baseline + RAY_TRAIN_KEEPS)
