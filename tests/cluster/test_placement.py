"""Finding a rank's GPU whatever launched it, on the simulated cluster of ``conftest.py``
(head without GPUs + 2 nodes x 2 logical GPUs)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import raypipe as rp
from actors import niceness
from cluster import placement
from cluster.placement import locate_rank, require_resources

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gpu_nodes() -> list[str]:
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU"))


@ray.remote(num_cpus=0)
def _locate_here(device=None):
    return locate_rank(device).as_dict()


def test_without_an_nvidia_driver_no_gpu_is_counted_and_torch_is_not_imported():
    if any(os.path.exists(path) for path in placement._DRIVER_PATHS):
        pytest.skip("this machine has an NVIDIA driver")
    code = "import sys; from cluster import placement; print(placement._cuda_device_count(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.split() == ["0", "False"], out.stdout + out.stderr


def test_an_explicit_device_names_the_rank_gpu(cluster, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert locate_rank("cpu").gpu is None
    assert locate_rank("cuda:1").gpu == "1" and locate_rank(1).gpu == "1" and locate_rank("cuda").gpu == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert locate_rank("cuda:1").gpu == "5", "an index into what this process sees"
    assert locate_rank("cuda:1").cuda_index == 1
    assert locate_rank("cuda:0").how == "device='cuda:0'"
    with pytest.raises(
        rp.ArgumentError, match=r"GPU 2 asked for .* but this process sees 2 \(CUDA_VISIBLE_DEVICES='3,5'\)"
    ):
        locate_rank("cuda:2")
    with pytest.raises(rp.ArgumentError, match="device must be 'cpu', 'cuda', 'cuda:N' or an int"):
        locate_rank("gpu0")


def test_a_launcher_process_seeing_every_gpu_takes_its_local_rank(cluster):
    """As horovodrun/torchrun start them: no GPU from Ray, every GPU of the node visible, one
    picked by local rank (Ray's logical GPUs here, real ones on hardware)."""
    node = _gpu_nodes()[0]
    for launcher_var in ("LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"):
        found = ray.get(
            _locate_here.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                runtime_env={"env_vars": {launcher_var: "1"}},
            ).remote()
        )
        assert found == {"node_id": node, "gpu": "1", "cuda_index": 1, "how": "local rank 1"}
    beyond = ray.get(
        _locate_here.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            runtime_env={"env_vars": {"LOCAL_RANK": "2"}},
        ).remote()
    )
    assert beyond["gpu"] is None, "a local rank beyond the node's GPUs trains on the CPU"


def test_a_ray_worker_holding_a_gpu_is_matched_by_its_ray_gpu_id(cluster):
    found = ray.get(_locate_here.options(num_gpus=1).remote())
    assert found["how"] == "ray.get_gpu_ids()" and found["gpu"] in ("0", "1") and found["node_id"] in _gpu_nodes()
    assert found["cuda_index"] == 0, "Ray shows the worker its own GPU as device 0"


def test_a_node_without_gpus_gives_no_gpu(cluster):
    assert locate_rank().as_dict() == {
        "node_id": ray.get_runtime_context().get_node_id(),
        "gpu": None,
        "cuda_index": None,
        "how": "no GPU on this node",
    }


def test_asking_for_more_than_the_cluster_has_is_named_at_once(cluster):
    require_resources("trainers", 2, {"CPU": 1.0, "GPU": 1.0})
    with pytest.raises(
        rp.RaypipeError,
        match=r"trainers: 6 x \{'CPU': 1.0, 'GPU': 1.0\} need CPU 6, GPU 6; the Ray cluster has CPU 5, GPU 4 in all",
    ):
        require_resources("trainers", 6, {"CPU": 1.0, "GPU": 1.0})


@ray.remote(num_cpus=0)
class _Probe:
    def niceness(self) -> int:
        return niceness.current()


def test_ray_starts_a_worker_at_the_niceness_of_the_runtime_env(cluster, monkeypatch):
    """The fallback, forced: the variable Ray reads is the one :func:`niceness.runtime_env` sets."""
    monkeypatch.setattr(niceness, "may_lower_to", lambda _: False)
    probe = _Probe.options(runtime_env=niceness.runtime_env(4)).remote()
    try:
        assert ray.get(probe.niceness.remote(), timeout=60) == 4
    finally:
        ray.kill(probe)
