"""Where a rank trains, and how its pipeline actor joins it there.

A pipeline actor shares its rank's node and GPU instead of reserving a GPU of its own
through Ray (the trainers already hold every GPU): it is pinned to the rank's node and
its ``CUDA_VISIBLE_DEVICES`` names the rank's physical GPU, by UUID on real hardware.
The rank's GPU is found whatever launched it:

* a Ray actor or Ray Train worker holding GPUs: the first of ``ray.get_gpu_ids()``
  (Ray Train may show a worker every GPU of its node; the ids are its own);
* a ``horovodrun``/``torchrun`` process that sees every GPU of its node: the GPU of its
  local rank (``LOCAL_RANK``, ``HOROVOD_LOCAL_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``),
  or torch's current device once the script has chosen one;
* an explicit ``device`` (``"cuda:3"``, ``3``, ``"cpu"``).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import niceness
from actors.pipeline_actor import CONCURRENCY_GROUPS, PipelineActor
from raypipe.errors import ArgumentError, RaypipeError
from raypipe.service_config import ServiceConfig

from .actor_launch import ActorLaunch
from .naming import NAMESPACE, pipeline_actor_name

_LOCAL_RANK_VARS = ("LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
_LOCAL_SIZE_VARS = ("LOCAL_WORLD_SIZE", "HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")


@dataclasses.dataclass(frozen=True)
class RankLocation:
    """A rank's node, the physical GPU it trains on (None: no GPU) as its pipeline actor's
    ``CUDA_VISIBLE_DEVICES`` names it, that GPU's index in the rank's own process, and how it
    was found."""

    node_id: str
    gpu: str | None
    cuda_index: int | None
    how: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def local_rank() -> int:
    """This process's rank on its node, from the launcher's environment (0 when alone)."""
    for key in _LOCAL_RANK_VARS:
        if key in os.environ:
            return int(os.environ[key])
    return 0


def local_world_size() -> int | None:
    """How many ranks the launcher started on this node (torchrun, horovodrun, mpirun), or None
    when it does not say."""
    for key in _LOCAL_SIZE_VARS:
        if key in os.environ:
            return int(os.environ[key])
    return None


def locate_rank(device: str | int | None = None) -> RankLocation:
    """The node and physical GPU of the calling training process (see the module docstring)."""
    node_id = ray.get_runtime_context().get_node_id()
    index = parse_device(device)
    if device is not None and index is None:
        return RankLocation(node_id, None, None, "device='cpu'")
    how = f"device={device!r}"
    visible = _visible_devices()
    if index is None:
        ray_ids = [str(g) for g in ray.get_gpu_ids()]
        if ray_ids:
            index = visible.index(ray_ids[0]) if visible and ray_ids[0] in visible else 0
            return RankLocation(node_id, _physical(ray_ids[0], index), index, "ray.get_gpu_ids()")
        index, how = _chosen_index()
        if index is None:
            return RankLocation(node_id, None, None, "no GPU on this node")
    if visible is None:
        return RankLocation(node_id, _physical(str(index), index), index, how)
    if index >= len(visible):
        raise ArgumentError(
            f"loader: GPU {index} asked for ({how}) but this process sees {len(visible)} "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    return RankLocation(node_id, _physical(visible[index], index), index, how)


def parse_device(device: str | int | None) -> int | None:
    """The CUDA index a loader's ``device`` names (None for ``"cpu"`` or no device);
    ArgumentError for anything else."""
    if device is None or device == "cpu":
        return None
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    if isinstance(device, str) and device.startswith("cuda"):
        tail = device[4:].lstrip(":")
        if tail == "":
            return 0
        if tail.isdigit():
            return int(tail)
    raise ArgumentError(f"loader: device must be 'cpu', 'cuda', 'cuda:N' or an int N >= 0, got {device!r}")


def _chosen_index() -> tuple[int | None, str]:
    """The GPU a launcher-started process uses: torch's current device when the script has set
    one, else its local rank, when the node has that many GPUs (real, else Ray's logical ones)."""
    count = _cuda_device_count()
    if count:
        import torch

        if torch.cuda.is_initialized():
            return torch.cuda.current_device(), "torch.cuda.current_device()"
    else:
        count = int(_node_resources().get("GPU", 0))
    rank = local_rank()
    if rank < count:
        return rank, f"local rank {rank}"
    return None, ""


def _visible_devices() -> list[str] | None:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None or value.strip() == "":
        return None
    return [v.strip() for v in value.split(",")]


def _physical(name: str, local_index: int) -> str:
    """``name`` (this process's GPU ``local_index``) as the actor's CUDA_VISIBLE_DEVICES entry:
    the GPU's UUID when this process can ask the driver (so the match survives any renumbering),
    else the name as given (Ray's logical GPUs)."""
    if name.startswith(("GPU-", "MIG-")) or _cuda_device_count() <= local_index:
        return name
    import torch

    return f"GPU-{uuid.UUID(str(torch.cuda.get_device_properties(local_index).uuid))}"


#: Where an NVIDIA driver shows itself (on Linux; WSL's GPU device): without one, CUDA sees no
#: GPU, and a process that has not imported torch is spared importing it (1-2 s) to hear so.
_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg")


def _cuda_device_count() -> int:
    if not any(os.path.exists(path) for path in _DRIVER_PATHS):
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _node_resources(node_id: str | None = None) -> dict[str, float]:
    node_id = node_id or ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node["NodeID"] == node_id:
            return node["Resources"]
    return {}


def start_pipeline_actor(
    launch: ActorLaunch, config: ServiceConfig, rank: int, location: RankLocation
) -> tuple[Any, dict[str, Any]]:
    """Start (or find) ``rank``'s pipeline actor on the rank's node and GPU, owned by the calling
    process (it goes when the rank goes), and wait at most ``launch.startup_timeout_s`` until it
    has built its pipeline. Returns the handle and where it runs.

    The actor reserves ``launch.num_cpus`` CPUs and no GPU. When the node cannot give it those
    CPUs in time, the error names the node, what it has and what is free."""
    nice = launch.niceness_here()
    actor = (
        ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(PipelineActor)
        .options(
            name=pipeline_actor_name(config.name, rank),
            namespace=NAMESPACE,
            get_if_exists=True,
            num_cpus=launch.num_cpus,
            num_gpus=0,
            max_restarts=launch.max_restarts,
            max_task_retries=launch.max_task_retries,
            runtime_env=niceness.runtime_env(nice),
            scheduling_strategy=NodeAffinitySchedulingStrategy(location.node_id, soft=False),
        )
        .remote(config, rank, location.as_dict(), nice)
    )
    timeout_s = launch.startup_timeout_s
    try:
        return actor, ray.get(actor.where.remote(), timeout=timeout_s)
    except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnschedulableError) as exc:
        ray.kill(actor, no_restart=True)
        total = _node_resources(location.node_id)
        free = ray._private.state.available_resources_per_node().get(location.node_id, {})
        unschedulable = isinstance(exc, ray.exceptions.ActorUnschedulableError)
        why = "cannot start" if unschedulable else f"did not start within {timeout_s:g} s"
        raise RaypipeError(
            f"loader: the pipeline actor for rank {rank} {why}. It needs {{'CPU': {launch.num_cpus:g}}} on node "
            f"{location.node_id} (where rank {rank} runs), which has CPU {total.get('CPU', 0):g} in all and "
            f"{free.get('CPU', 0):g} free; lower num_cpus_per_actor in rp.serve (0 shares the rank's CPUs) or free "
            f"CPUs on that node"
        ) from None
    except ray.exceptions.RayActorError as exc:
        ray.kill(actor, no_restart=True)
        cause = str(exc).strip().splitlines()[-1]  # the exception its constructor raised
        raise RaypipeError(
            f"loader: the pipeline actor for rank {rank} on node {location.node_id} failed to start: {cause}"
        ) from exc


def require_resources(what: str, count: int, bundle: dict[str, float]) -> None:
    """Fail at once, naming what is missing, when ``count`` x ``bundle`` exceeds what the Ray
    cluster has in all (nothing could ever start them: Ray would wait for ever)."""
    total = ray.cluster_resources()
    missing = {k: count * v for k, v in bundle.items() if count * v > total.get(k, 0)}
    if missing:
        has = ", ".join(f"{k} {total.get(k, 0):g}" for k in missing)
        raise RaypipeError(
            f"{what}: {count} x {bundle} need {', '.join(f'{k} {v:g}' for k, v in missing.items())}; "
            f"the Ray cluster has {has} in all"
        )
