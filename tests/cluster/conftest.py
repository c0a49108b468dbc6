"""One simulated Ray cluster for every cluster test: a head and 2 nodes with 2 logical GPUs each."""

from __future__ import annotations

import pytest
import ray
from ray.cluster_utils import Cluster


@pytest.fixture(scope="session")
def cluster():
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
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def cpu_node(cluster):
    """A CPU-only node with 2 CPUs: where helpers go first."""
    before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    (node_id,) = {n["NodeID"] for n in ray.nodes() if n["Alive"]} - before
    yield node_id
    cluster.remove_node(node)
