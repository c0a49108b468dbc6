"""One simulated Ray cluster for every cluster test: a head and 2 nodes with 2 logical GPUs each.

The cluster tests' pipelines resize on the host with Pillow, not torch (``RAYPIPE_HOST_RESIZE``), in
the nodes' processes and in the test process alike: with torch every pipeline actor would import it
(1.4 s of CPU each, hundreds of actors), a third of these tests' time on 2 cores. What they test is
the service; both resize backends are tested in ``tests/operators/test_host_resize.py``.
"""

from __future__ import annotations

import contextlib
import time

import pytest
import ray
from ray._private import state as ray_state
from ray.cluster_utils import Cluster

#: The environment of the cluster tests and of the nodes they start.
ENVIRONMENT = {"RAYPIPE_HOST_RESIZE": "pillow"}


@contextlib.contextmanager
def _environment():
    """:data:`ENVIRONMENT` set in this process until the block ends."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in ENVIRONMENT.items():
            patch.setenv(key, value)
        yield


@pytest.fixture(scope="module", autouse=True)
def host_resize_by_pillow():
    """:data:`ENVIRONMENT` for each cluster test module: the processes it starts (nodes, ranks, jobs)
    inherit it, and its own pipelines resize as the actors do."""
    with _environment():
        yield


@pytest.fixture(scope="session")
def cluster():
    with _environment():  # a session fixture starts before the module's
        c = _start_cluster()
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _start_cluster() -> Cluster:
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            # raypipe's gauges reach each node's Prometheus endpoint within a second (default: 10 s)
            "_system_config": {"metrics_report_interval_ms": 1000},
        },
    )
    for _ in range(2):
        c.add_node(num_cpus=2, num_gpus=2)
    c.wait_for_nodes()
    return c


@pytest.fixture(scope="module")
def cpu_node(cluster):
    """A CPU-only node with 2 CPUs: where helpers go first."""
    before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    (node_id,) = {n["NodeID"] for n in ray.nodes() if n["Alive"]} - before
    yield node_id
    cluster.remove_node(node)


@pytest.fixture(scope="module", autouse=True)
def resources_returned():
    """After each module, every CPU and GPU of the cluster is free again within 30 s (killed actors
    return theirs asynchronously): whatever a test's services started was released by their owners.
    Fails naming the actors still alive."""
    yield
    if not ray.is_initialized():
        return
    deadline = time.monotonic() + 30
    while True:
        total, free = ray.cluster_resources(), ray.available_resources()
        held = {
            k: round(total.get(k, 0) - free.get(k, 0), 3)
            for k in ("CPU", "GPU")
            if total.get(k, 0) - free.get(k, 0) > 1e-6
        }
        if not held or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if held:
        alive = [f"{a['ActorClassName']} {a['Name']!r}" for a in ray_state.actors().values() if a["State"] != "DEAD"]
        pytest.fail(f"resources still held 30 s after the module: {held}; actors alive: {alive}")
