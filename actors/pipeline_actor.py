"""The per-GPU pipeline actor: builds the user's pipeline and serves one rank's batches.

Batch ``k`` of epoch ``e`` (picking up at stream position ``s``) for rank ``r`` is a pure
function of (seed, e, s, r, k): the actor derives the sample indices from the service's
epoch plan and drives its pipeline's reader with them, running on into the next epoch so
there is no barrier between epochs. Its cursor is only a cache of what its executor
produces next: a request for any other batch, and any request after a failure, re-seeks;
and every batch is checked to be the one requested before it leaves. So a restarted
actor, a resumed rank or a rank retrying after an error gets exactly the batch it asked
for.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import ray

from raypipe.backend import to_host
from raypipe.batch_spec import BatchSpec
from raypipe.errors import RaypipeError
from raypipe.service_config import ServiceConfig
from raypipe.tensor_list import TensorList

from . import host_ring, niceness, ragged, request_channel
from .cpu_helper import build_service_pipeline, remote_worker
from .cuda_ipc import Exporter, device_uuid, use_ipc
from .meters import ProcessMeter, QueueMeter
from .metrics_export import EXPORT_INTERVAL_S, export_actor
from .protocol import BatchReply, BatchRequest, RaggedArray, Skip

# Methods in this group answer while a batch is being made (they only read counters).
CONTROL = "control"
CONCURRENCY_GROUPS = {CONTROL: 1}


class PipelineActor:
    """Wraps one rank's pipeline; ``get_batch(epoch, start, k)`` returns host arrays through the
    object store (or CUDA IPC handles when the rank trains on this actor's GPU)."""

    def __init__(self, config: ServiceConfig, rank: int, location: dict[str, Any], nice: int | None = None):
        if nice is not None:  # before the pipeline starts its threads
            niceness.apply(nice, f"the pipeline actor of rank {rank}")
        # The rank's GPU, before anything in this process touches CUDA: the actor shares it
        # instead of holding a GPU of its own through Ray.
        os.environ["CUDA_VISIBLE_DEVICES"] = location["gpu"] or ""
        self.config = config
        self.rank = rank
        self.location = location
        device_id = 0 if location["gpu"] is not None else None
        self.pipe = build_service_pipeline(config, device_id, "pipeline actor")
        self.engine = self.pipe.engine  # what the actor drives, shares with CPU helpers and allocates for
        self.pipe.enable_profiling()  # one clock read per operator call: cheap next to the operators
        self._process = ProcessMeter()
        self._queues = QueueMeter()
        self._copied_bytes = 0  # host batches copied into replies (not shared with the rank)
        self._exported = float("-inf")
        self._gpu_uuid = device_uuid(0) if device_id is not None else None
        self._host = host_ring.Exporter() if host_ring.supported() else None
        self._host_spare = 0  # batches the rank may hold, beyond the pipeline's own queues
        # Batch requests come through Ray or, from a rank on this machine, a socket
        # (:mod:`actors.request_channel`); one at a time, as do the calls that move the pipeline.
        self._serving = threading.Lock()
        self._requests = request_channel.RequestServer(self.get_batch) if self._host is not None else None
        self._size_host_pool(3)  # the loader's default prefetch of 2, plus one
        self._exporter: Exporter | None = None
        self._ipc_fallbacks = 0
        self._cursor: tuple[int, int, int] | None = None  # (epoch, start, k) produced next
        self._served = 0
        self._seeks = 0
        self._skipped = 0
        self._busy_s = 0.0
        # The service's CPU helpers as the coordinator last told them, and those the pipeline
        # shares its CPU stage with now (None: none since the last pause), by name.
        self._helpers_lock = threading.Lock()
        self._helpers: dict[str, Any] = {}
        self._helpers_used: dict[str, Any] | None = {}

    @ray.method(concurrency_group=CONTROL)
    def set_helpers(self, helpers: dict[str, Any]) -> None:
        """The service's CPU helper actors now, by name (the coordinator sends them when they
        change, and again every few seconds): the pipeline shares its CPU stage with them from the
        next batch request on. Never waits for a batch being made."""
        with self._helpers_lock:
            self._helpers = dict(helpers)

    def _use_helpers(self) -> None:
        """Share the CPU stage with the helpers last told, when they are not the ones in use. A
        helper started again under its old name (by a restarted coordinator) is another actor: the
        old one is let go first."""
        with self._helpers_lock:
            helpers = dict(self._helpers)
        used = self._helpers_used or {}
        if helpers == self._helpers_used:
            return
        split = self.engine.cpu_split()
        kept = {name: actor for name, actor in helpers.items() if used.get(name) == actor}
        if kept.keys() != used.keys():
            self.engine.set_cpu_helpers({name: remote_worker(actor, split) for name, actor in kept.items()})
        self.engine.set_cpu_helpers({name: remote_worker(actor, split) for name, actor in helpers.items()})
        self._helpers_used = helpers

    @ray.method(concurrency_group=CONTROL)
    def where(self) -> dict[str, Any]:
        """The rank this actor serves, its node, the GPU it shares with the rank (and how the
        rank's GPU was found), its process and the process's scheduling priority."""
        return {
            "rank": self.rank,
            "node_id": ray.get_runtime_context().get_node_id(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpu_found_by": self.location["how"],
            "pid": os.getpid(),
            "niceness": niceness.current(),
            "host_channel": self._host_channel(),
            "requests": self._requests_offer(),
        }

    def _requests_offer(self) -> dict[str, str] | None:
        """Where (and with which token) a rank that can map this actor's shared memory sends its
        batch requests."""
        return self._requests.offer() if self._requests is not None else None

    def _host_channel(self) -> dict[str, Any] | None:
        """Where a rank checks that it can map this actor's shared-memory batches (None: it cannot)."""
        return dataclasses.asdict(self._host.channel()) if self._host is not None else None

    def get_batch(self, request: BatchRequest) -> BatchReply:
        """The batch ``request`` asks for: outputs as host arrays (or CUDA IPC handles into a ring
        of ``rank_slots`` buffers per output when the rank runs on this actor's GPU; or
        shared-memory :class:`host_ring.HostArray` descriptors when the request names this actor's
        host exporter), padding flags and sample indices. Skipped samples are replaced by the
        pipeline (:meth:`raypipe.pipeline.Pipeline.drive`) and listed in the reply. Called by Ray,
        or from a rank's socket (:mod:`actors.request_channel`)."""
        with self._serving:
            return self._get_batch(request)

    def _get_batch(self, request: BatchRequest) -> BatchReply:
        began = time.perf_counter()
        epoch, start, k = request.epoch, request.start, request.index
        ring = self._host is not None and request.host_exporter == self._host.exporter_id
        if ring:
            self._host.release(request.released)
        self._size_host_pool(request.rank_slots)
        self._use_helpers()
        self._queues.sample(self.pipe.queue_stats())
        outputs, info = self._produce(epoch, start, k)
        self._served += 1
        self._skipped += len(info.skipped)
        slots = request.rank_slots * len(outputs)
        shipped = [self._ship(o, request.gpu_uuid, (epoch, k), slots, ring) for o in outputs]
        self._copied_bytes += sum(a.nbytes for a in shipped if isinstance(a, (np.ndarray, RaggedArray)))
        self._busy_s += time.perf_counter() - began
        if time.monotonic() - self._exported > EXPORT_INTERVAL_S:
            self._exported = time.monotonic()
            export_actor(self.config.name, self.rank, self.stats())
        return BatchReply(
            outputs=shipped,
            is_pad=np.asarray(info.is_pad, dtype=bool),
            sample_indices=np.asarray(info.sample_indices, dtype=np.int64),
            epoch=epoch,
            start=start,
            index=k,
            skipped=tuple(Skip(info.epoch, s.sample_index, s.source, s.reason) for s in info.skipped),
            host_channel=None if ring else self._host_channel(),
            requests=None if ring else self._requests_offer(),
        )

    def _size_host_pool(self, rank_slots: int) -> None:
        """Batch arrays in shared memory, with a spare for each batch the rank may hold: the
        ``rank_slots`` (prefetch + 1) it has asked for, and one it has dropped but not yet released."""
        if self._host is not None and rank_slots + 1 != self._host_spare:
            self._host_spare = rank_slots + 1
            self.engine.set_host_allocator(self._host.allocate, spare=self._host_spare)

    def _produce(self, epoch: int, start: int, k: int) -> tuple[tuple[TensorList, ...], Any]:
        """Run the pipeline to the requested batch, re-seeking when the executor is elsewhere."""
        for _ in range(2):
            if self._cursor != (epoch, start, k):
                self._seek(epoch, start, k)
            try:
                outputs = self.pipe.run()
            except BaseException:
                self._cursor = None  # the executor has moved past the failed batch: re-seek on the next request
                raise
            info = self.pipe.last_batch_info
            if (info.epoch, info.index) == (epoch, k):
                self._cursor = (epoch + 1, 0, 0) if info.last_in_epoch else (epoch, start, k + 1)
                return outputs, info
            self._cursor = None
        raise RaypipeError(
            f"pipeline actor: asked for batch {k} of epoch {epoch} for rank {self.rank}, its pipeline produced batch "
            f"{info.index} of epoch {info.epoch} twice"
        )

    def _seek(self, epoch: int, start: int, k: int) -> None:
        self._seeks += 1
        self.engine.drive(self._specs(epoch, start, k), sequential=self.config.shuffle != "global")
        self._cursor = (epoch, start, k)

    def release(self, token: tuple[int, int]) -> None:
        """The rank has copied the IPC-shipped outputs of batch ``token``: their buffers are free."""
        with self._serving:
            if self._exporter is not None:
                self._exporter.release(token)

    def release_all(self) -> None:
        """The rank starts a new iteration and abandons its in-flight batches: every IPC buffer
        is free. (Ordered after the rank's earlier requests, so no buffer it copies is reused.)"""
        with self._serving:
            if self._exporter is not None:
                self._exporter.reset()

    def _ship(
        self, output: TensorList, gpu_uuid: bytes | None, token: tuple[int, int], ipc_slots: int, ring: bool
    ) -> Any:
        if len(output) and not output.is_dense_tensor():
            return self._ship_ragged(output, ring)
        tensor = output.dense_array()
        if output.device == "gpu" and use_ipc(tensor, self._gpu_uuid, gpu_uuid):
            shipped = self._ring(ipc_slots).export(tensor, token)
            if shipped is not None:
                return shipped
            self._ipc_fallbacks += 1  # every buffer is held by the rank: through host memory
        tensor = to_host(tensor)
        if ring:
            shipped = self._host.export(tensor)
            if shipped is not None:
                return shipped
        return tensor

    def _ship_ragged(self, output: TensorList, ring: bool) -> RaggedArray:
        """An output whose samples differ in shape, packed into one flat host array (in shared
        memory when the rank maps it) plus the samples' shapes."""
        allocate = self._host.allocate if ring else None
        flat, shapes = ragged.pack([to_host(output.at(i)) for i in range(len(output))], allocate)
        shipped = self._host.export(flat) if ring else None
        return RaggedArray(flat if shipped is None else shipped, shapes)

    def _ring(self, slots: int) -> Exporter:
        if self._exporter is None or self._exporter.size != slots:
            if self._exporter is not None:
                self._exporter.close()
            self._exporter = Exporter(slots)
        return self._exporter

    def pause(self) -> None:
        """Stop preparing batches ahead (frees the CPUs and the CPU helpers' threads); the next
        request restarts the pipeline with the helpers this actor knows."""
        with self._serving:
            self.pipe.close()
            self._cursor = None
            self._helpers_used = None

    def state_dict(self) -> dict[str, Any] | None:
        """The position of the batch this actor's pipeline produces next for its rank (the
        position contract of :mod:`raypipe.position`), or None before any request."""
        if self._cursor is None:
            return None
        epoch, start, k = self._cursor
        return self.config.state(epoch, start, k, rank=self.rank)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Start preparing the rank's batches at ``state`` now, ahead of its first request."""
        epoch, start = self.config.resume(state, owner="pipeline actor", strict=strict)
        with self._serving:
            self._seek(epoch, start, 0)

    @ray.method(concurrency_group=CONTROL)
    def stats(self) -> dict[str, Any]:
        """Batches served, time spent producing them, how often a request forced a re-seek
        (not counting the run-on from one epoch into the next), samples skipped; the pipeline's
        time per stage and operator (``stages``, :mod:`raypipe.profile`), its queues' fill
        (``queues``), this process's CPU and memory (``process``), the bytes shipped through the
        object store and where each part of the pipeline runs (``device``, see ``Pipeline.device_report``)."""
        return {
            "batches": self._served,
            "threads": self.pipe.num_threads,
            "reader": self.pipe.reader_label(),
            "batch_size": self.config.batch_size,
            "stages": self.pipe.profile(),
            "queues": self._queues.report(),
            "process": self._process.report(),
            "copied_bytes": self._copied_bytes,
            "ipc_fallbacks": self._ipc_fallbacks,
            "host_ring": self._host.stats() if self._host is not None else None,
            "socket_requests": self._requests.served if self._requests is not None else 0,
            "memory": self.pipe.memory_stats(),
            "device": self.pipe.device_report(),
            "seeks": self._seeks,
            "skipped": self._skipped,
            "busy_s": round(self._busy_s, 3),
            "reads": self.pipe.read_stats(),
            "offload": self.engine.offload_stats(),
            **self.where(),
        }

    def _specs(self, epoch: int, start: int, k: int) -> Iterator[BatchSpec]:
        for e in itertools.count(epoch):
            p = self.config.plan(e, start if e == epoch else 0)
            for j in range(k if e == epoch else 0, p.num_batches):
                yield p.batch(self.rank, j)
