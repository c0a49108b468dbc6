"""CPU helper actors: the CPU stage of a service's pipeline for samples that pipeline actors
hand them, on any node of the cluster, CPU-only nodes included.

A helper builds the service's pipeline without a device and, for each split a pipeline actor
names (:meth:`raypipe.engine.Engine.cpu_split`: where that actor's CPU stage ends), the same
CPU stage, and never an executor; it returns each unit's results as plain arrays through the
object store. Results are a pure function of (seed, epoch, sample), so it does not matter which
helper, or which restart of one, made them. :func:`remote_worker` adapts a helper to :mod:`raypipe.offload`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import ray

from raypipe.cpu_stage import CpuStage
from raypipe.errors import RaypipeError
from raypipe.offload import RemoteWorker, WorkerLost
from raypipe.service_config import ServiceConfig
from raypipe.source_dataset import served_dataset

from . import niceness, served_pipeline, shared_listings

# Failures of the helper itself, not of the data: the unit goes to another worker.
_LOST = (
    ray.exceptions.RayActorError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OwnerDiedError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
)


class CpuHelper:
    """Runs units of samples through the service pipeline's CPU stage."""

    def __init__(
        self,
        config: ServiceConfig,
        index: int,
        nice: int | None = None,
        pipeline: tuple[Callable, dict[str, Any]] | None = None,
    ):
        """``pipeline``: the function and keyword arguments to build; None, the ones the service
        published (:mod:`actors.served_pipeline`)."""
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a helper never touches a GPU
        if nice is not None:  # before the pipeline starts its threads
            niceness.apply(nice, f"CPU helper {index}")
        self.index = index
        self.pipe = build_service_pipeline(config, None, f"CPU helper {index}", pipeline)
        self._stages: dict[tuple, CpuStage] = {}
        self._lock = threading.Lock()
        self._units = self._samples = 0
        self._busy_s = 0.0

    def run(self, split: dict[str, bool], epoch: int, indices: Sequence[int]) -> list:
        """Samples ``indices`` of ``epoch`` through the CPU stage of a pipeline with ``split``."""
        began = time.perf_counter()
        result = self._stage(split).run_packed(epoch, indices)
        with self._lock:
            self._units += 1
            self._samples += len(indices)
            self._busy_s += time.perf_counter() - began
        return result

    def stats(self) -> dict[str, Any]:
        """Units and samples run, busy seconds, node, process and its scheduling priority."""
        return {
            "index": self.index,
            "units": self._units,
            "samples": self._samples,
            "busy_s": round(self._busy_s, 3),
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "niceness": niceness.current(),
        }

    def _stage(self, split: dict[str, bool]) -> CpuStage:
        key = tuple(sorted(split.items()))
        with self._lock:
            stage = self._stages.get(key)
            if stage is None:
                stage = self._stages[key] = self.pipe.engine.cpu_stage(split)
        return stage


def build_service_pipeline(
    config: ServiceConfig, device_id: int | None, who: str, pipeline: tuple[Callable, dict[str, Any]] | None = None
) -> Any:
    """The service's pipeline as an actor of it builds it (the service's batch size and seed), after
    checking that its reader (or per-sample external source) sees the service's dataset: every node
    must see the same data. Object-store folders the service listed are not listed again.
    ``pipeline``: the function and keyword arguments; None, those the service published. The
    libraries its host operators load on their first call are imported in the background from
    then on (:meth:`raypipe.engine.Engine.preload`), while the rank gets ready."""
    pipeline_fn, pipeline_kwargs = pipeline if pipeline is not None else served_pipeline.load(config.name)
    shared_listings.install(config.name)
    pipe = pipeline_fn(
        **{**pipeline_kwargs, "batch_size": config.batch_size, "seed": config.seed, "device_id": device_id}
    )
    pipe.build()
    length, digest = served_dataset(pipe)
    if (length, digest) != (config.dataset_len, config.dataset_digest):
        raise RaypipeError(
            f"{who} on node {ray.get_runtime_context().get_node_id()}: its reader sees {length} samples (digest "
            f"{digest}) but the service was started on {config.dataset_len} (digest {config.dataset_digest}): every "
            f"node must see the same dataset"
        )
    threading.Thread(target=_preload, args=(pipe.engine,), name="raypipe-preload", daemon=True).start()
    return pipe


def _preload(engine: Any) -> None:
    """:meth:`~raypipe.engine.Engine.preload`; a library that fails to load fails again, and is
    reported, where the first batch needs it."""
    try:
        engine.preload()
    except Exception:
        pass


def remote_worker(handle: Any, split: dict[str, bool]) -> RemoteWorker:
    """``handle``'s ``run`` as a :mod:`raypipe.offload` worker: a Future of the packed results;
    a helper that is gone or restarting raises WorkerLost, a sample's error is raised as is."""

    def call(epoch: int, indices: Sequence[int]) -> Future:
        out: Future = Future()
        try:
            ref = handle.run.remote(split, epoch, [int(i) for i in indices])
        except _LOST as exc:
            out.set_exception(WorkerLost(str(exc)))
            return out

        def settle(done: Future) -> None:
            try:
                out.set_result(done.result())
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause
                out.set_exception(cause if isinstance(cause, RaypipeError) else exc)
            except _LOST as exc:
                out.set_exception(WorkerLost(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"))
            except BaseException as exc:
                out.set_exception(exc)

        ref.future().add_done_callback(settle)
        return out

    return call
