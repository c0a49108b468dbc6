"""``rp.serve``: validate, reserve GPUs across nodes, start one pipeline actor per GPU and the
coordinator, and hand back a handle with ``stats()`` and ``shutdown()``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors.pipeline_actor import CONCURRENCY_GROUPS, PipelineActor
from raypipe.errors import ArgumentError, PipelineDefinitionError, RaypipeError
from raypipe.service_config import ServiceConfig

from . import journal
from .coordinator import Coordinator
from .naming import NAMESPACE, coordinator_name, pipeline_actor_name

# A pipeline actor that dies is restarted and the call in flight re-run: batches are a
# pure function of (seed, epoch, rank, index), so a re-run returns the same bytes.
ACTOR_MAX_RESTARTS = 3
ACTOR_MAX_TASK_RETRIES = 3
_PLACEMENT_STRATEGIES = ("SPREAD", "PACK", "STRICT_SPREAD", "STRICT_PACK")


class Service:
    """A running service: its coordinator, pipeline actors and GPU reservation."""

    def __init__(self, name: str, config: ServiceConfig, coordinator, actors: list, pg):
        self.name = name
        self.config = config
        self._coordinator = coordinator
        self._actors = actors
        self._pg = pg

    def stats(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Per-rank acknowledged progress, skipped samples (``{"count", "files"}``) and, per
        pipeline actor, its rank, node, GPUs, batches served and busy time. An actor that
        does not answer within ``timeout_s`` (restarting, say) is listed as unavailable."""
        coordinator = self._coordinator.stats.remote()
        refs = [a.stats.remote() for a in self._actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        actors = []
        for slot, ref in enumerate(refs):
            try:
                actors.append({"slot": slot, **ray.get(ref)} if ref in ready else _unavailable(slot, "no answer"))
            except ray.exceptions.RayError as exc:
                actors.append(_unavailable(slot, type(exc).__name__))
        return {**ray.get(coordinator, timeout=timeout_s), "actors": actors}

    def pause(self) -> None:
        """Stop every pipeline actor's read-ahead until a rank asks for its next batch, to free
        the CPUs (during evaluation, say); no batch is lost, the next one is recomputed."""
        ray.get([a.pause.remote() for a in self._actors])

    def snapshot(self) -> dict[str, Any]:
        """The coordinator's small state: configuration, progress, assignment."""
        return ray.get(self._coordinator.snapshot.remote())

    def shutdown(self) -> None:
        """Stop every actor of the service, release its placement group and forget its journal.
        Safe to call twice."""
        _release(self.name, [*self._actors, self._coordinator], self._pg)
        self._actors, self._coordinator, self._pg = [], None, None


def _unavailable(slot: int, why: str) -> dict[str, Any]:
    return {"slot": slot, "rank": None, "available": False, "why": why}


def _release(name: str, actors: list, pg) -> None:
    """Kill ``actors`` (None entries skipped), remove ``pg`` and clear the service's journal."""
    for actor in actors:
        if actor is not None:
            ray.kill(actor, no_restart=True)
    if pg is not None:
        remove_placement_group(pg)
    journal.clear(name)


def serve(
    pipeline: Callable,
    name: str,
    world_size: int,
    seed: int = 0,
    shuffle: str = "global",
    last_batch: str = "pad",
    *,
    num_gpus_per_actor: float = 1.0,
    num_cpus_per_actor: float = 1.0,
    placement_strategy: str = "SPREAD",
    block_size: int = 256,
    initial_fill: int = 1024,
    replace: bool = False,
    detached: bool = False,
    max_restarts: int = ACTOR_MAX_RESTARTS,
    startup_timeout_s: float = 120.0,
    **pipeline_kwargs: Any,
) -> Service:
    """Serve ``pipeline`` (a ``@pipeline_def`` factory) to ``world_size`` ranks under ``name``.

    Everything is validated before any actor starts: the arguments, the pipeline (built
    once locally, which opens its reader) and the GPUs the cluster has. ``shuffle`` and
    ``last_batch`` replace the reader's own shuffling and sharding. Remaining keyword
    arguments go to the pipeline.
    """
    if not callable(pipeline) or not hasattr(pipeline, "pipeline_defaults"):
        raise ArgumentError("serve: pipeline must be a function decorated with @rp.pipeline_def")
    if not isinstance(name, str) or not name or "/" in name:
        raise ArgumentError(f"serve: name must be a non-empty string without '/', got {name!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ArgumentError(f"serve: world_size must be a positive int, got {world_size!r}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
        raise ArgumentError(f"serve: max_restarts must be an int >= -1 (-1: unlimited), got {max_restarts!r}")
    if num_gpus_per_actor < 0 or num_cpus_per_actor < 0:
        raise ArgumentError("serve: num_gpus_per_actor and num_cpus_per_actor must be >= 0")
    if placement_strategy not in _PLACEMENT_STRATEGIES:
        raise ArgumentError(f"serve: placement_strategy must be one of {_PLACEMENT_STRATEGIES}")
    for key in ("seed", "device_id"):
        if key in pipeline_kwargs:
            raise ArgumentError(f"serve: {key} is set by the service, not the pipeline")
    probe = pipeline(**pipeline_kwargs)
    try:
        (dataset_len,) = probe.epoch_size().values()
    except PipelineDefinitionError:
        raise ArgumentError("serve: the pipeline needs a reader (fn.readers.*) for the service to drive") from None
    config = ServiceConfig(
        name=name,
        world_size=world_size,
        batch_size=probe.batch_size,
        dataset_len=dataset_len,
        dataset_digest=probe.dataset_digest(),
        seed=seed,
        shuffle=shuffle,
        last_batch=last_batch,
        block_size=block_size,
        initial_fill=initial_fill,
    )
    probe.close()

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), log_to_driver=False)
    gpus = ray.cluster_resources().get("GPU", 0)
    needed = world_size * num_gpus_per_actor
    if needed > gpus:
        raise ArgumentError(
            f"serve: world_size={world_size} with {num_gpus_per_actor} GPU per pipeline actor needs "
            f"{needed:g} GPUs; the Ray cluster has {gpus:g}"
        )
    _claim_name(name, replace)

    bundle = {"CPU": num_cpus_per_actor} | ({"GPU": num_gpus_per_actor} if num_gpus_per_actor else {})
    lifetime = "detached" if detached else None
    pg = placement_group([dict(bundle) for _ in range(world_size)], strategy=placement_strategy, lifetime=lifetime)
    actors: list = []
    coordinator = None
    try:
        if not pg.wait(timeout_seconds=startup_timeout_s):
            raise RaypipeError(
                f"serve: could not reserve {world_size} x {bundle} with strategy {placement_strategy} within "
                f"{startup_timeout_s:g} s; the cluster has {ray.cluster_resources()}"
            )
        actor_cls = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(PipelineActor)
        for slot in range(world_size):
            actors.append(
                actor_cls.options(
                    name=pipeline_actor_name(name, slot),
                    namespace=NAMESPACE,
                    num_cpus=num_cpus_per_actor,
                    num_gpus=num_gpus_per_actor,
                    max_restarts=max_restarts,
                    max_task_retries=ACTOR_MAX_TASK_RETRIES if max_restarts else 0,
                    lifetime=lifetime,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=slot),
                ).remote(pipeline, pipeline_kwargs, config)
            )
        where = ray.get([a.where.remote() for a in actors], timeout=startup_timeout_s)
        coordinator = (
            ray.remote(Coordinator)
            .options(
                name=coordinator_name(name),
                namespace=NAMESPACE,
                num_cpus=0,
                max_restarts=-1,
                max_task_retries=-1,
                lifetime=lifetime,
            )
            .remote(config, actors, [w["node_id"] for w in where], pg)
        )
        ray.get(coordinator.config.remote(), timeout=startup_timeout_s)
    except BaseException:
        _release(name, [*actors, coordinator], pg)
        raise
    return Service(name, config, coordinator, actors, pg)


def _claim_name(name: str, replace: bool) -> None:
    try:
        existing = ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
    except ValueError:
        return
    if not replace:
        raise ArgumentError(f"serve: a service named {name!r} is already running; pass replace=True to replace it")
    actors, pg = ray.get(existing.resources.remote())
    _release(name, [*actors, existing], pg)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.1)
    raise RaypipeError(f"serve: the old service {name!r} did not stop within 30 s")
