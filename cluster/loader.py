"""``rp.loader``: one training rank's view of a service.

Finds the service by name, starts this rank's pipeline actor on the rank's node and GPU
(:mod:`cluster.placement`; the actor belongs to this process and goes with it), and
yields this rank's batches of the current epoch, keeping ``prefetch`` requests in flight.
How requests and batches travel is :mod:`cluster.batch_client`'s; here, host batches become
torch tensors without a copy (read-only: clone before writing in place), on a GPU node moved
to the rank's GPU, and the rank's position and acknowledgements are kept.
"""

from __future__ import annotations

import collections
import inspect
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import ray

from actors.cuda_ipc import device_uuid
from actors.protocol import Ack, BatchReply, RaggedArray, Skip, Timing
from raypipe.errors import ArgumentError, RaypipeError, did_you_mean
from raypipe.ragged import pad_to_largest, sample_shapes
from raypipe.rank_normalize import Normalize
from raypipe.service_config import ServiceConfig

from . import object_store, service_record
from .batch_client import HOST_RING_ENV, REQUEST_SOCKET_ENV, BatchClient, Pending
from .host_upload import HostUpload
from .naming import NAMESPACE, coordinator_name, no_such_service
from .placement import local_world_size, locate_rank, parse_device, start_pipeline_actor
from .ray_connection import init_ray

OUTPUTS = ("torch", "numpy")
#: How often a rank acknowledges its progress and timings to the coordinator while iterating (and
#: at the end of every pass): one call per batch cost the coordinator about 1.3 ms of CPU and the
#: rank about 0.6 ms, each batch.
ACK_INTERVAL_S = 0.25
#: How long a loader of another world size waits for the ranks of the group before it to go.
RESIZE_WAIT_S = 30.0
__all__ = ["HOST_RING_ENV", "REQUEST_SOCKET_ENV", "Loader", "loader"]


class Loader:
    """Iterates over one rank's batches; ``len()`` is equal on every rank.

    An output whose samples differ in shape in a batch (text, boxes, a WebDataset ``.cls`` label
    of one or two characters) arrives as a list of per-sample arrays (numpy) or tensors (torch);
    with ``pad_ragged=True`` as one array padded with zeros to the batch's largest extent per axis
    instead. Either way ``last_shapes`` holds, per output of the batch last yielded, each sample's
    shape before padding (a ``(batch, ndim)`` int64 array)."""

    def __init__(
        self,
        name: str,
        rank: int,
        world_size: int,
        output: str = "torch",
        prefetch: int = 2,
        device: str | int | None = None,
        normalize: Normalize | None = None,
        pad_ragged: bool = False,
    ):
        if output not in OUTPUTS:
            raise ArgumentError(f"loader: output must be one of {OUTPUTS}, got {output!r}")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ArgumentError(f"loader: prefetch must be a positive int, got {prefetch!r}")
        if (
            isinstance(rank, bool)
            or not isinstance(rank, int)
            or isinstance(world_size, bool)
            or not isinstance(world_size, int)
        ):
            raise ArgumentError(f"loader: rank and world_size must be ints, got {rank!r} and {world_size!r}")
        if not isinstance(pad_ragged, bool):
            raise ArgumentError(f"loader: pad_ragged must be True or False, got {pad_ragged!r}")
        if normalize is not None and (not isinstance(normalize, Normalize) or output != "torch"):
            raise ArgumentError("loader: normalize must be an rp.Normalize, and needs output='torch'")
        parse_device(device)
        init_ray(os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
        try:
            self._coordinator = ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
        except ValueError:
            self._coordinator = None
        record = service_record.load(name) if self._coordinator is not None else None
        if record is None:
            raise RaypipeError(f"loader: {no_such_service(name)}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ArgumentError(f"loader: rank {rank} outside [0, {world_size})")
        self.config, launch = record
        if world_size != self.config.world_size:
            self.config = _resize(self._coordinator, name, self.config.world_size, world_size)
        self.name, self.rank, self.output, self.prefetch = name, rank, output, prefetch
        self.device = device
        self.location = locate_rank(device)
        self._cuda_index = self.location.cuda_index
        self._upload: HostUpload | None = None  # made on the first host batch bound for a GPU
        self.normalize = normalize
        self.pad_ragged = pad_ragged
        # The actor starts while the coordinator may still be starting: both at once.
        attached = self._coordinator.attach.remote(rank, self.location.as_dict())
        self._actor, self.actor_info = start_pipeline_actor(launch, self.config, rank, self.location)
        _wait_attached(attached, name, launch.startup_timeout_s, self._actor)
        self._acks = _Acks(self._coordinator, rank)
        gpu_uuid = device_uuid(self._cuda_index) if output == "torch" and self._cuda_index is not None else None
        self._client = BatchClient(self._actor, f"rank {rank} of {name!r}", prefetch + 1, gpu_uuid, self._cuda_index)
        self._client.offer(self.actor_info.get("host_channel"), self.actor_info.get("requests"))
        self._epoch, self._start, self._next = 0, 0, 0  # the rank's position: its only home
        self._resumed = False
        self._store_checked = False
        self.last_is_pad: np.ndarray | None = None
        self.last_sample_indices: np.ndarray | None = None
        self.last_shapes: list[np.ndarray] | None = None

    @property
    def host_transport(self) -> str:
        """How host batches arrive ("shared memory", or "object store" and why)."""
        return self._client.host_transport

    @property
    def request_transport(self) -> str:
        """How batch requests travel ("socket", or "ray" and why)."""
        return self._client.request_transport

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads."""
        return self._epoch + 1 if self._next >= len(self) else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Read ``epoch`` next, from its first batch; right after ``load_state_dict`` into that
        same epoch, from the loaded position (so the usual ``set_epoch`` loop resumes)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ArgumentError(f"loader: epoch must be a non-negative int, got {epoch!r}")
        if not (self._resumed and epoch == self._epoch):
            self._epoch, self._start, self._next = epoch, 0, 0
        self._resumed = False
        self._acks.flush()
        self._coordinator.ack.remote(Ack(self.rank, self._epoch, self._next))

    def __len__(self) -> int:
        """Batches of the current epoch (from the resumed position after ``load_state_dict``);
        equal on every rank."""
        return self._plan().num_batches

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        epoch, start, total = self._epoch, self._start, len(self)
        self._resumed = False
        pending: collections.deque[Pending] = collections.deque()
        requested = self._next
        trained = 0.0
        self._client.begin_pass()
        try:
            while self._next < total:
                while len(pending) < self.prefetch and requested < total:
                    pending.append(self._client.request(epoch, start, requested))
                    requested += 1
                k = pending[0].request.index
                asked = time.perf_counter()
                batch = self._client.receive(pending.popleft())
                # waited for this batch, trained on the last; requests still queued, out of prefetch
                timing = Timing(time.perf_counter() - asked, trained, len(pending), self.prefetch, time.monotonic())
                if (batch.epoch, batch.start, batch.index) != (epoch, start, k):
                    raise RaypipeError(
                        f"loader: rank {self.rank} asked for batch {k} of epoch {epoch} and received batch "
                        f"{batch.index} of epoch {batch.epoch}"
                    )
                if not self._store_checked and not self._client.maps_host_memory:
                    self._check_store(batch.outputs)
                self._next = k + 1
                self.last_is_pad = batch.is_pad
                self.last_sample_indices = batch.sample_indices
                self._acks.add(epoch, self._next, batch.skipped, timing, last=self._next == total)
                outputs = self._outputs(batch)
                handed = time.perf_counter()
                yield outputs
                trained = time.perf_counter() - handed  # the caller trained on the batch until it asked again
        except GeneratorExit:  # the caller broke off the epoch (an error gets no wait)
            self._client.settle(list(pending))
            raise
        finally:  # where the rank got to, also when it broke off or failed
            if ray.is_initialized():  # not when Ray shut down first (at exit): nothing can be told
                self._client.release_copied()
                self._acks.flush()
        self._epoch, self._start, self._next = epoch + 1, 0, 0

    def example_batch(self) -> tuple[Any, ...]:
        """The next batch as iterating would yield it, without moving the position or
        acknowledging it: its shapes, dtypes and device (see :func:`cluster.synthetic.synthetic_loader`)."""
        epoch, start = self._epoch, self._start
        k = self._next if self._next < len(self) else 0
        if self._next >= len(self):
            epoch, start = epoch + 1, 0
        outputs = self._outputs(self._client.receive(self._client.request(epoch, start, k)))
        self._client.release_copied()  # its ring slot goes back: the next pass asks for this batch again
        return outputs

    def _outputs(self, batch: BatchReply) -> tuple[Any, ...]:
        """``batch``'s outputs as the caller asked for them (numpy, or torch on the rank's device),
        normalized when the loader normalizes."""
        arrays = self._client.unpack(batch)
        self.last_shapes = [_shapes(a) for a in arrays]
        if self.pad_ragged:
            arrays = [pad_to_largest(a)[0] if isinstance(a, list) else a for a in arrays]
        outputs = tuple([self._convert(s) for s in a] if isinstance(a, list) else self._convert(a) for a in arrays)
        return self.normalize.apply(outputs) if self.normalize is not None else outputs

    def report_synthetic(self, batches: int, trained_s: float) -> None:
        """Tell the service this rank trained ``batches`` steps on synthetic data in ``trained_s``
        seconds (:mod:`cluster.synthetic`), for ``svc.report()``."""
        self._coordinator.synthetic.remote(self.rank, batches, trained_s)

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is, as a global position (epoch, stream offset): a small plain dict
        that ``load_state_dict`` resumes from in any process and any world size."""
        return self.config.state(self._epoch, self._start, self._next)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue at ``state``'s position, without reading anything before it. The state may
        come from a service with another world size (same dataset, seed, shuffle, batch size
        and last-batch policy; ``strict=False`` loads a state from another configuration
        with a warning). The pipeline actor starts preparing from there at once."""
        epoch, start = self.config.resume(state, owner="loader", strict=strict)
        self._epoch, self._start, self._next = epoch, start, 0
        self._resumed = True
        self._actor.load_state_dict.remote(state, strict)

    def _plan(self):
        return self.config.plan(self._epoch, self._start)

    def _check_store(self, arrays: list) -> None:
        """Warn once when this node's ranks' batches in flight may not fit its object store, where
        Ray would spill them (see :mod:`cluster.object_store`); GPU batches (CUDA IPC) do not count."""
        self._store_checked = True
        batch_bytes = sum(a.nbytes for a in arrays if isinstance(a, (np.ndarray, RaggedArray)))
        if batch_bytes == 0:
            return
        store_bytes, gpus = object_store.node_store(self.location.node_id)
        node_ranks = min(self.config.world_size, local_world_size() or max(1, gpus))
        risk = object_store.spill_risk(batch_bytes, self.prefetch, node_ranks, store_bytes)
        if risk is not None:
            warnings.warn(f"loader: rank {self.rank} of {self.name!r}: {risk}", object_store.ObjectStoreWarning, 3)

    def _convert(self, array: Any) -> Any:
        if self.output == "numpy" or not isinstance(array, np.ndarray):  # numpy asked for, or a GPU tensor
            return array
        import torch

        device = self.device or (
            f"cuda:{self._cuda_index}" if self._cuda_index is not None and torch.cuda.is_available() else None
        )
        if device is not None and torch.device(device).type == "cuda":
            if self._upload is None or self._upload.device != torch.device(device):
                self._upload = HostUpload(device)
            return self._upload.to_device(array)  # through pinned memory, not waiting on the training step
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            tensor = torch.from_numpy(array)
        return tensor.to(device) if device else tensor


def _shapes(output: Any) -> np.ndarray:
    """Each sample's shape in ``output`` (a batch array or tensor, or a ragged output's list of
    samples) as a row of a ``(batch, ndim)`` int64 array."""
    if isinstance(output, list):
        return sample_shapes(output)
    return np.tile(np.array(tuple(output.shape[1:]), dtype=np.int64), (len(output), 1))


class _Acks:
    """A rank's acknowledgements, sent to the coordinator together: at most every
    :data:`ACK_INTERVAL_S`, at once when samples were skipped (the coordinator records them), and at the end
    of a pass."""

    def __init__(self, coordinator: Any, rank: int):
        self._coordinator = coordinator
        self._rank = rank
        self._position: tuple[int, int] | None = None
        self._skipped: list[Skip] = []
        self._timings: list[Timing] = []
        self._sent = time.monotonic()

    def add(
        self,
        epoch: int,
        next_batch: int,
        skipped: tuple[Skip, ...],
        timing: Timing,
        last: bool,
    ) -> None:
        """The rank has consumed every batch of ``epoch`` before ``next_batch``; ``last``: the pass ends."""
        self._position = (epoch, next_batch)
        self._skipped += skipped
        self._timings.append(timing)
        if last or skipped or timing.at - self._sent >= ACK_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Send what is waiting, if anything."""
        if self._position is None:
            return
        self._coordinator.ack.remote(Ack(self._rank, *self._position, tuple(self._skipped), tuple(self._timings)))
        self._position, self._skipped, self._timings = None, [], []
        self._sent = time.monotonic()


def _resize(coordinator: Any, name: str, serving: int, world_size: int) -> ServiceConfig:
    """Have the service serve ``world_size`` ranks instead of ``serving`` (a training group of
    another size took over), waiting at most :data:`RESIZE_WAIT_S` for the pipeline actors of the
    group before it to go with their ranks' processes."""
    deadline = time.monotonic() + RESIZE_WAIT_S
    while True:
        answer = ray.get(coordinator.resize.remote(world_size))
        if answer.config is not None:
            return answer.config
        if time.monotonic() > deadline:
            raise ArgumentError(
                f"loader: world_size={world_size} but service {name!r} serves {serving} ranks, and ranks "
                f"{answer.alive} of those still run (their pipeline actors are alive after {RESIZE_WAIT_S:g} s): "
                "a group of another size takes over only once the one before it has gone"
            )
        time.sleep(0.2)


def _wait_attached(attached: ray.ObjectRef, name: str, timeout_s: float, actor: Any) -> None:
    """Wait until the coordinator has recorded the rank's attachment (it may still be starting);
    when it cannot, stop the rank's new pipeline actor and say why."""
    try:
        ray.get(attached, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError as exc:
        ray.kill(actor, no_restart=True)
        raise RaypipeError(
            f"loader: the coordinator of service {name!r} did not answer within {timeout_s:g} s"
        ) from exc
    except ray.exceptions.RayActorError as exc:
        ray.kill(actor, no_restart=True)
        cause = str(exc).strip().splitlines()[-1]
        raise RaypipeError(f"loader: the coordinator of service {name!r} failed: {cause}") from exc


def loader(name: str, rank: int | None = None, world_size: int | None = None, **kwargs: Any) -> Loader:
    """Open rank ``rank``'s loader of the service ``name`` (see :class:`Loader`).

    Inside a Ray Train worker, ``rank`` and ``world_size`` default to the worker's (from
    ``ray.train.get_context()``), and a loader position saved in the checkpoint Ray Train restored
    (:func:`raypipe.train.save`) is loaded: after a restart the loader continues where that
    checkpoint left off, in whatever number of workers the group now has."""
    options = inspect.signature(Loader).parameters
    for key in kwargs:
        if key not in options:
            raise ArgumentError(f"loader: unexpected keyword argument {key!r}{did_you_mean(key, options)}")
    in_train = ray_train_context()
    if rank is None and world_size is None and in_train is not None:
        rank, world_size = in_train.get_world_rank(), in_train.get_world_size()
    elif rank is None or world_size is None:
        raise ArgumentError(
            "loader: give rank and world_size (both default to the worker's only inside a Ray Train worker), "
            f"got rank={rank!r} and world_size={world_size!r}"
        )
    opened = Loader(name, rank, world_size, **kwargs)
    if in_train is not None:
        state = _checkpointed_state(name)
        if state is not None:
            opened.load_state_dict(state)
    return opened


def ray_train_context() -> Any | None:
    """Ray Train's context when this process is one of its workers, else None. A Ray Train
    worker has imported ``ray.train`` already; any other process is not asked to (1-2 s, pandas)."""
    if "ray.train" not in sys.modules:
        return None
    from ray import train

    try:
        return train.get_context()
    except RuntimeError:  # "get_context cannot be used outside of a Ray Train training function"
        return None


def _checkpointed_state(name: str) -> dict[str, Any] | None:
    """The position of service ``name``'s loader in the checkpoint Ray Train restored, if any."""
    from ray import train

    from raypipe.train import load

    checkpoint = train.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as directory:
        return load(directory, name)
