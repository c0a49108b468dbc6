"""The service on the simulated 3-node Ray cluster of ``conftest.py`` (head + 2 nodes with 2 logical GPUs each)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
import ray

import raypipe as rp
from raypipe.backend import GpuUnavailableWarning
from tests.cluster.pipelines import MEAN, STD, augmented, indexed, indexed_on_gpu_0, resized
from tests.cluster.ranks import RankProcess

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


@pytest.mark.parametrize("ranks_first", [True, False])
def test_pipeline_actors_share_their_ranks_gpus_and_reserve_none(cluster, jpeg_files, ranks_first):
    """4 rank actors holding one logical GPU each (all 4 of the cluster) and a service with
    default arguments, started in either order: every rank reads its epoch, and every pipeline
    actor sits on its rank's node with CUDA_VISIBLE_DEVICES naming its rank's GPU."""
    name = f"svc-share-{ranks_first}"
    rank_cls = ray.remote(num_gpus=1)(RankProcess)

    def start_ranks():
        ranks = [rank_cls.remote() for _ in range(WORLD)]
        return ranks, ray.get([r.home.remote() for r in ranks], timeout=60)

    if ranks_first:
        ranks, homes = start_ranks()
        svc = rp.serve(indexed, name=name, world_size=WORLD, files=jpeg_files, replace=True)
    else:
        svc = rp.serve(indexed, name=name, world_size=WORLD, files=jpeg_files, replace=True)
        ranks, homes = start_ranks()
    try:
        assert ray.available_resources().get("GPU", 0) == 0, "the ranks hold every GPU"
        seen = ray.get([p.read_epoch.remote(name, r, WORLD, 0) for r, p in enumerate(ranks)], timeout=120)
        assert sorted(s for part in seen for s in part) == list(range(len(jpeg_files)))
        actors = svc.stats()["actors"]
        assert [a["rank"] for a in actors] == list(range(WORLD))
        for rank, (actor, home) in enumerate(zip(actors, homes)):
            assert actor["node_id"] == home["node_id"], f"rank {rank} on its node"
            assert len(home["gpu_ids"]) == 1 and actor["cuda_visible_devices"] == home["gpu_ids"][0], (actor, home)
            assert actor["gpu_found_by"] == "ray.get_gpu_ids()"
            assert actor["niceness"] == home["niceness"], "at its rank's niceness"
        placed = {(a["node_id"], a["cuda_visible_devices"]) for a in actors}
        assert len(placed) == WORLD, "one pipeline actor per GPU"
    finally:
        svc.shutdown()
        for r in ranks:
            ray.kill(r)


def test_an_actor_that_cannot_get_its_cpus_fails_in_bounded_time_naming_them(cluster, jpeg_files):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    head = ray.get_runtime_context().get_node_id()
    svc = _serve(jpeg_files, "svc-cpus", num_cpus_per_actor=8)
    try:
        missing = r"cannot start. It needs \{'CPU': 8\} on node \w+ \(where rank 0 runs\), which has CPU 1 in all"
        with pytest.raises(rp.RaypipeError, match=missing):
            rp.loader("svc-cpus", rank=0, world_size=WORLD)
    finally:
        svc.shutdown()
    svc = _serve(jpeg_files, "svc-cpus", num_cpus_per_actor=1, startup_timeout_s=3)
    holder = (
        ray.remote(num_cpus=1)(RankProcess)
        .options(scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False))
        .remote()
    )
    try:
        ray.get(holder.home.remote())
        with pytest.raises(rp.RaypipeError, match=r"did not start within 3 s.*has CPU 1 in all and 0 free"):
            rp.loader("svc-cpus", rank=0, world_size=WORLD)
    finally:
        ray.kill(holder)
        svc.shutdown()


def test_the_driver_probes_a_gpu_pipeline_without_a_device(cluster, jpeg_files):
    """``serve`` reads the dataset from a probe of the pipeline built in the calling process. The
    probe opens no device: a driver on a GPU node makes no CUDA context on the GPU where rank 0
    trains, and one without a GPU warns nothing."""
    files = jpeg_files[:10]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        svc = rp.serve(indexed_on_gpu_0, name="svc-gpu0", world_size=1, files=files, num_cpus_per_actor=0.25)
    try:
        assert [str(w.message) for w in seen if issubclass(w.category, GpuUnavailableWarning)] == []
        ld = rp.loader("svc-gpu0", rank=0, world_size=1)
        assert sorted(int(x) for _, labels in ld for x in labels.numpy().ravel()) == list(range(len(files)))
    finally:
        svc.shutdown()


SUSPENDED_AT_EXIT = """
import ray
import raypipe as rp
from tests.cluster.pipelines import indexed

ray.init()
svc = rp.serve(indexed, name="svc-exit", world_size=1, files=FILES, num_cpus_per_actor=0.25)
loader = rp.loader("svc-exit", rank=0, world_size=1)
batches = iter(loader)
next(batches)
while loader._acks._position is None:  # until an acknowledgement waits to be sent (one came fast)
    next(batches)
svc.shutdown()
print("script done", flush=True)
"""


def test_a_script_ending_inside_an_iteration_exits_quietly(cluster, jpeg_files):
    """A script that leaves an iteration suspended (``next(iter(loader))``) and ends: Ray shuts down
    at exit before the iterator is closed, and closing it must not try to reach the service."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = f"FILES = {jpeg_files!r}\n" + SUSPENDED_AT_EXIT
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env={**os.environ, "RAY_ADDRESS": cluster.address, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "script done" in proc.stdout, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_dropping_a_loader_stops_its_pipeline_actor(cluster, jpeg_files):
    import gc

    svc = _serve(jpeg_files, "svc-drop")
    try:
        ld = rp.loader("svc-drop", rank=1, world_size=WORLD)
        next(iter(ld))
        pid = ld.actor_info["pid"]
        assert [a["pid"] for a in svc.stats()["actors"] if a["available"]] == [pid]
        del ld
        gc.collect()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(a["available"] for a in svc.stats()["actors"]):
            time.sleep(0.2)
        assert not any(a["available"] for a in svc.stats()["actors"]), "the actor went with its loader"
    finally:
        svc.shutdown()


def test_an_abandoned_iteration_leaves_no_request_in_flight(cluster, jpeg_files):
    """A ``break`` returns once the requests prefetched past it are done, so a service shut down
    right after kills no actor mid-request (Ray would log each as a failed task it retries)."""
    svc = _serve(jpeg_files, "svc-abandon", world_size=1)
    try:
        ld = rp.loader("svc-abandon", rank=0, world_size=1, prefetch=3)
        assert len(ld) > 3
        for _ in ld:
            break
        served = [a["batches"] for a in svc.stats()["actors"] if a["available"]]
        assert served == [3], "the two requests in flight at the break were finished before it returned"
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
    with pytest.raises(rp.ArgumentError, match="num_gpus_per_actor is no longer an argument: pipeline actors share"):
        _serve(jpeg_files, "svc-bad", num_gpus_per_actor=1)
    with pytest.raises(rp.ArgumentError, match="num_cpus_per_actor must be a number >= 0"):
        _serve(jpeg_files, "svc-bad", num_cpus_per_actor=-1)
    with pytest.raises(rp.ArgumentError, match="last_batch must be one of"):
        _serve(jpeg_files, "svc-bad", last_batch="ends")
    with pytest.raises(rp.ArgumentError, match="shuffle must be one of"):
        _serve(jpeg_files, "svc-bad", shuffle="random")
    for niceness in (-1, 20, 1.5, True):
        with pytest.raises(rp.ArgumentError, match="niceness must be None or an int from 0 to 19"):
            _serve(jpeg_files, "svc-bad", niceness=niceness)
    with pytest.raises(
        rp.ArgumentError, match=r"serve: unexpected keyword argument 'cpu_helper'; did you mean 'cpu_helpers'"
    ):
        _serve(jpeg_files, "svc-bad", cpu_helper=1)
    with pytest.raises(rp.ArgumentError, match=r"'file'; did you mean 'files'\? .* pipeline function indexed\(files\)"):
        rp.serve(indexed, name="svc-bad", world_size=2, file=jpeg_files)
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
        with pytest.raises(rp.RaypipeError, match=r"no raypipe service named 'nope' on this Ray cluster \(running: "):
            rp.loader("nope", rank=0, world_size=2)
        with pytest.raises(rp.RaypipeError, match=r"'svc-nmae' .*; did you mean 'svc-name'\? \(running: .*svc-name"):
            rp.loader("svc-nmae", rank=0, world_size=2)
        with pytest.raises(rp.ArgumentError, match="device must be 'cpu', 'cuda', 'cuda:N' or an int"):
            rp.loader("svc-name", rank=0, world_size=2, device="tpu:0")
        with pytest.raises(
            rp.ArgumentError, match="loader: unexpected keyword argument 'prefech'; did you mean 'prefetch'"
        ):
            rp.loader("svc-name", rank=0, world_size=2, prefech=4)
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


def _kill_actor_of(svc, rank):
    import os
    import signal

    actor = next(a for a in svc.stats()["actors"] if a["rank"] == rank)
    os.kill(actor["pid"], signal.SIGKILL)
    return actor["pid"]


def test_killed_actor_restarts_and_the_epoch_stays_exactly_once(cluster, jpeg_files):
    """The pipeline draws per sample whether to augment (an ``if`` on pipeline data) and RandAugment's
    augmentations: the restarted actor makes the same images for the batches the killed one made."""
    svc = rp.serve(
        augmented, name="svc-kill", files=jpeg_files, world_size=1, seed=0, num_cpus_per_actor=0.25,
        replace=True, shuffle="global", batch_size=2,
    )  # fmt: skip
    try:
        ld = rp.loader("svc-kill", rank=0, world_size=1)
        assert len(ld) == 12
        seen, images = [], []
        for i, (batch, labels) in enumerate(ld):
            seen.extend(labels.numpy().ravel().tolist())
            images.append(batch.numpy().tobytes())
            if i == 3:
                old_pid = _kill_actor_of(svc, 0)
        assert sorted(seen) == list(range(24)), "every sample exactly once despite the restart"
        ld.set_epoch(0)
        again, again_images = [], []
        for batch, labels in ld:
            again.extend(labels.numpy().ravel().tolist())
            again_images.append(batch.numpy().tobytes())
        assert again == seen, "the restarted actor produced the same order"
        assert again_images == images, "and the same augmented images"
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


def _passes(loader, epochs: int) -> list[int]:
    """Batches read in each of the first ``epochs`` epochs."""
    counts = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        counts.append(sum(1 for _ in loader))
    return counts


def test_next_epoch_is_prepared_without_a_barrier(cluster, jpeg_files):
    svc = _serve(jpeg_files, "svc-runon", world_size=2)
    try:
        ld = rp.loader("svc-runon", rank=1, world_size=2)
        assert _passes(ld, 3) == [3, 3, 3]
        stats = svc.stats()
        actor = next(a for a in stats["actors"] if a["rank"] == 1)
        assert actor["batches"] == 9 and actor["seeks"] == 1, actor
        assert stats["progress"] == {1: [2, 3]}, "rank 1 acknowledged all 3 batches of epoch 2"
        ld.set_epoch(5)
        assert svc.stats()["progress"] == {1: [5, 0]}
    finally:
        svc.shutdown()


def test_a_rank_acknowledges_every_batch_in_fewer_calls_and_exactly_at_each_pass_end(cluster, jpeg_files):
    svc = _serve(jpeg_files * 4, "svc-acks", world_size=1, batch_size=3)  # 96 samples: 32 batches an epoch
    try:
        ld = rp.loader("svc-acks", rank=0, world_size=1)
        assert _passes(ld, 2) == [32, 32]
        stats = svc.stats()
        assert stats["progress"] == {0: [1, 32]}, "the end of a pass is acknowledged at once"
        rank = stats["ranks"][0]
        assert rank["batches"] == 64, "every batch's timing arrives"
        assert 2 <= rank["acks"] < 64, "sent together, at most every ACK_INTERVAL_S and at each pass end"
        ld.set_epoch(2)
        for k, _ in enumerate(ld):
            if k == 4:
                break
        assert svc.stats()["progress"] == {0: [2, 5]}, "a pass broken off acknowledges where it stopped"
    finally:
        svc.shutdown()


def test_uint8_batches_normalized_on_the_rank_equal_the_pipelines_float_output(cluster, jpeg_files):
    """The host path for pipelines without a GPU stage: ship uint8 (4x fewer bytes), normalize
    on the rank's device with rp.Normalize; same values as crop_mirror_normalize in the pipeline."""
    files = jpeg_files[:12]
    svcs = [
        rp.serve(resized, name=f"svc-u8-{n}", world_size=2, files=files, normalize=n, replace=True)
        for n in (False, True)
    ]
    try:
        on_rank = rp.loader("svc-u8-False", rank=1, world_size=2, normalize=rp.Normalize(MEAN, STD))
        in_pipeline = rp.loader("svc-u8-True", rank=1, world_size=2)
        pairs = list(zip(on_rank, in_pipeline))
        assert len(pairs) == len(in_pipeline) == 2
        for (images, labels), (reference, ref_labels) in pairs:
            assert images.dtype == reference.dtype and tuple(images.shape) == tuple(reference.shape) == (4, 3, 32, 32)
            np.testing.assert_allclose(images.numpy(), reference.numpy(), atol=1e-5, rtol=0)
            assert labels.tolist() == ref_labels.tolist()
        with pytest.raises(rp.ArgumentError, match="normalize must be an rp.Normalize, and needs output='torch'"):
            rp.loader("svc-u8-False", rank=0, world_size=2, output="numpy", normalize=rp.Normalize(MEAN, STD))
    finally:
        for svc in svcs:
            svc.shutdown()
