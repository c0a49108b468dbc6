"""The coordinator: one named Ray actor per service holding where every rank attached,
skipped samples, every rank's acknowledged progress and the service's CPU helpers.

It is restarted by Ray whenever it dies (``max_restarts=-1``) and reads back its
record (:mod:`cluster.coordinator_record`); ranks never need it while iterating (they
talk to their own pipeline actor and tell the coordinator about progress without
waiting), and nothing it does waits on a pipeline actor: it tells them the CPU helpers
without waiting for an answer (:mod:`cluster.helper_broadcast`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import warnings
from typing import Any

import ray

from actors.metrics_export import EXPORT_INTERVAL_S, export_rank
from actors.protocol import Ack
from raypipe import log
from raypipe.service_config import ServiceConfig

from . import coordinator_record, service_record
from .actor_launch import ActorLaunch
from .autoscaler import Autoscaler
from .coordinator_events import (
    Acked,
    Attached,
    Decided,
    Event,
    HelperAdded,
    HelperRemoved,
    Resized,
    Restarted,
    Skipped,
)
from .coordinator_state import CoordinatorState
from .helper_broadcast import HelperBroadcast
from .helper_policy import choose_node
from .helpers import HelperPlan, cluster_nodes, helper_index, start_helper
from .naming import NAMESPACE, helper_name, pipeline_actor_name
from .rank_meter import RankMeter

LOG = log.get(__name__)


def _busy_seconds(handles: dict[str, Any]) -> dict[str, float]:
    """Each helper's busy seconds so far (a helper that does not answer in time counts as idle)."""
    refs = {name: h.stats.remote() for name, h in handles.items()}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=2.0)
    out = {}
    for name, ref in refs.items():
        if ref in ready:
            try:
                out[name] = float(ray.get(ref)["busy_s"])
            except ray.exceptions.RayError:
                continue
    return out


@dataclasses.dataclass(frozen=True)
class Resize:
    """The coordinator's answer to :meth:`Coordinator.resize`: the configuration now served, or
    None and the ranks of the current group whose pipeline actors are still alive."""

    config: ServiceConfig | None
    alive: list[int]


def _alive(actor_name: str) -> bool:
    """Whether the named actor exists and is not dead (an actor goes with the rank that owns it)."""
    try:
        ray.get_actor(actor_name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def restarted_by_ray() -> bool:
    """Whether Ray restarted the calling actor (its process died and Ray brought it back).
    Ray's ``was_current_actor_reconstructed`` reads the deprecated ``RuntimeContext.actor_id``,
    whose warning would otherwise reach every service's driver; it is silenced here alone."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Use get_actor_id", category=DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


class Coordinator:
    """Records where each rank attached and which batches it acknowledged, and runs the service's
    CPU helpers: a fixed number, or as many as the ranks' stall asks for. Ranks start their
    pipeline actors from the service's record (:mod:`cluster.service_record`), not from here; the
    actors belong to the ranks, so a rank's actor goes with it."""

    def __init__(self, config: ServiceConfig, launch: ActorLaunch, helpers: HelperPlan | None = None):
        self._config = config
        self._launch = launch
        self._plan = helpers or HelperPlan()
        self._lock = threading.RLock()
        self._handles: dict[str, Any] = {}  # the running helpers' actors (they go with this process)
        self._meters: dict[int, RankMeter] = {}  # measurements, not state: not recorded
        self._exported: dict[int, float] = {}
        self._autoscaler = Autoscaler(self._plan.interval_s, self._plan.threads, self._plan.max_helpers)
        self._broadcast = HelperBroadcast(config.name)
        saved = coordinator_record.load(config.name) if restarted_by_ray() else None
        self._state = CoordinatorState.from_record(saved) if saved else CoordinatorState()
        if self._state.world_size is not None:  # a group of another size took over before the restart
            self._config = dataclasses.replace(config, world_size=self._state.world_size)
        if saved:
            self._apply(Restarted())
            LOG.warning("service %r: coordinator restarted, state read back from its record", config.name)
        else:
            coordinator_record.save(config.name, self._state.to_record())
        self._broadcast.set_ranks(self._state.attached)
        self._start_helpers()
        if self._plan.auto:
            threading.Thread(target=self._autoscale, name="raypipe-autoscale", daemon=True).start()

    def _apply(self, event: Event) -> None:
        """The one way the state changes: apply ``event`` and rewrite the record when it changed it."""
        with self._lock:
            if self._state.apply(event):
                coordinator_record.save(self._config.name, self._state.to_record())

    def _start_helpers(self) -> None:
        """Helpers of a previous life of this coordinator (they went with it) again, then up to a
        fixed count."""
        placed: dict[str, int] = {}  # started now, perhaps not yet counted in the nodes' free CPUs
        for name in sorted(self._state.helpers, key=helper_index):
            self._apply(HelperRemoved(name, "it went with the previous coordinator", time.time()))
            self._add_helper("restarted with the coordinator", placed, helper_index(name))
        if not self._plan.auto:
            while len(self._state.helpers) < self._plan.count:
                if not self._add_helper(f"cpu_helpers={self._plan.count}", placed):
                    break

    def _add_helper(self, reason: str, placed: dict[str, int], index: int | None = None) -> bool:
        with self._lock:
            if index is None:
                index = max((helper_index(n) + 1 for n in self._state.helpers), default=0)
            started = start_helper(self._plan, self._launch, self._config, index, placed)
            if started is None:
                why = f"no node has {self._plan.cpus:g} free CPUs for a helper"
                self._apply(Decided("keep", why, time.time()))
                return False
            handle, node = started
            placed[node] = placed.get(node, 0) + 1
            name = helper_name(self._config.name, index)
            self._handles[name] = handle
            self._apply(HelperAdded(name, node, reason, time.time()))
            self._broadcast.set_helpers(self._handles)
            LOG.info("service %r: CPU helper %s started on node %s (%s)", self._config.name, name, node[:8], reason)
            return True

    def _remove_helper(self, reason: str) -> None:
        with self._lock:
            name = max(self._state.helpers, key=helper_index)
            handle = self._handles.pop(name, None)
            self._broadcast.set_helpers(self._handles)
            if handle is not None:
                ray.kill(handle, no_restart=True)
            self._apply(HelperRemoved(name, reason, time.time()))
            LOG.info("service %r: CPU helper %s stopped (%s)", self._config.name, name, reason)

    def _autoscale(self) -> None:
        """Every ``interval_s``: each rank's stall and the helpers' busy time since the last
        round, then one decision (:class:`cluster.autoscaler.Autoscaler`)."""
        while True:
            time.sleep(self._plan.interval_s)
            with self._lock:
                stalls = self._autoscaler.stalls_since_last_round(self._meters)
                handles = dict(self._handles)
            decision = self._autoscaler.decide_round(stalls, _busy_seconds(handles), len(handles), self._can_add)
            if decision is None:
                continue
            if decision.action == "add":
                if self._add_helper(decision.reason, {}):
                    self._autoscaler.changed("add")
            elif decision.action == "remove":
                self._remove_helper(decision.reason)
                self._autoscaler.changed("remove")
            else:
                self._apply(Decided("keep", decision.reason, time.time()))

    def _can_add(self) -> bool:
        """Whether some node has room for one more helper now."""
        return choose_node(cluster_nodes(), {}, self._plan.cpus, self._plan.reserve_per_gpu) is not None

    def helpers(self) -> list[str]:
        """The names of the CPU helpers running now (for ``svc.stats()`` and ``svc.shutdown()``)."""
        with self._lock:
            return sorted(self._state.helpers, key=helper_index)

    def config(self) -> ServiceConfig:
        return self._config

    def resize(self, world_size: int) -> Resize:
        """Serve ``world_size`` ranks from now on: a training group of another size took over (Ray
        Train restarted its workers in another number, or a run resumes from a checkpoint in more or
        fewer processes). Positions are global, so the new group picks up where the checkpoint it
        loads left off. Refused while a pipeline actor of the current group is alive (its rank's
        process still runs): the answer names those ranks and the loader asks again."""
        with self._lock:
            if world_size != self._config.world_size:
                alive = [r for r in range(self._config.world_size) if _alive(pipeline_actor_name(self._config.name, r))]
                if alive:
                    return Resize(None, alive)
                self._config = dataclasses.replace(self._config, world_size=world_size)
                service_record.save(self._config.name, self._config, self._launch)
                self._apply(Resized(world_size))
                gone = [r for r in self._meters if r >= world_size]
                for rank in gone:
                    del self._meters[rank]
                    self._exported.pop(rank, None)
                self._autoscaler.forget(gone)
                self._broadcast.set_ranks(self._state.attached)
                LOG.info("service %r: now serves %d ranks", self._config.name, world_size)
            return Resize(self._config, [])

    def attach(self, rank: int, location: dict[str, Any]) -> None:
        """Rank ``rank`` trains at ``location`` (node, GPU), where it has started its pipeline
        actor: record it, and tell that actor the CPU helpers."""
        self._apply(Attached(rank, location))
        self._broadcast.attached(rank)

    def ack(self, ack: Ack) -> None:
        """A rank's progress, the samples its batches replaced and its timings (see :class:`Ack`)."""
        rank = ack.rank
        for skip in ack.skipped:
            self._apply(Skipped(skip.epoch, skip.sample_index, skip.source))
        self._apply(Acked(rank, ack.epoch, ack.next_batch))
        if not ack.timings:
            return
        with self._lock:
            meter = self._meters.setdefault(rank, RankMeter())
            meter.acks += 1
            for t in ack.timings:
                meter.add(t.waited_s, t.trained_s, t.in_flight, t.prefetch, now=t.at)
            export = time.monotonic() - self._exported.get(rank, float("-inf")) > EXPORT_INTERVAL_S
            if export:
                self._exported[rank] = time.monotonic()
                report = meter.report()
        if export:
            export_rank(self._config.name, rank, report)

    def synthetic(self, rank: int, batches: int, trained_s: float) -> None:
        """Rank ``rank`` trained ``batches`` steps on a synthetic loader in ``trained_s`` seconds
        (see :mod:`cluster.synthetic`): the speed its training reaches without input costs."""
        with self._lock:
            self._meters.setdefault(rank, RankMeter()).add_synthetic(batches, trained_s)

    def snapshot(self) -> dict[str, Any]:
        """What ``svc.snapshot()`` returns: the configuration served, each rank's acknowledged
        progress and where it attached. Small by design."""
        return {
            "config": self._config,
            "progress": {r: list(p) for r, p in self._state.progress.items()},
            "attached": dict(self._state.attached),
        }

    def stats(self) -> dict[str, Any]:
        """Progress per rank, each rank's input timings (``ranks``, :mod:`cluster.rank_meter`),
        skipped samples, the CPU helpers, and the coordinator's own restarts and pid."""
        with self._lock:
            ranks = {r: m.report() for r, m in sorted(self._meters.items())}
        return {
            "progress": {r: list(p) for r, p in self._state.progress.items()},
            "ranks": ranks,
            "attached": dict(self._state.attached),
            "skipped": self._state.skipped_report(),
            "coordinator": {"pid": os.getpid(), "restarts": self._state.restarts},
            "helpers": {
                "mode": "auto" if self._plan.auto else self._plan.count,
                "running": dict(self._state.helpers),
                "stall": {r: round(v, 4) for r, v in self._autoscaler.stall.items()},
                "decisions": list(self._state.decisions),
            },
        }
