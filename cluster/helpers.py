"""Starting, finding and stopping a service's CPU helper actors (:mod:`actors.cpu_helper`).

The coordinator owns them (they go when it goes, and it starts them again after a restart
from its record) and tells the pipeline actors which run (:mod:`cluster.helper_broadcast`);
each is named, so ``svc.stats()`` finds them by name. Where they go and how many run is
:mod:`cluster.helper_policy`'s decision.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import niceness
from actors.cpu_helper import CpuHelper
from raypipe.errors import ArgumentError
from raypipe.service_config import ServiceConfig

from .helper_policy import NodeInfo, choose_node
from .naming import NAMESPACE, helper_name


@dataclasses.dataclass(frozen=True)
class HelperPlan:
    """How a service runs CPU helpers: ``count`` of them, or ``"auto"`` (scaled on the ranks'
    stall), each reserving ``cpus`` CPUs and running ``threads`` units at once, placed leaving
    ``reserve_per_gpu`` CPUs per GPU to the trainers."""

    count: int | str = 0
    cpus: float = 1.0
    threads: int = 1
    reserve_per_gpu: float = 1.0
    max_helpers: int | None = None
    interval_s: float = 5.0

    @property
    def auto(self) -> bool:
        return self.count == "auto"

    @classmethod
    def parse(
        cls,
        cpu_helpers: int | str,
        cpus_per_helper: float,
        cpu_reserve_per_gpu: float,
        max_cpu_helpers: int | None,
        autoscale_interval_s: float,
    ) -> HelperPlan:
        """The checked plan; ArgumentError naming the first bad argument."""
        if cpu_helpers != "auto" and (
            isinstance(cpu_helpers, bool) or not isinstance(cpu_helpers, int) or cpu_helpers < 0
        ):
            raise ArgumentError(f"serve: cpu_helpers must be an int >= 0 or 'auto', got {cpu_helpers!r}")
        for name, value in (("cpus_per_helper", cpus_per_helper), ("autoscale_interval_s", autoscale_interval_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ArgumentError(f"serve: {name} must be a number > 0, got {value!r}")
        if (
            isinstance(cpu_reserve_per_gpu, bool)
            or not isinstance(cpu_reserve_per_gpu, (int, float))
            or (cpu_reserve_per_gpu < 0)
        ):
            raise ArgumentError(f"serve: cpu_reserve_per_gpu must be a number >= 0, got {cpu_reserve_per_gpu!r}")
        if max_cpu_helpers is not None and (
            isinstance(max_cpu_helpers, bool) or not isinstance(max_cpu_helpers, int) or max_cpu_helpers < 0
        ):
            raise ArgumentError(f"serve: max_cpu_helpers must be None or an int >= 0, got {max_cpu_helpers!r}")
        return cls(
            cpu_helpers,
            float(cpus_per_helper),
            max(1, round(cpus_per_helper)),
            float(cpu_reserve_per_gpu),
            max_cpu_helpers,
            float(autoscale_interval_s),
        )


def cluster_nodes() -> list[NodeInfo]:
    """Every live node: free CPUs now and GPUs in all."""
    free = ray._private.state.available_resources_per_node()
    return [
        NodeInfo(n["NodeID"], float(free.get(n["NodeID"], {}).get("CPU", 0.0)), float(n["Resources"].get("GPU", 0.0)))
        for n in ray.nodes()
        if n["Alive"]
    ]


def start_helper(
    plan: HelperPlan, launch: Any, config: ServiceConfig, index: int, placed: dict[str, int]
) -> tuple[Any, str] | None:
    """Start helper ``index`` on the node :func:`~cluster.helper_policy.choose_node` picks (counting
    ``placed``, helpers started but perhaps not yet visible in the free CPUs): its handle and
    node, or None when no node has room."""
    node = choose_node(cluster_nodes(), placed, plan.cpus, plan.reserve_per_gpu)
    if node is None:
        return None
    nice = launch.niceness_here()
    handle = (
        ray.remote(CpuHelper)
        .options(
            name=helper_name(config.name, index),
            namespace=NAMESPACE,
            num_cpus=plan.cpus,
            num_gpus=0,
            max_concurrency=plan.threads,
            max_restarts=-1,
            max_task_retries=0,
            runtime_env=niceness.runtime_env(nice),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        )
        .remote(config, index, nice)
    )
    return handle, node


def find_helper(name: str) -> Any | None:
    """The helper actor called ``name``, or None when it is gone."""
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


def helper_index(name: str) -> int:
    """The index in a helper's name (``svc.helper.3`` -> 3)."""
    return int(name.rsplit(".", 1)[1])
