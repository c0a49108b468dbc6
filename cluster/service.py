"""``rp.serve``: validate, record what the service serves (:mod:`cluster.service_record`), start
its coordinator, and hand back a handle with ``stats()`` and ``shutdown()``.

The service reserves no GPU: each rank's pipeline actor is started by the rank's loader on
the rank's node and GPU (:mod:`cluster.placement`), so a cluster with G GPUs hosts G ranks
and their G pipeline actors. Its CPU reservation is ``num_cpus_per_actor`` per actor.
"""

from __future__ import annotations

import inspect
import os
import re
import time
from collections.abc import Callable
from typing import Any

import ray

from actors import served_pipeline, service_kv, shared_listings
from raypipe import log
from raypipe.errors import ArgumentError, RaypipeError, did_you_mean
from raypipe.pipeline import PIPELINE_ARGS
from raypipe.service_config import ServiceConfig
from raypipe.source_dataset import served_dataset
from raypipe.storage import listings

from . import object_store, service_record
from .actor_launch import ActorLaunch
from .coordinator import Coordinator
from .diagnosis import diagnose
from .helper_policy import choose_node
from .helpers import HelperPlan, cluster_nodes, find_helper
from .naming import NAMESPACE, coordinator_name, no_such_service, pipeline_actor_name
from .ray_connection import init_ray

LOG = log.get(__name__)
# A pipeline actor that dies is restarted and the call in flight re-run: batches are a
# pure function of (seed, epoch, rank, index), so a re-run returns the same bytes.
ACTOR_MAX_RESTARTS = 3
ACTOR_MAX_TASK_RETRIES = 3
# Arguments of earlier versions that reserved GPUs for the service.
_REMOVED = {
    "num_gpus_per_actor": "pipeline actors share their rank's GPU and reserve none",
    "placement_strategy": "each pipeline actor runs on its rank's node",
}


class Service:
    """A running service: its coordinator, and through it every attached rank's pipeline actor."""

    def __init__(self, name: str, config: ServiceConfig, coordinator):
        self.name = name
        self._config = config
        self._coordinator = coordinator

    @property
    def config(self) -> ServiceConfig:
        """The configuration served now: its world size is the training group's, which changes when
        a group of another size takes over (``Coordinator.resize``)."""
        if self._coordinator is not None:
            try:
                self._config = ray.get(self._coordinator.config.remote(), timeout=10)
            except ray.exceptions.RayError:
                pass  # the coordinator is restarting or gone: the last configuration seen
        return self._config

    def _actors(self) -> dict[int, Any]:
        """The pipeline actors of the ranks attached so far, by rank."""
        found = {}
        for rank in range(self.config.world_size):
            try:
                found[rank] = ray.get_actor(pipeline_actor_name(self.name, rank), namespace=NAMESPACE)
            except ValueError:
                continue
        return found

    def _helpers(self) -> dict[str, Any]:
        """The CPU helpers running now, by name."""
        try:
            names = ray.get(self._coordinator.helpers.remote(), timeout=10)
        except ray.exceptions.RayError:
            return {}
        return {n: h for n in names if (h := find_helper(n)) is not None}

    def stats(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Per-rank acknowledged progress, where each rank attached, skipped samples
        (``{"count", "files"}``), per rank its pipeline actor: node, the GPU it shares
        (``cuda_visible_devices``), batches served and busy time; and the cluster's object stores
        (``object_store``: bytes used and in all, spilled and restored since the cluster started,
        or ``{"available": False, "why"}``). A rank without an actor yet,
        or whose actor does not answer within ``timeout_s`` (restarting, say), is listed as
        unavailable."""
        coordinator = self._serving().stats.remote()
        found = self._actors()
        refs = {rank: actor.stats.remote() for rank, actor in found.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        actors = []
        for rank in range(self.config.world_size):
            ref = refs.get(rank)
            if ref is None:
                actors.append(_unavailable(rank, "no pipeline actor: the rank has not attached, or its loader is gone"))
                continue
            try:
                actors.append({"available": True, **ray.get(ref)} if ref in ready else _unavailable(rank, "no answer"))
            except ray.exceptions.RayError as exc:
                actors.append(_unavailable(rank, type(exc).__name__))
        out = {**ray.get(coordinator, timeout=timeout_s), "actors": actors}
        helpers = self._helpers()
        refs = {name: h.stats.remote() for name, h in helpers.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        details = []
        for name, ref in refs.items():
            try:
                details.append({"name": name, "available": True, **ray.get(ref)} if ref in ready else {"name": name})
            except ray.exceptions.RayError as exc:
                details.append({"name": name, "available": False, "why": type(exc).__name__})
        out["helpers"]["details"] = details
        out["object_store"] = _store_usage()
        return out

    def report(self) -> dict[str, Any]:
        """Is training waiting for input, which stage limits it and what to try: the bottleneck
        doctor (:func:`cluster.diagnosis.diagnose`) over :meth:`stats`. Run ``rp.synthetic_loader``
        on a rank first to add the real-against-synthetic training speed."""
        return diagnose(self.stats())

    def pause(self) -> None:
        """Stop every pipeline actor's read-ahead until a rank asks for its next batch, to free
        the CPUs (during evaluation, say); no batch is lost, the next one is recomputed."""
        self._serving()
        ray.get([a.pause.remote() for a in self._actors().values()])

    def snapshot(self) -> dict[str, Any]:
        """The coordinator's small state: configuration, progress, where ranks attached."""
        return ray.get(self._serving().snapshot.remote())

    def shutdown(self) -> None:
        """Stop the coordinator and every rank's pipeline actor and forget the service's records.
        Safe to call twice; a loader still open afterwards fails with a clear error. A handle on a
        service that ``serve(..., replace=True)`` has since replaced leaves the new service of its
        name running (it finds the actors and records by name) and warns that it did."""
        if self._coordinator is None:
            return
        if self._replaced():
            LOG.warning("%s; this handle's shutdown leaves the new one running", _replaced_message(self.name))
        else:
            _release(self.name, [*self._actors().values(), *self._helpers().values(), self._coordinator])
        self._coordinator = None

    def _serving(self) -> Any:
        """This service's coordinator; a clear error when the service was shut down or replaced
        (its actors found by name would be another service's)."""
        if self._coordinator is None:
            raise RaypipeError(f"service {self.name!r} was shut down")
        if self._replaced():
            raise RaypipeError(
                f"{_replaced_message(self.name)}; cluster.service.connect({self.name!r}) gives a handle on the new one"
            )
        return self._coordinator

    def _replaced(self) -> bool:
        """Whether the coordinator registered under this service's name is another actor than this
        handle's: another ``serve`` took the name over."""
        try:
            current = ray.get_actor(coordinator_name(self.name), namespace=NAMESPACE)
        except ValueError:
            return False
        return current._actor_id != self._coordinator._actor_id


def _replaced_message(name: str) -> str:
    return f"service {name!r} was replaced by another of that name (serve(..., replace=True))"


def connect(name: str) -> Service:
    """A handle on the running service ``name``, started by another process on this Ray cluster
    (``RAY_ADDRESS``, or the local one): for ``stats()``, ``report()`` and ``shutdown()``."""
    init_ray(os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False, logging_level="ERROR")
    try:
        coordinator = ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
    except ValueError:
        raise RaypipeError(no_such_service(name)) from None
    record = service_record.load(name)
    if record is None:
        raise RaypipeError(f"service {name!r} has a coordinator but no record: it is shutting down")
    return Service(name, record[0], coordinator)


def _store_usage() -> dict[str, Any]:
    """:func:`object_store.usage` for ``stats()``; Ray's memory-info call is internal, so a Ray whose
    call has changed gives the reason instead of failing the whole report."""
    try:
        return {"available": True, **object_store.usage().as_dict()}
    except Exception as exc:  # ray._private API: any failure leaves the rest of stats() intact
        return {"available": False, "why": f"{type(exc).__name__}: {exc}"}


def _unavailable(rank: int, why: str) -> dict[str, Any]:
    return {"rank": rank, "available": False, "why": why}


_RELEASE_WAIT_S = 30  # how long a shutdown waits for the killed actors to free their names


def _release(name: str, actors: list) -> None:
    """Kill ``actors`` (None entries skipped), forget the service's entries in the GCS (its record,
    its coordinator's, its pipeline and listings), and wait until none of its actors holds its name:
    ``ray.kill`` returns before that, and a ``serve`` of the name right after must find it free."""
    for actor in actors:
        if actor is not None:
            ray.kill(actor, no_restart=True)
    service_kv.forget(name)
    own = re.compile(rf"{re.escape(name)}\.(coordinator|pipeline\.\d+|helper\.\d+)")
    deadline = time.monotonic() + _RELEASE_WAIT_S
    while True:
        named = ray.util.list_named_actors(all_namespaces=True)
        left = sorted(a["name"] for a in named if a["namespace"] == NAMESPACE and own.fullmatch(a["name"]))
        if not left:
            return
        if time.monotonic() > deadline:
            raise RaypipeError(f"service {name!r}: actors {left} did not stop within {_RELEASE_WAIT_S} s")
        time.sleep(0.05)


def _check_pipeline_kwargs(pipeline: Callable, pipeline_kwargs: dict[str, Any]) -> None:
    """Raise naming a keyword argument that neither ``serve`` nor the pipeline takes, with the
    names closest to it among both (``cpu_helper`` is most likely serve's ``cpu_helpers``)."""
    params = inspect.signature(pipeline).parameters  # the pipeline function's (functools.wraps)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    for key in pipeline_kwargs:
        if key not in params and key not in PIPELINE_ARGS:
            names = [*inspect.signature(serve).parameters, *params, *PIPELINE_ARGS]
            raise ArgumentError(
                f"serve: unexpected keyword argument {key!r}{did_you_mean(key, names)} (serve passes the keyword "
                f"arguments it does not take to the pipeline function {pipeline.__name__}{inspect.signature(pipeline)})"
            )


def serve(
    pipeline: Callable,
    name: str,
    world_size: int,
    seed: int = 0,
    shuffle: str = "global",
    last_batch: str = "pad",
    *,
    num_cpus_per_actor: float = 0.0,
    cpu_helpers: int | str = 0,
    cpus_per_helper: float = 1.0,
    cpu_reserve_per_gpu: float = 1.0,
    max_cpu_helpers: int | None = None,
    autoscale_interval_s: float = 5.0,
    block_size: int = 256,
    initial_fill: int = 1024,
    replace: bool = False,
    detached: bool = False,
    max_restarts: int = ACTOR_MAX_RESTARTS,
    startup_timeout_s: float = 120.0,
    niceness: int | None = None,
    **pipeline_kwargs: Any,
) -> Service:
    """Serve ``pipeline`` (a ``@pipeline_def`` factory) to ``world_size`` ranks under ``name``.

    Everything is validated before any actor starts: the arguments and the pipeline (built
    once locally, which opens its reader). ``shuffle`` and ``last_batch`` replace the
    reader's own shuffling and sharding. Remaining keyword arguments go to the pipeline.

    Each rank's pipeline actor starts when the rank opens its loader, on the rank's node
    and GPU; it reserves no GPU and ``num_cpus_per_actor`` CPUs (default 0: like DALI's
    threads inside a training process, it uses the CPUs next to its rank; reserve some to
    keep other Ray work off them). ``startup_timeout_s`` bounds a loader's wait for its actor
    and for the coordinator (a clear error names what is missing). ``serve`` does not wait for
    the coordinator to start: loaders start their actors meanwhile, from the service's record
    (:mod:`cluster.service_record`). ``detached`` keeps the coordinator alive after
    this driver exits. Pipeline actors and CPU helpers run at scheduling priority
    ``niceness`` (0 to 19) when given, else at that of the process that starts them: a rank's
    pipeline actor at its rank's, as DALI's threads run at their training process's (Ray
    would give it 15, and a training process at 0 on the same cores then takes almost all
    of its CPU time), and helpers at the coordinator's.

    ``cpu_helpers`` runs the CPU stage of every rank's pipeline also on CPU helper actors
    anywhere in the cluster (CPU-only nodes first; on GPU nodes leaving ``cpu_reserve_per_gpu``
    CPUs per GPU to the trainers), each reserving ``cpus_per_helper`` CPUs: a number, or
    ``"auto"`` to add helpers while ranks wait for data and remove them when they do not (at
    most ``max_cpu_helpers``, deciding every ``autoscale_interval_s``). Batches stay exactly
    those of the epoch plan; ``stats()["helpers"]`` shows the helpers and every decision.
    """
    removed = sorted(set(pipeline_kwargs) & set(_REMOVED))
    if removed:
        raise ArgumentError(f"serve: {removed[0]} is no longer an argument: {_REMOVED[removed[0]]}")
    if not callable(pipeline) or not hasattr(pipeline, "pipeline_defaults"):
        raise ArgumentError("serve: pipeline must be a function decorated with @rp.pipeline_def")
    if not isinstance(name, str) or not name or "/" in name:
        raise ArgumentError(f"serve: name must be a non-empty string without '/', got {name!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ArgumentError(f"serve: world_size must be a positive int, got {world_size!r}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
        raise ArgumentError(f"serve: max_restarts must be an int >= -1 (-1: unlimited), got {max_restarts!r}")
    cpus = num_cpus_per_actor
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 <= cpus < float("inf"):
        raise ArgumentError(f"serve: num_cpus_per_actor must be a number >= 0, got {num_cpus_per_actor!r}")
    if not startup_timeout_s > 0:
        raise ArgumentError(f"serve: startup_timeout_s must be > 0, got {startup_timeout_s!r}")
    valid_niceness = isinstance(niceness, int) and not isinstance(niceness, bool) and 0 <= niceness <= 19
    if niceness is not None and not valid_niceness:
        raise ArgumentError(f"serve: niceness must be None or an int from 0 to 19, got {niceness!r}")
    helper_plan = HelperPlan.parse(
        cpu_helpers, cpus_per_helper, cpu_reserve_per_gpu, max_cpu_helpers, autoscale_interval_s
    )
    for key in ("seed", "device_id"):
        if key in pipeline_kwargs:
            raise ArgumentError(f"serve: {key} is set by the service, not the pipeline")
    _check_pipeline_kwargs(pipeline, pipeline_kwargs)
    probe = pipeline(**pipeline_kwargs, device_id=None)  # readers only: no CUDA context in this process
    dataset_len, dataset_digest = served_dataset(probe)
    listed = listings.of_pipeline(probe)  # object-store folders, listed once for every actor
    config = ServiceConfig(
        name=name,
        world_size=world_size,
        batch_size=probe.batch_size,
        dataset_len=dataset_len,
        dataset_digest=dataset_digest,
        seed=seed,
        shuffle=shuffle,
        last_batch=last_batch,
        block_size=block_size,
        initial_fill=initial_fill,
    )
    probe.close()

    init_ray(os.environ.get("RAY_ADDRESS"), log_to_driver=False)
    _claim_name(name, replace)
    _check_helper_room(helper_plan)
    launch = ActorLaunch(
        num_cpus=float(num_cpus_per_actor),
        max_restarts=max_restarts,
        max_task_retries=ACTOR_MAX_TASK_RETRIES if max_restarts else 0,
        startup_timeout_s=float(startup_timeout_s),
        niceness=niceness,
    )
    service_record.save(name, config, launch)
    served_pipeline.publish(name, pipeline, pipeline_kwargs)
    shared_listings.publish(name, listed)
    coordinator = None
    try:
        coordinator = (
            ray.remote(Coordinator)
            .options(
                name=coordinator_name(name),
                namespace=NAMESPACE,
                num_cpus=0,
                max_restarts=-1,
                max_task_retries=-1,
                lifetime="detached" if detached else None,
            )
            .remote(config, launch, helper_plan)
        )
    except BaseException:
        _release(name, [coordinator])
        raise
    LOG.info(
        "service %r: %d samples, %d ranks, batch %d, shuffle=%s, last_batch=%s, cpu_helpers=%s",
        name, dataset_len, world_size, config.batch_size, shuffle, last_batch, cpu_helpers,
    )  # fmt: skip
    return Service(name, config, coordinator)


def _claim_name(name: str, replace: bool) -> None:
    try:
        existing = ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
    except ValueError:
        return
    if not replace:
        raise ArgumentError(f"serve: a service named {name!r} is already running; pass replace=True to replace it")
    old = Service(name, ray.get(existing.config.remote()), existing)
    _release(name, [*old._actors().values(), *old._helpers().values(), existing])


def _check_helper_room(plan: HelperPlan) -> None:
    """Fail before anything starts when the cluster cannot place a fixed number of helpers."""
    if plan.auto or plan.count == 0:
        return
    nodes = cluster_nodes()
    placed: dict[str, int] = {}
    for _ in range(plan.count):
        node = choose_node(nodes, placed, plan.cpus, plan.reserve_per_gpu)
        if node is None:
            free = ", ".join(f"{n.node_id[:12]}: {n.cpus_free:g} CPUs free, {n.gpus:g} GPUs" for n in nodes)
            raise ArgumentError(
                f"serve: cpu_helpers={plan.count} x {plan.cpus:g} CPUs do not fit (room for "
                f"{sum(placed.values())}) leaving {plan.reserve_per_gpu:g} CPUs per GPU to the trainers; "
                f"nodes: {free}. Use fewer helpers, a smaller cpu_reserve_per_gpu, or cpu_helpers='auto'"
            )
        placed[node] = placed.get(node, 0) + 1
