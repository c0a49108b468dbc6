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

import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import ray

from raypipe.backend import array_module, gpu_available, is_device_array, to_host
from raypipe.batch_spec import BatchSpec
from raypipe.errors import RaypipeError
from raypipe.replacement import fill_skipped
from raypipe.service_config import ServiceConfig
from raypipe.tensor_list import TensorList

from .cuda_ipc import Exporter, device_uuid, use_ipc

# Methods in this group answer while a batch is being made (they only read counters).
CONTROL = "control"
CONCURRENCY_GROUPS = {CONTROL: 1}


class PipelineActor:
    """Wraps one pipeline; ``get_batch(rank, epoch, start, k)`` returns host arrays through the
    object store (or CUDA IPC handles for a rank on the same GPU)."""

    def __init__(self, pipeline_fn: Callable, pipeline_kwargs: dict[str, Any], config: ServiceConfig):
        self.config = config
        device_id = 0 if ray.get_gpu_ids() and gpu_available() else None
        self.pipe = pipeline_fn(
            **{**pipeline_kwargs, "batch_size": config.batch_size, "seed": config.seed, "device_id": device_id}
        )
        self.pipe.build()
        (length,) = self.pipe.epoch_size().values()
        digest = self.pipe.dataset_digest()
        if (length, digest) != (config.dataset_len, config.dataset_digest):
            raise RaypipeError(
                f"pipeline actor on node {ray.get_runtime_context().get_node_id()}: its reader sees {length} samples "
                f"(digest {digest}) but the service was started on {config.dataset_len} (digest "
                f"{config.dataset_digest}): every node must see the same dataset"
            )
        self._gpu_uuid = device_uuid(0) if device_id is not None else None
        self._exporter = Exporter()
        self.rank: int | None = None
        self._cursor: tuple[int, int, int, int] | None = None  # (rank, epoch, start, k) produced next
        self._served = 0
        self._seeks = 0
        self._skipped = 0
        self._busy_s = 0.0

    @ray.method(concurrency_group=CONTROL)
    def where(self) -> dict[str, Any]:
        """The node and GPUs this actor holds."""
        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
        }

    def get_batch(self, rank: int, epoch: int, start: int, k: int, gpu_uuid: bytes | None = None) -> dict[str, Any]:
        """Batch ``k`` of ``epoch`` (begun at stream position ``start``) for ``rank``: outputs as
        host arrays (or CUDA IPC handles when the rank runs on this actor's GPU, ``gpu_uuid``),
        padding flags and sample indices. Skipped samples are replaced (see
        :mod:`raypipe.replacement`) and reported under ``"skipped"``."""
        began = time.perf_counter()
        outputs, info = self._produce(rank, epoch, start, k)
        rows, samples, is_pad = None, np.asarray(info.sample_indices, dtype=np.int64), np.asarray(info.is_pad)
        if info.skipped:
            spec = self.config.plan(epoch, start).batch(rank, k)
            rows, samples, is_pad = fill_skipped(
                spec, [s.sample_index for s in info.skipped], [s.source for s in info.skipped]
            )
        self._served += 1
        self._skipped += len(info.skipped)
        self._busy_s += time.perf_counter() - began
        return {
            "outputs": [self._ship(o, rows, gpu_uuid, (rank, epoch, k)) for o in outputs],
            "is_pad": is_pad,
            "sample_indices": samples,
            "epoch": epoch,
            "start": start,
            "index": k,
            "skipped": [(info.epoch, s.sample_index, s.source, s.reason) for s in info.skipped],
        }

    def _produce(self, rank: int, epoch: int, start: int, k: int) -> tuple[tuple[TensorList, ...], Any]:
        """Run the pipeline to the requested batch, re-seeking when the executor is elsewhere."""
        for _ in range(2):
            if self._cursor != (rank, epoch, start, k):
                self._seek(rank, epoch, start, k)
            try:
                outputs = self.pipe.run()
            except BaseException:
                self._cursor = None  # the executor has moved past the failed batch: re-seek on the next request
                raise
            info = self.pipe.last_batch_info
            if (info.epoch, info.index) == (epoch, k):
                self._cursor = (rank, epoch + 1, 0, 0) if info.last_in_epoch else (rank, epoch, start, k + 1)
                return outputs, info
            self._cursor = None
        raise RaypipeError(
            f"pipeline actor: asked for batch {k} of epoch {epoch} for rank {rank}, its pipeline produced batch "
            f"{info.index} of epoch {info.epoch} twice"
        )

    def _seek(self, rank: int, epoch: int, start: int, k: int) -> None:
        self.rank = rank
        self._seeks += 1
        self.pipe.drive(self._specs(rank, epoch, start, k))
        self._cursor = (rank, epoch, start, k)

    def release(self, token: tuple[int, int, int]) -> None:
        """The rank has copied the IPC-shipped outputs of batch ``token``: free them."""
        self._exporter.release(token)

    def _ship(
        self, output: TensorList, rows: np.ndarray | None, gpu_uuid: bytes | None, token: tuple[int, int, int]
    ) -> Any:
        tensor = output.as_tensor()
        if rows is not None:
            xp = array_module(0 if is_device_array(tensor) else None)
            tensor = xp.take(tensor, xp.asarray(rows), axis=0)
        if output.device == "gpu" and use_ipc(tensor, self._gpu_uuid, gpu_uuid):
            return self._exporter.export(tensor, token)
        return to_host(tensor)

    def pause(self) -> None:
        """Stop preparing batches ahead (frees the CPUs); the next request restarts the pipeline."""
        self.pipe.close()
        self._cursor = None

    def state_dict(self) -> dict[str, Any] | None:
        """The position of the batch this actor's pipeline produces next for its rank (the
        position contract of :mod:`raypipe.position`), or None before any request."""
        if self._cursor is None:
            return None
        rank, epoch, start, k = self._cursor
        return self.config.state(epoch, start, k, rank=rank)

    def load_state_dict(self, state: dict[str, Any], rank: int, strict: bool = True) -> None:
        """Start preparing ``rank``'s batches at ``state`` now, ahead of its first request."""
        epoch, start = self.config.resume(state, owner="pipeline actor", strict=strict)
        self._seek(rank, epoch, start, 0)

    @ray.method(concurrency_group=CONTROL)
    def stats(self) -> dict[str, Any]:
        """Batches served, time spent producing them, how often a request forced a re-seek
        (not counting the run-on from one epoch into the next) and samples skipped."""
        return {
            "rank": self.rank,
            "batches": self._served,
            "seeks": self._seeks,
            "skipped": self._skipped,
            "busy_s": round(self._busy_s, 3),
            **self.where(),
        }

    def _specs(self, rank: int, epoch: int, start: int, k: int) -> Iterator[BatchSpec]:
        for e in itertools.count(epoch):
            p = self.config.plan(e, start if e == epoch else 0)
            for j in range(k if e == epoch else 0, p.num_batches):
                yield p.batch(rank, j)
