"""Batches in the object store: a normal epoch spills nothing, the loader warns when its prefetch
cannot fit the node's store (and Ray then does spill), and ``stats()`` reports the store. Ranks
that map their actor's shared memory (:mod:`actors.host_ring`) leave the store out, whatever
their prefetch; ``RAYPIPE_HOST_RING=0`` sends their batches through it."""

from __future__ import annotations

import time
import warnings

import pytest
import ray

import raypipe as rp
from cluster import object_store
from cluster.diagnosis import diagnose
from cluster.loader import HOST_RING_ENV
from cluster.stats_command import format_stats
from tests.cluster.pipelines import big_batches

STORE = 80 * 2**20  # the node's whole object store: a dozen of big_batches' 6 MiB batches overflow it
BATCH_BYTES = 8 * 512 * 512 * 3
PAUSE_S, STEP_S = 3.0, 0.05


class SlowRank:
    """A rank whose first step takes ``PAUSE_S`` (an evaluation, a checkpoint) and every other
    ``STEP_S``: its prefetched batches wait in the store meanwhile, all of them during the pause."""

    def read_epoch(self, service: str, prefetch: int) -> dict:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", object_store.ObjectStoreWarning)
            loader = rp.loader(service, rank=0, world_size=1, output="numpy", prefetch=prefetch)
            labels = []
            for step, (_, batch_labels) in enumerate(loader):
                time.sleep(PAUSE_S if step == 0 else STEP_S)
                labels += batch_labels.ravel().tolist()
        return {
            "labels": labels,
            "transport": loader.host_transport,
            "node": ray.get_runtime_context().get_node_id(),
            "warnings": [str(w.message) for w in caught if issubclass(w.category, object_store.ObjectStoreWarning)],
        }


@pytest.fixture
def small_store_node(cluster):
    """A node whose object store holds 80 MiB, for ranks that ask for its ``small_store`` resource."""
    node = cluster.add_node(num_cpus=2, object_store_memory=STORE, resources={"small_store": 1})
    cluster.wait_for_nodes()
    yield node
    cluster.remove_node(node)


def _epoch_on_small_node(files: list[str], name: str, prefetch: int, ring: bool) -> tuple[dict, int]:
    """One epoch read by a rank on the small-store node, its batches through the actor's shared
    memory (``ring``) or the object store: what it saw and the bytes Ray spilled meanwhile."""
    svc = rp.serve(big_batches, name=name, world_size=1, seed=1, files=files, replace=True)
    env = {} if ring else {"env_vars": {HOST_RING_ENV: "0"}}
    rank = ray.remote(SlowRank).options(num_cpus=0, resources={"small_store": 0.01}, runtime_env=env).remote()
    try:
        before = object_store.usage().spilled_bytes
        seen = ray.get(rank.read_epoch.remote(name, prefetch), timeout=180)
        return seen, object_store.usage().spilled_bytes - before
    finally:
        ray.kill(rank)
        svc.shutdown()


@pytest.mark.slow
def test_a_normal_epoch_spills_nothing_and_an_oversized_prefetch_is_warned_about(small_store_node, jpeg_files):
    files = jpeg_files * 7  # 168 samples: 21 batches of 6 MiB, 126 MiB in all, more than the store
    normal, spilled = _epoch_on_small_node(files, "store-normal", prefetch=2, ring=False)
    assert normal["node"] == small_store_node.node_id
    assert normal["transport"] == f"object store ({HOST_RING_ENV}=0)"
    assert sorted(normal["labels"]) == list(range(len(files))), "every sample exactly once"
    assert normal["warnings"] == []
    assert spilled == 0, f"Ray spilled {spilled} bytes during a normal epoch"

    hoarding, spilled = _epoch_on_small_node(files, "store-hoarding", prefetch=16, ring=False)
    assert sorted(hoarding["labels"]) == list(range(len(files))), "spilled batches still arrive, exactly once"
    [warning] = hoarding["warnings"]
    assert "prefetch=16" in warning and "80.0 MiB object store" in warning and "spill" in warning
    assert spilled > 0, "the warned-about prefetch did make Ray spill: the check above has teeth"


@pytest.mark.slow
def test_batches_in_the_actors_shared_memory_leave_the_store_out_whatever_the_prefetch(small_store_node, jpeg_files):
    files = jpeg_files * 7
    hoarding, spilled = _epoch_on_small_node(files, "store-ring", prefetch=16, ring=True)
    assert hoarding["node"] == small_store_node.node_id
    assert hoarding["transport"] == "shared memory"
    assert sorted(hoarding["labels"]) == list(range(len(files))), "every sample exactly once"
    assert hoarding["warnings"] == [], "nothing in flight is in the store, so nothing to warn about"
    assert spilled == 0, f"Ray spilled {spilled} bytes with batches in the actor's shared memory"


def test_spill_risk_counts_every_rank_on_the_node():
    assert object_store.spill_risk(BATCH_BYTES, prefetch=2, node_ranks=1, store_bytes=STORE) is None
    risk = object_store.spill_risk(BATCH_BYTES, prefetch=2, node_ranks=8, store_bytes=STORE)
    assert risk is not None and "x 8 rank(s)" in risk and "144.0 MiB" in risk
    assert object_store.spill_risk(0, prefetch=64, node_ranks=8, store_bytes=STORE) is None, "GPU batches (IPC)"


def test_stats_report_the_object_store_and_the_doctor_names_spilling(cluster, jpeg_files):
    svc = rp.serve(big_batches, name="store-stats", world_size=1, files=jpeg_files, replace=True)
    try:
        loader = rp.loader("store-stats", rank=0, world_size=1, output="numpy")
        for _ in loader:
            pass
        stats = svc.stats()
        store = stats["object_store"]
        assert store["available"] and store["capacity_bytes"] > 0 and store["used_bytes"] >= 0
        assert {"spilled_bytes", "spilled_objects", "restored_bytes"} <= store.keys()
        assert "object store:" in format_stats("store-stats", stats)
        stats["ranks"] = {0: {**stats["ranks"][0], "stall": 0.5}}  # as if the rank waited for input
        stats["object_store"] = {**store, "spilled_bytes": 300 * 2**20}
        report = diagnose(stats)
        assert any("spilled 300 MiB" in e for e in report["evidence"])
        assert any("lower the loader's prefetch" in s for s in report["suggestions"])
    finally:
        svc.shutdown()
