"""The per-GPU pipeline actor: builds the user's pipeline and serves one rank's batches.

Batch ``k`` of epoch ``e`` for rank ``r`` is a pure function of (seed, e, r, k): the
actor derives the sample indices from the epoch plan and drives its pipeline's reader
with them, running on into the next epoch so there is no barrier between epochs. A
request for any other position re-seeks, so a restarted actor (or a resumed rank)
continues at the exact batch.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import ray

from raypipe.backend import gpu_available
from raypipe.batch_spec import BatchSpec
from raypipe.epoch_plan import EpochPlan, plan
from raypipe.tensor_list import TensorList

from .cuda_ipc import Exporter, device_uuid, use_ipc


def service_plan(config: dict[str, Any], epoch: int) -> EpochPlan:
    """The plan of ``epoch`` for a service described by its configuration dict."""
    keys = ("dataset_len", "seed", "world_size", "batch_size", "shuffle", "last_batch", "block_size", "initial_fill")
    return plan(epoch=epoch, **{k: config[k] for k in keys})


class PipelineActor:
    """Wraps one pipeline; ``get_batch(epoch, k)`` returns host arrays through the object store."""

    def __init__(self, pipeline_fn: Callable, pipeline_kwargs: dict[str, Any], config: dict[str, Any]):
        self.config = config
        device_id = 0 if ray.get_gpu_ids() and gpu_available() else None
        self.pipe = pipeline_fn(
            **{**pipeline_kwargs, "batch_size": config["batch_size"], "seed": config["seed"], "device_id": device_id}
        )
        self.pipe.build()
        self._gpu_uuid = device_uuid(0) if device_id is not None else None
        self._exporter = Exporter()
        self.rank: int | None = None
        self._position: tuple[int, int] | None = None
        self._served = 0
        self._seeks = 0
        self._busy_s = 0.0

    def where(self) -> dict[str, Any]:
        """The node and GPUs this actor holds."""
        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
        }

    def get_batch(self, rank: int, epoch: int, k: int, gpu_uuid: bytes | None = None) -> dict[str, Any]:
        """Batch ``k`` of ``epoch`` for ``rank``: outputs as host arrays (or CUDA IPC handles
        when the rank runs on this actor's GPU, ``gpu_uuid``) plus padding flags.

        The request names everything the batch depends on, so a restarted actor answers a
        re-run request exactly as the old one would have."""
        start = time.perf_counter()
        if (rank, epoch, k) != (self.rank, *(self._position or (None, None))):
            self.rank = rank
            self._seeks += 1
            self.pipe.drive(self._specs(epoch, k))
        outputs = self.pipe.run()
        info = self.pipe.last_batch_info
        self._position = (epoch + 1, 0) if info.last_in_epoch else (epoch, k + 1)
        self._served += 1
        self._busy_s += time.perf_counter() - start
        return {
            "outputs": [self._ship(o, gpu_uuid, (rank, epoch, k)) for o in outputs],
            "is_pad": np.asarray(info.is_pad, dtype=bool),
            "sample_indices": np.asarray(info.sample_indices, dtype=np.int64),
            "epoch": info.epoch,
            "index": info.index,
            "skipped": [(s.sample_index, s.source, s.reason) for s in info.skipped],
        }

    def release(self, token: tuple[int, int, int]) -> None:
        """The rank has copied the IPC-shipped outputs of batch ``token``: free them."""
        self._exporter.release(token)

    def _ship(self, output: TensorList, gpu_uuid: bytes | None, token: tuple[int, int, int]) -> Any:
        if output.device == "gpu" and use_ipc(output.as_tensor(), self._gpu_uuid, gpu_uuid):
            return self._exporter.export(output.as_tensor(), token)
        return np.asarray(output.as_cpu())

    def pause(self) -> None:
        """Stop preparing batches ahead (frees the CPUs); the next request restarts the pipeline."""
        self.pipe.close()
        self._position = None

    def stats(self) -> dict[str, Any]:
        """Batches served, time spent producing them, and how often a request forced a re-seek
        (not counting the run-on from one epoch into the next)."""
        return {
            "rank": self.rank,
            "batches": self._served,
            "seeks": self._seeks,
            "busy_s": round(self._busy_s, 3),
            **self.where(),
        }

    def _specs(self, epoch: int, k: int) -> Iterator[BatchSpec]:
        for e in itertools.count(epoch):
            p = service_plan(self.config, e)
            for j in range(k if e == epoch else 0, p.num_batches):
                yield p.batch(self.rank, j)
