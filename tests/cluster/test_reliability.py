"""Failures survived or named, resume into any world size, resources released: on the
simulated cluster of ``conftest.py`` (head + 2 nodes x 2 logical GPUs), real JPEGs."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import ray

import raypipe as rp
from cluster import coordinator_record, object_store
from cluster.loader import REQUEST_SOCKET_ENV
from cluster.naming import NAMESPACE, coordinator_name
from tests.cluster.pipelines import broken_in_actors, indexed, large, skipping

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _serve(files, name, world_size=4, **kwargs):
    args = {"seed": 0, "num_cpus_per_actor": 0.25, "replace": True, "batch_size": 2} | kwargs
    return rp.serve(indexed, name=name, world_size=world_size, files=files, **args)


def _record(images, labels, loader):
    """(sample ids, padding flags, pixel digest) of one batch."""
    pixels = hashlib.sha256(np.ascontiguousarray(images.numpy()).tobytes()).hexdigest()[:16]
    return labels.numpy().ravel().tolist(), loader.last_is_pad.tolist(), pixels


def _lockstep(loaders, epoch, on_step=None):
    """One epoch with every rank taking its k-th batch in turn (as DDP ranks do); ``on_step(k)``
    runs after global step k. Returns every rank's records."""
    for ld in loaders:
        ld.set_epoch(epoch)
    iters = [iter(ld) for ld in loaders]
    out = {r: [] for r in range(len(loaders))}
    for k in range(len(loaders[0])):
        for r, (ld, it) in enumerate(zip(loaders, iters)):
            out[r].append(_record(*next(it), ld))
        if on_step is not None:
            on_step(k)
    for it in iters:
        assert next(it, None) is None
    return out


def _kill(pid):
    os.kill(pid, signal.SIGKILL)


def _actor_pids(svc):
    return [a["pid"] for a in svc.stats()["actors"]]


def _coordinator_pid(svc):
    return svc.stats()["coordinator"]["pid"]


def _real(records):
    return [s for recs in records.values() for ids, pads, _ in recs for s, p in zip(ids, pads) if not p]


def test_killing_every_pipeline_actor_mid_epoch_changes_no_batch(cluster, jpeg_files):
    svc = _serve(jpeg_files, "rel-actors")
    try:
        loaders = [rp.loader("rel-actors", rank=r, world_size=4) for r in range(4)]
        reference = _lockstep(loaders, 1)
        old = _actor_pids(svc)
        disturbed = _lockstep(loaders, 1, on_step=lambda k: k == 0 and [_kill(p) for p in old])
        assert disturbed == reference, "same sample ids and pixels as the undisturbed epoch"
        assert sorted(_real(disturbed)) == list(range(24))
        stats = svc.stats()
        assert not set(old) & {a["pid"] for a in stats["actors"]}, "every actor was restarted"
        late = rp.loader("rel-actors", rank=2, world_size=4)
        late.set_epoch(1)
        assert [_record(*b, late) for b in late] == reference[2]
    finally:
        svc.shutdown()


def test_killing_the_coordinator_mid_epoch_changes_no_batch_and_it_comes_back(cluster, jpeg_files):
    svc = _serve(jpeg_files, "rel-coord")
    try:
        loaders = [rp.loader("rel-coord", rank=r, world_size=4) for r in range(4)]
        reference = _lockstep(loaders, 0)
        pid = _coordinator_pid(svc)
        disturbed = _lockstep(loaders, 0, on_step=lambda k: k == 0 and _kill(pid))
        assert disturbed == reference
        again = rp.loader("rel-coord", rank=3, world_size=4)
        assert again.actor_info["pid"] == loaders[3].actor_info["pid"], "the rank's actor survived"
        stats = svc.stats()
        assert stats["coordinator"]["pid"] != pid and stats["coordinator"]["restarts"] == 1
        assert sorted(stats["attached"]) == [0, 1, 2, 3], "where ranks attached survived in the coordinator's record"
        assert sorted(a["rank"] for a in stats["actors"]) == [0, 1, 2, 3]
    finally:
        svc.shutdown()
    assert coordinator_record.load("rel-coord") is None, "shutdown forgets the coordinator's record"


def _parts(files, worlds_and_steps, name):
    """Read epoch 0 in parts, each in a new service of the given world size, resuming from the
    previous part's state; returns the real samples in global order and every part's state."""
    state, order, states = None, [], []
    for i, (world, steps) in enumerate(worlds_and_steps):
        svc = _serve(files, f"{name}-{i}", world_size=world)
        try:
            loaders = [rp.loader(f"{name}-{i}", rank=r, world_size=world) for r in range(world)]
            for ld in loaders:
                if state is not None:
                    ld.load_state_dict(state)
                ld.set_epoch(0)
            total = len(loaders[0])
            assert {len(ld) for ld in loaders} == {total}, "equal batch counts after the resume"
            iters = [iter(ld) for ld in loaders]
            for _ in range(total if steps is None else steps):
                for ld, it in zip(loaders, iters):
                    _, labels = next(it)
                    order.extend(s for s, p in zip(labels.numpy().ravel().tolist(), ld.last_is_pad) if not p)
            state = loaders[0].state_dict()
            assert all(ld.state_dict() == state for ld in loaders), "a position is global"
            states.append(state)
        finally:
            svc.shutdown()
    return order, states


def test_resume_into_fewer_and_more_ranks_is_exactly_once_in_the_same_order(cluster, jpeg_files):
    undisturbed, _ = _parts(jpeg_files, [(4, None)], "rel-full")
    assert sorted(undisturbed) == list(range(24))
    order, states = _parts(jpeg_files, [(4, 1), (2, 1), (4, None)], "rel-elastic")  # into fewer, then more
    assert order == undisturbed, "every sample exactly once, in the undisturbed order"
    assert states[-1]["epoch"] == 1 and states[-1]["offset"] == 0
    assert states[0] == {**states[0], "epoch": 0, "offset": 8, "format": 1, "batch_size": 2, "world_size": 4}
    assert states[1] == {**states[1], "epoch": 0, "offset": 12, "world_size": 2}


def test_a_state_from_another_dataset_or_seed_is_a_clear_error(cluster, jpeg_files):
    svc = _serve(jpeg_files, "rel-strict", world_size=2)
    try:
        ld = rp.loader("rel-strict", rank=0, world_size=2)
        next(iter(ld))
        state = ld.state_dict()
    finally:
        svc.shutdown()
    other = _serve(jpeg_files[:20], "rel-other", world_size=2, seed=1)
    try:
        ld = rp.loader("rel-other", rank=0, world_size=2)
        with pytest.raises(rp.ArgumentError, match=r"another order: dataset_len=24 \(here 20\).*seed=0 \(here 1\)"):
            ld.load_state_dict(state)
        with pytest.raises(rp.ArgumentError, match="not a raypipe state dict"):
            ld.load_state_dict({"epoch": 0, "batch": 1})
        with pytest.warns(UserWarning, match="another order"):
            ld.load_state_dict(state, strict=False)
        assert (ld.epoch, len(ld)) == (0, 4), "offset 4 of 20 samples in global batches of 4"
    finally:
        other.shutdown()


def _bad_files(tmp_path, jpeg_files) -> tuple[str, str]:
    """A file that is no JPEG and a truncated JPEG."""
    garbage = tmp_path / "garbage.jpg"
    garbage.write_bytes(b"\xff\xd8 not a jpeg at all" * 50)
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(open(jpeg_files[0], "rb").read()[:600])
    return str(garbage), str(truncated)


def test_a_rank_retrying_after_an_error_meets_the_same_error(cluster, jpeg_files, tmp_path):
    garbage, truncated = _bad_files(tmp_path, jpeg_files)
    files = [*jpeg_files[:7], garbage, *jpeg_files[7:12], truncated]
    svc = _serve(files, "rel-retry", world_size=1, shuffle="none", batch_size=5)
    try:
        ld = rp.loader("rel-retry", rank=0, world_size=1, prefetch=1)
        for _ in range(3):
            with pytest.raises(rp.DecodeError, match=r"sample 7 \(.*garbage.jpg\)"):
                for _ in ld:
                    pass
            assert ld.state_dict()["offset"] == 5, "the failed batch is not counted as read"
    finally:
        svc.shutdown()


def test_skipped_samples_are_replaced_counted_and_never_delivered(cluster, jpeg_files, tmp_path):
    garbage, truncated = _bad_files(tmp_path, jpeg_files)
    files = [*jpeg_files[:10], garbage, *jpeg_files[10:20], truncated]  # 22 samples, 2 bad
    bad = {10, 21}
    svc = rp.serve(skipping, name="rel-skip", world_size=2, files=files, num_cpus_per_actor=0.25, replace=True)
    try:
        loaders = [rp.loader("rel-skip", rank=r, world_size=2, output="numpy") for r in range(2)]
        for epoch in (0, 1):
            real, shapes = [], set()
            for ld in loaders:
                ld.set_epoch(epoch)
                for images, labels in ld:
                    shapes.add(images.shape)
                    assert not bad & set(labels.ravel().tolist()), "a bad sample was delivered"
                    real.extend(s for s, p in zip(labels.ravel().tolist(), ld.last_is_pad) if not p)
            assert shapes == {(5, 32, 32, 3)}, "every batch keeps its size"
            assert sorted(real) == sorted(set(range(22)) - bad), "every good sample exactly once"
        assert len(loaders[0]) == len(loaders[1]) == 3
        skipped = svc.stats()["skipped"]
        assert skipped["count"] == 4, "2 bad files x 2 epochs"
        assert [os.path.basename(f) for f in skipped["files"]] == ["garbage.jpg", "truncated.jpg"]
    finally:
        svc.shutdown()


@pytest.mark.slow
def test_chaos_every_epoch_exactly_once_and_bit_identical(cluster, jpeg_files):
    svc = _serve(jpeg_files, "rel-chaos", max_restarts=-1)
    try:
        loaders = [rp.loader("rel-chaos", rank=r, world_size=4) for r in range(4)]
        reference = [_lockstep(loaders, e) for e in range(3)]
        rng = random.Random(1234)
        kills = []

        def chaos(k):
            victims = rng.sample(["coordinator", 0, 1, 2, 3], rng.randint(1, 2))
            for v in victims:
                _kill(_coordinator_pid(svc) if v == "coordinator" else svc.stats()["actors"][v]["pid"])
            kills.extend(victims)

        for epoch in range(3):
            disturbed = _lockstep(loaders, epoch, on_step=chaos)
            assert disturbed == reference[epoch], f"epoch {epoch} differs from the undisturbed run"
            assert sorted(_real(disturbed)) == list(range(24))
        assert "coordinator" in kills and len(kills) >= 6, kills
        assert svc.stats()["coordinator"]["restarts"] == kills.count("coordinator")
    finally:
        svc.shutdown()


def _wait_until(condition, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


RANK_SCRIPT = """
import sys, time, ray, raypipe as rp
ray.init(address=sys.argv[1], log_to_driver=False)
loader = rp.loader(sys.argv[2], rank=0, world_size=1, output="numpy", prefetch=4)
it = iter(loader)
batch = next(it)
time.sleep(1.0)
print("ready", flush=True)
time.sleep(600)
"""


def test_a_killed_rank_process_releases_its_prefetched_batches(cluster, jpeg_files):
    svc = rp.serve(large, name="rel-rank", world_size=1, files=jpeg_files, num_cpus_per_actor=0.25, replace=True)
    try:
        baseline = object_store.usage().used_bytes
        rank = subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT, cluster.address, "rel-rank"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ | {REQUEST_SOCKET_ENV: "0"},  # replies through Ray: their batches wait in the store
        )
        try:
            assert rank.stdout.readline().strip() == "ready"
            held = object_store.usage().used_bytes
            assert held >= baseline + 4 * 300 * 1024, (baseline, held)
        finally:
            rank.kill()
            rank.wait()
        assert _wait_until(lambda: object_store.usage().used_bytes <= baseline), object_store.usage()
    finally:
        svc.shutdown()


def _gone(name: str) -> bool:
    try:
        ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
    except ValueError:
        return True
    return False


def _placement_groups_alive() -> int:
    return sum(pg["state"] != "REMOVED" for pg in ray.util.placement_group_table().values())


def test_an_actor_that_cannot_start_is_named_and_leaves_nothing_behind(cluster, jpeg_files):
    groups = _placement_groups_alive()
    svc = rp.serve(broken_in_actors, name="rel-broken", world_size=2, files=jpeg_files, max_restarts=0)
    try:
        named = "rank 1 on node .* failed to start: RuntimeError: this pipeline cannot be built inside an actor$"
        with pytest.raises(rp.RaypipeError, match=named):
            rp.loader("rel-broken", rank=1, world_size=2)
        with pytest.raises(ValueError):
            ray.get_actor("rel-broken.pipeline.1", namespace=NAMESPACE)
    finally:
        svc.shutdown()
    assert _gone("rel-broken") and coordinator_record.load("rel-broken") is None
    assert _placement_groups_alive() == groups, "the service reserves no placement group"


def test_a_services_name_is_free_as_soon_as_it_shuts_down(cluster, jpeg_files):
    """``ray.kill`` returns before the actor's name is free: shutdown waits for it, so a script
    that serves the same name again (without ``replace``) never meets the old service."""
    for _ in range(2):
        svc = _serve(jpeg_files[:8], "rel-again", 1, replace=False)
        assert len(list(rp.loader("rel-again", rank=0, world_size=1))) == 4, "8 samples in batches of 2"
        svc.shutdown()
        named = ray.util.list_named_actors(all_namespaces=True)
        assert [a["name"] for a in named if a["name"].startswith("rel-again.")] == [] and _gone("rel-again")


DRIVER_SCRIPT = """
import sys, ray, raypipe as rp
from cluster.loader import REQUEST_SOCKET_ENV
from tests.cluster.pipelines import indexed
ray.init(address=sys.argv[1], log_to_driver=False)
files = sys.argv[4:]
svc = rp.serve(indexed, name=sys.argv[2], world_size=2, files=files, num_cpus_per_actor=0.25,
               detached=sys.argv[3] == "detached")
next(iter(rp.loader(sys.argv[2], rank=0, world_size=2)))
print("served", flush=True)
"""


@pytest.mark.parametrize("detached", [False, True])
def test_a_service_dies_with_its_driver_unless_detached(cluster, jpeg_files, detached):
    name = f"rel-driver-{detached}"
    groups = _placement_groups_alive()
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER_SCRIPT, cluster.address, name, "detached" if detached else "-", *jpeg_files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0 and "served" in proc.stdout, proc.stderr[-3000:]
    if not detached:
        assert _wait_until(lambda: _gone(name) and _placement_groups_alive() == groups)
        return
    time.sleep(2)
    assert not _gone(name), "a detached service outlives its driver"
    ld = rp.loader(name, rank=1, world_size=2)
    assert len(list(ld)) == len(ld)
    svc = _serve(jpeg_files, name, world_size=2)  # replace=True takes the old one down
    svc.shutdown()
    assert _wait_until(lambda: _gone(name) and _placement_groups_alive() == groups)


def test_stats_answer_while_an_actor_is_down(cluster, jpeg_files):
    svc = _serve(jpeg_files, "rel-stats", world_size=2, max_restarts=0)
    try:
        loaders = [rp.loader("rel-stats", rank=r, world_size=2) for r in range(2)]
        _kill(loaders[0].actor_info["pid"])
        time.sleep(1)
        actors = svc.stats(timeout_s=3)["actors"]
        assert actors[0]["available"] is False and actors[1]["rank"] == 1 and "pid" in actors[1]
    finally:
        svc.shutdown()
