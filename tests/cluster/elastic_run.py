"""Ray Train's elastic mode against a service, on a simulated cluster that loses a node mid-epoch.

Run by tests/cluster/test_ray_train.py in a process of its own (it builds its own cluster):
a head and two nodes of one ``trainer`` slot each, a service of 2 ranks, a ``TorchTrainer``
with ``num_workers=(1, 2)``. At step ``lose_node_at`` rank 1 names its node and this driver
removes that node; Ray Train restarts the group with the one worker that still fits, whose
loader makes the service serve 1 rank and resumes at the last checkpoint. Prints one JSON line:
the run's error (or null) and the world size the service serves at the end.

    python tests/cluster/elastic_run.py FILES_JSON LOGS STORAGE
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import ray
from ray.cluster_utils import Cluster
from ray.experimental import internal_kv
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

import raypipe as rp
from tests.cluster.pipelines import indexed
from tests.cluster.train_worker import REMOVE_KEY, train_loop


def remove_when_asked(cluster: Cluster, nodes: list, stop: threading.Event) -> None:
    """Remove the node a worker names under :data:`REMOVE_KEY`."""
    while not stop.is_set():
        named = internal_kv._internal_kv_get(REMOVE_KEY)
        if named:
            for node in nodes:
                if node.node_id == named.decode():
                    cluster.remove_node(node)
                    print(f"removed node {named.decode()[:8]}", file=sys.stderr)
                    return
        time.sleep(0.2)


#: Ray Train's controller may first try the group size of before the node was lost, while the
#: cluster's resources still count that node, and waits this long for its placement group (60 s
#: by default) before it tries the size that fits. Only the placement group's wait counts, and on
#: this cluster of logical resources a group that fits is placed at once (0.00 s in its logs).
GROUP_START_TIMEOUT_S = "5"


def main(files: list[str], logs: str, storage: str) -> None:
    os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", GROUP_START_TIMEOUT_S)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1, resources={"trainer": 1}) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    svc = rp.serve(
        indexed, name="elastic", world_size=2, seed=0, num_cpus_per_actor=0, replace=True, files=files,
        shuffle="global", last_batch="pad",
    )  # fmt: skip
    stop = threading.Event()
    threading.Thread(target=remove_when_asked, args=(cluster, nodes, stop), daemon=True).start()
    error = None
    try:
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={
                "service": "elastic",
                "logs": logs,
                "epochs": 2,
                "every": 4,
                "settle_s": 2.5,
                "lose_node_at": 6,
            },  # fmt: skip
            scaling_config=ScalingConfig(num_workers=(1, 2), resources_per_worker={"trainer": 1}),
            run_config=RunConfig(name="elastic", storage_path=storage, failure_config=FailureConfig(max_failures=1)),
        )
        try:
            trainer.fit()
        except Exception as exc:  # reported to the test, which shows it
            error = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"error": error, "world_size": svc.config.world_size}))
    finally:
        stop.set()
        svc.shutdown()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f), sys.argv[2], sys.argv[3])
