"""The service on the simulated 3-node Ray cluster of ``conftest.py`` (head + 2 nodes with 2 logical GPUs each)."""

from __future__ import annotations

import numpy as np
import pytest
import ray

import raypipe as rp
from tests.cluster.pipelines import indexed

WORLD = 4


def _serve(files, name, **kwargs):
    args = {"world_size": WORLD, "seed": 0, "num_cpus_per_actor": 0.25, "replace": True} | kwargs
    return rp.serve(indexed, name=name, files=files, **args)


def _epoch(loaders, epoch):
    """Every rank's labels and padding flags for one epoch, ranks consumed one after another."""
    out = {}
    for r, ld in enumerate(loaders):
        ld.set_epoch(epoch)
        batches = []
        for images, labels in ld:
            assert tuple(images.shape[1:]) == (32, 32, 3) and images.shape[0] == labels.shape[0]
            batches.append((labels.numpy().ravel().tolist(), ld.last_is_pad.tolist()))
        out[r] = batches
    return out


@pytest.mark.parametrize("policy", ["pad", "drop", "partial"])
def test_every_policy_gives_equal_counts_and_exactly_once(cluster, jpeg_files, policy):
    files = jpeg_files[:23]  # 23 samples, 4 ranks x 5: not divisible
    svc = _serve(files, f"svc-{policy}", last_batch=policy)
    try:
        loaders = [rp.loader(f"svc-{policy}", rank=r, world_size=WORLD) for r in range(WORLD)]
        lens = {len(ld) for ld in loaders}
        assert lens == {1 if policy == "drop" else 2}
        orders = []
        for epoch in (0, 1):
            per_rank = _epoch(loaders, epoch)
            assert {len(b) for b in per_rank.values()} == lens
            real = [s for b in per_rank.values() for labels, pads in b for s, p in zip(labels, pads) if not p]
            assert len(real) == len(set(real)), "ranks overlap"
            if policy == "drop":
                assert len(real) == 20
            else:
                assert sorted(real) == list(range(23))
            for b in per_rank.values():
                assert all(len(labels) > 0 for labels, _ in b), "no empty batch"
            orders.append([s for r in range(WORLD) for labels, _ in per_rank[r] for s in labels])
        assert orders[0] != orders[1], "a new order each epoch"
        assert _epoch(loaders, 0) == _epoch(loaders, 0), "the same order for the same seed and epoch"
    finally:
        svc.shutdown()


def test_actors_spread_over_nodes_with_logical_gpus(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-spread")
    try:
        loaders = [rp.loader("svc-spread", rank=r, world_size=WORLD) for r in range(WORLD)]
        for ld in loaders:
            next(iter(ld))
        actors = svc.stats()["actors"]
        nodes = [a["node_id"] for a in actors]
        assert len(set(nodes)) == 2 and all(nodes.count(n) == 2 for n in set(nodes))
        assert all(len(a["gpu_ids"]) == 1 for a in actors)
        assert all(a["cuda_visible_devices"] == a["gpu_ids"][0] for a in actors)
        assert sorted(a["rank"] for a in actors) == list(range(WORLD))
    finally:
        svc.shutdown()


def test_resume_mid_epoch_from_state_dict(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-resume", world_size=2)
    try:
        ld = rp.loader("svc-resume", rank=1, world_size=2)
        ld.set_epoch(3)
        full = [labels.numpy().ravel().tolist() for _, labels in ld]
        ld.set_epoch(3)
        it = iter(ld)
        next(it)
        state = ld.state_dict()
        assert state["epoch"] == 3 and state["offset"] == 10, "one global batch of 2 ranks x 5"
        fresh = rp.loader("svc-resume", rank=1, world_size=2)
        fresh.load_state_dict(state)
        rest = [labels.numpy().ravel().tolist() for _, labels in fresh]
        assert rest == full[1:]
    finally:
        svc.shutdown()


def test_errors_are_clear_and_early(cluster, jpeg_files, tmp_path):
    with pytest.raises(rp.ArgumentError, match=r"world_size=5 .* needs 5 GPUs; the Ray cluster has 4"):
        _serve(jpeg_files, "svc-big", world_size=5)
    with pytest.raises(rp.ArgumentError, match="last_batch must be one of"):
        _serve(jpeg_files, "svc-bad", last_batch="ends")
    with pytest.raises(rp.ArgumentError, match="shuffle must be one of"):
        _serve(jpeg_files, "svc-bad", shuffle="random")
    with pytest.raises(rp.ReaderError, match="does not exist"):
        _serve_root(tmp_path)
    with pytest.raises(rp.ArgumentError, match=r"needs a reader \(fn.readers"):
        rp.serve(rp.pipeline_def(lambda: rp.fn.random.coin_flip(), batch_size=2), name="svc-bad", world_size=2)
    svc = _serve(jpeg_files, "svc-name", world_size=2)
    try:
        with pytest.raises(rp.ArgumentError, match="already running; pass replace=True"):
            _serve(jpeg_files, "svc-name", world_size=2, replace=False)
        with pytest.raises(rp.ArgumentError, match=r"rank 2 outside \[0, 2\)"):
            rp.loader("svc-name", rank=2, world_size=2)
        with pytest.raises(rp.ArgumentError, match="world_size=4 but service 'svc-name' serves 2 ranks"):
            rp.loader("svc-name", rank=0, world_size=4)
        with pytest.raises(rp.RaypipeError, match="no raypipe service named 'nope'"):
            rp.loader("nope", rank=0, world_size=2)
    finally:
        svc.shutdown()


def _serve_root(tmp_path):
    @rp.pipeline_def(batch_size=2)
    def from_root(root):
        return rp.fn.readers.file(file_root=root)[1]

    return rp.serve(from_root, name="svc-bad", world_size=2, root=str(tmp_path / "missing"))


def test_decode_error_reaches_the_rank_naming_the_file(cluster, jpeg_files, tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(open(jpeg_files[0], "rb").read()[:500])
    files = [*jpeg_files[:9], str(bad)]
    svc = _serve(files, "svc-decode", world_size=1, shuffle="none")
    try:
        ld = rp.loader("svc-decode", rank=0, world_size=1)
        with pytest.raises(rp.DecodeError, match=r"sample 9 \(.*broken.jpg\)"):
            for _ in ld:
                pass
    finally:
        svc.shutdown()


def test_ddp_two_gloo_ranks_train_through_the_loader(cluster, jpeg_files):
    import socket

    import torch.multiprocessing as mp

    from tests.cluster.ddp_worker import train_rank

    svc = _serve(jpeg_files, "svc-ddp", world_size=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    try:
        procs = [
            ctx.Process(target=train_rank, args=(r, 2, cluster.address, "svc-ddp", port, results)) for r in range(2)
        ]
        for p in procs:
            p.start()
        out = sorted(results.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
    finally:
        svc.shutdown()
    (_, len0, seen0, loss0, w0), (_, len1, seen1, loss1, w1) = out
    assert len0 == len1 == 3 and len(loss0) == len(loss1) == 6
    assert all(np.isfinite(loss0 + loss1))
    assert np.allclose(w0, w1), "DDP kept the replicas in sync"
    for epoch in range(2):
        assert sorted(seen0[epoch] + seen1[epoch]) == list(range(24)), "each epoch: every sample exactly once"
    assert seen0[0] != seen0[1], "a new order each epoch"


def test_horovod_two_ranks_train_through_the_loader(cluster):
    """A real `horovodrun -np 2 --gloo` job (Horovod built by cluster/install_horovod.sh)."""
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("horovod.torch", reason="install with: bash cluster/install_horovod.sh")
    horovodrun = shutil.which("horovodrun", path=os.path.dirname(sys.executable)) or shutil.which("horovodrun")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        [
            horovodrun,
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            sys.executable,
            "examples/train_horovod.py",
            "--epochs",
            "1",
            "--service",
            "hvd-test",
        ],
        cwd=root,
        env={**os.environ, "RAY_ADDRESS": cluster.address},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if "raypipe-horovod" in ln]
    steps = [ln for ln in lines if "epoch=0" in ln]
    assert len(steps) == 2 and all("steps=5 len=5" in ln for ln in steps), lines
    assert sum("replicas_in_sync=True" in ln for ln in lines) == 2, lines


def _kill_actor_of(svc, rank):
    import os
    import signal

    actor = next(a for a in svc.stats()["actors"] if a["rank"] == rank)
    os.kill(actor["pid"], signal.SIGKILL)
    return actor["pid"]


def test_killed_actor_restarts_and_the_epoch_stays_exactly_once(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-kill", world_size=1, shuffle="global", batch_size=2)
    try:
        ld = rp.loader("svc-kill", rank=0, world_size=1)
        assert len(ld) == 12
        seen = []
        for i, (_, labels) in enumerate(ld):
            seen.extend(labels.numpy().ravel().tolist())
            if i == 3:
                old_pid = _kill_actor_of(svc, 0)
        assert sorted(seen) == list(range(24)), "every sample exactly once despite the restart"
        ld.set_epoch(0)
        again = [s for _, labels in ld for s in labels.numpy().ravel().tolist()]
        assert again == seen, "the restarted actor produced the same order"
        assert next(a for a in svc.stats()["actors"] if a["rank"] == 0)["pid"] != old_pid
    finally:
        svc.shutdown()


def test_actor_without_restarts_left_gives_a_clear_error(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-dead", world_size=1, max_restarts=0, batch_size=2)
    try:
        ld = rp.loader("svc-dead", rank=0, world_size=1)
        it = iter(ld)
        next(it)
        _kill_actor_of(svc, 0)
        with pytest.raises(rp.RaypipeError, match=r"pipeline actor serving rank 0 of 'svc-dead' is gone at epoch 0"):
            for _ in it:
                pass
        assert 1 <= ld.state_dict()["offset"] // 2 < len(ld)
    finally:
        svc.shutdown()


def test_fractional_gpus_put_two_actors_on_each_gpu(cluster, jpeg_files):
    with pytest.raises(rp.ArgumentError, match=r"world_size=9 with 0.5 GPU per pipeline actor needs 4.5 GPUs"):
        _serve(jpeg_files, "svc-half", world_size=9, num_gpus_per_actor=0.5)
    svc = _serve(jpeg_files, "svc-half", world_size=8, num_gpus_per_actor=0.5, batch_size=3)
    try:
        loaders = [rp.loader("svc-half", rank=r, world_size=8) for r in range(8)]
        seen = [s for ld in loaders for _, labels in ld for s in labels.numpy().ravel().tolist()]
        assert sorted(seen) == list(range(24))
        placed = [(a["node_id"], tuple(a["gpu_ids"])) for a in svc.stats()["actors"]]
        assert all(len(gpus) == 1 for _, gpus in placed)
        assert sorted(placed.count(p) for p in set(placed)) == [2, 2, 2, 2], placed
    finally:
        svc.shutdown()


def test_pause_loses_no_batch(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-pause", world_size=2)
    try:
        ld = rp.loader("svc-pause", rank=0, world_size=2)
        ld.set_epoch(2)
        full = [labels.numpy().ravel().tolist() for _, labels in ld]
        ld.set_epoch(2)
        got = []
        for i, (_, labels) in enumerate(ld):
            got.append(labels.numpy().ravel().tolist())
            if i == 0:
                svc.pause()
        assert got == full and len(full) == 3
    finally:
        svc.shutdown()


def test_each_rank_is_served_from_its_own_node(cluster, jpeg_files):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from tests.cluster.ranks import RankProcess

    svc = _serve(jpeg_files, "svc-affinity")
    try:
        gpu_nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU"))
        # ranks 0 and 1 on the second node, 2 and 3 on the first: not the slots' natural order
        homes = [gpu_nodes[1], gpu_nodes[1], gpu_nodes[0], gpu_nodes[0]]
        rank_cls = ray.remote(num_cpus=0)(RankProcess)
        procs = [
            rank_cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(home, soft=False)).remote()
            for home in homes
        ]
        where = ray.get([p.first_batch.remote("svc-affinity", r, WORLD) for r, p in enumerate(procs)])
        assert where == homes
        served_from = {a["rank"]: a["node_id"] for a in svc.stats()["actors"]}
        assert [served_from[r] for r in range(WORLD)] == homes
    finally:
        svc.shutdown()


def test_next_epoch_is_prepared_without_a_barrier(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-runon", world_size=2)
    try:
        ld = rp.loader("svc-runon", rank=1, world_size=2)
        for epoch in range(3):
            ld.set_epoch(epoch)
            assert sum(1 for _ in ld) == 3
        stats = svc.stats()
        actor = next(a for a in stats["actors"] if a["rank"] == 1)
        assert actor["batches"] == 9 and actor["seeks"] == 1, actor
        assert stats["progress"] == {1: [2, 3]}, "rank 1 acknowledged all 3 batches of epoch 2"
        ld.set_epoch(5)
        assert svc.stats()["progress"] == {1: [5, 0]}
    finally:
        svc.shutdown()
