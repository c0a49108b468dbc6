"""``rp.loader``: one training rank's view of a service.

Finds the service by name, starts this rank's pipeline actor on the rank's node and GPU
(:mod:`cluster.placement`; the actor belongs to this process and goes with it), and
yields this rank's batches of the current epoch, keeping ``prefetch`` requests in flight.
Host batches arrive through shared memory and become torch tensors without a copy
(read-only: clone before writing in place): the pipeline actor's own segments where this
process can map them (:mod:`actors.host_ring`), else the node's object store; on a GPU
node they are moved to the rank's GPU. Where it maps them, the rank also sends its batch
requests over the actor's socket instead of through Ray (:mod:`actors.request_channel`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import ray

from actors import host_ring, request_channel
from actors.cuda_ipc import CopiedReleases, Importer, IpcArray, device_uuid
from actors.protocol import BatchReply, BatchRequest, Skip, Timing
from raypipe.errors import ArgumentError, RaypipeError
from raypipe.rank_normalize import Normalize
from raypipe.service_config import ServiceConfig

from . import object_store, service_record
from .host_upload import HostUpload
from .naming import NAMESPACE, coordinator_name
from .placement import local_world_size, locate_rank, parse_device, start_pipeline_actor

OUTPUTS = ("torch", "numpy")
#: How long an abandoned iteration waits for its requests in flight (see :func:`_settle`).
SETTLE_TIMEOUT_S = 10.0
#: How often a rank acknowledges its progress and timings to the coordinator while iterating (and
#: at the end of every pass): one call per batch cost the coordinator about 1.3 ms of CPU and the
#: rank about 0.6 ms, each batch.
ACK_INTERVAL_S = 0.25
#: How long a loader of another world size waits for the ranks of the group before it to go.
RESIZE_WAIT_S = 30.0
#: ``RAYPIPE_HOST_RING=0`` in a rank's environment keeps its host batches in the object store.
HOST_RING_ENV = "RAYPIPE_HOST_RING"
#: ``RAYPIPE_REQUEST_SOCKET=0`` keeps a rank's batch requests on Ray.
REQUEST_SOCKET_ENV = "RAYPIPE_REQUEST_SOCKET"


class Loader:
    """Iterates over one rank's batches; ``len()`` is equal on every rank."""

    def __init__(
        self,
        name: str,
        rank: int,
        world_size: int,
        output: str = "torch",
        prefetch: int = 2,
        device: str | int | None = None,
        normalize: Normalize | None = None,
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
        if normalize is not None and (not isinstance(normalize, Normalize) or output != "torch"):
            raise ArgumentError("loader: normalize must be an rp.Normalize, and needs output='torch'")
        parse_device(device)
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
        try:
            self._coordinator = ray.get_actor(coordinator_name(name), namespace=NAMESPACE)
        except ValueError:
            self._coordinator = None
        record = service_record.load(name) if self._coordinator is not None else None
        if record is None:
            raise RaypipeError(
                f"loader: no raypipe service named {name!r} on this Ray cluster (start it with rp.serve)"
            )
        if world_size < 1 or not 0 <= rank < world_size:
            raise ArgumentError(f"loader: rank {rank} outside [0, {world_size})")
        self.config, launch = record
        if world_size != self.config.world_size:
            self.config = _resize(self._coordinator, name, self.config.world_size, world_size)
        self.name, self.rank, self.output, self.prefetch = name, rank, output, prefetch
        self.device = device
        self.location = locate_rank(device)
        self._cuda_index = self.location.cuda_index
        self._gpu_uuid = device_uuid(self._cuda_index) if output == "torch" and self._cuda_index is not None else None
        self._importer = Importer() if self._gpu_uuid is not None else None
        self._upload: HostUpload | None = None  # made on the first host batch bound for a GPU
        self._ipc_releases = (
            CopiedReleases(lambda key: self._actor.release.remote(key)) if self._importer is not None else None
        )
        self._host = host_ring.Importer() if os.environ.get(HOST_RING_ENV, "1") != "0" else None
        self._host_exporter: str | None = None  # the actor's host exporter, once checked
        # how host batches arrive, and why not through shared memory
        self.host_transport = "object store" if self._host is not None else f"object store ({HOST_RING_ENV}=0)"
        self._requests: request_channel.RequestClient | None = None
        # how batch requests travel, and why not over the actor's socket
        self.request_transport = "ray"
        self.normalize = normalize
        # The actor starts while the coordinator may still be starting: both at once.
        attached = self._coordinator.attach.remote(rank, self.location.as_dict())
        self._actor, self.actor_info = start_pipeline_actor(launch, self.config, rank, self.location)
        _wait_attached(attached, name, launch.startup_timeout_s, self._actor)
        self._acks = _Acks(self._coordinator, rank)
        self._take_channel(self.actor_info.get("host_channel"), self.actor_info.get("requests"))
        self._epoch, self._start, self._next = 0, 0, 0  # the rank's position: its only home
        self._resumed = False
        self._store_checked = False
        self.last_is_pad: np.ndarray | None = None
        self.last_sample_indices: np.ndarray | None = None

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
        self._coordinator.ack.remote(self.rank, self._epoch, self._next)

    def __len__(self) -> int:
        """Batches of the current epoch (from the resumed position after ``load_state_dict``);
        equal on every rank."""
        return self._plan().num_batches

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        epoch, start, total = self._epoch, self._start, len(self)
        self._resumed = False
        pending: collections.deque = collections.deque()
        requested = self._next
        trained = 0.0
        if self._importer is not None:
            self._actor.release_all.remote()
        try:
            while self._next < total:
                while len(pending) < self.prefetch and requested < total:
                    ref = self._request(epoch, start, requested)
                    pending.append((requested, ref))
                    requested += 1
                k, ref = pending.popleft()
                asked = time.perf_counter()
                batch = self._fetch(ref, epoch, k)
                # waited for this batch, trained on the last; requests still queued, out of prefetch
                timing = Timing(time.perf_counter() - asked, trained, len(pending), self.prefetch, time.monotonic())
                if (batch.epoch, batch.start, batch.index) != (epoch, start, k):
                    raise RaypipeError(
                        f"loader: rank {self.rank} asked for batch {k} of epoch {epoch} and received batch "
                        f"{batch.index} of epoch {batch.epoch}"
                    )
                self._take_channel(batch.host_channel, batch.requests)
                if not self._store_checked and self._host_exporter is None:
                    self._check_store(batch.outputs)
                self._next = k + 1
                self.last_is_pad = batch.is_pad
                self.last_sample_indices = batch.sample_indices
                self._acks.add(epoch, self._next, batch.skipped, timing, last=self._next == total)
                outputs = tuple(self._convert(a) for a in batch.outputs)
                if any(isinstance(a, IpcArray) for a in batch.outputs):
                    self._ipc_releases.add((epoch, k), self._importer.last_copy)
                if self.normalize is not None:
                    outputs = self.normalize.apply(outputs)
                handed = time.perf_counter()
                yield outputs
                trained = time.perf_counter() - handed  # the caller trained on the batch until it asked again
        except GeneratorExit:  # the caller broke off the epoch (an error gets no wait)
            _settle([ref for _, ref in pending], self._requests)
            raise
        finally:  # where the rank got to, also when it broke off or failed
            if self._ipc_releases is not None:
                self._ipc_releases.flush()
            self._acks.flush()
        self._epoch, self._start, self._next = epoch + 1, 0, 0

    def example_batch(self) -> tuple[Any, ...]:
        """The next batch as iterating would yield it, without moving the position or
        acknowledging it: its shapes, dtypes and device (see :func:`cluster.synthetic.synthetic_loader`)."""
        epoch, start = self._epoch, self._start
        k = self._next if self._next < len(self) else 0
        if self._next >= len(self):
            epoch, start = epoch + 1, 0
        batch = self._fetch(self._request(epoch, start, k), epoch, k)
        self._take_channel(batch.host_channel, batch.requests)
        outputs = tuple(self._convert(a) for a in batch.outputs)
        if any(isinstance(a, IpcArray) for a in batch.outputs):
            self._ipc_releases.add((epoch, k), self._importer.last_copy)
            self._ipc_releases.flush()  # its ring slot goes back: the next pass asks for this batch again
        return self.normalize.apply(outputs) if self.normalize is not None else outputs

    def _request(self, epoch: int, start: int, k: int) -> ray.ObjectRef | _Sent:
        """Ask the pipeline actor for batch ``k`` (over its socket when connected, else through
        Ray), handing back the shared-memory batches this rank no longer uses."""
        exporter = self._host_exporter
        released = self._host.released(exporter) if exporter is not None else []
        request = BatchRequest(epoch, start, k, self._gpu_uuid, self.prefetch + 1, exporter, tuple(released))
        if self._requests is not None:
            try:
                return _Sent(self._requests, self._requests.send((request,)), request)
            except OSError as exc:
                self._lose_requests(exc)
        return self._actor.get_batch.remote(request)

    def _take_channel(self, channel: dict[str, Any] | None, requests: dict[str, str] | None) -> None:
        """Check the host channel an actor offers (when it starts, and again after a restart):
        from the next request on, host batches come through its shared memory when this process
        can map it, and requests go over its socket (``requests``) when this process reaches it."""
        if channel is None or self._host is None:
            return
        channel = host_ring.Channel(**channel)
        why = self._host.check(channel)
        self._host_exporter = channel.exporter if why is None else None
        self.host_transport = "shared memory" if why is None else f"object store ({why})"
        if why is None:
            self._connect(requests)

    def _connect(self, offer: dict[str, str] | None) -> None:
        """Send requests over the actor's socket (``offer``: its address and token) from now on,
        where this rank can (CUDA IPC batches keep their Ray calls: their releases are ordered
        with them)."""
        address = offer["address"] if offer is not None else None
        if self._requests is not None and self._requests.address == address and not self._requests.broken:
            return
        self._close_requests()
        if offer is None:
            self.request_transport = "ray (the actor has no socket)"
        elif os.environ.get(REQUEST_SOCKET_ENV, "1") == "0":
            self.request_transport = f"ray ({REQUEST_SOCKET_ENV}=0)"
        elif self._gpu_uuid is not None:
            self.request_transport = "ray (batches come by CUDA IPC)"
        else:
            try:
                self._requests = request_channel.RequestClient(offer["address"], offer["token"])
                self.request_transport = "socket"
            except OSError as exc:
                self.request_transport = f"ray (cannot reach the actor's socket: {exc})"

    def _lose_requests(self, exc: BaseException) -> None:
        """The socket broke (the actor died): requests go through Ray, which waits for a restarted
        actor (whose first reply offers its own socket) or says the actor is gone."""
        self._close_requests()
        self.request_transport = f"ray (the actor's socket broke: {exc or type(exc).__name__})"

    def _close_requests(self) -> None:
        if self._requests is not None:
            self._requests.close()
            self._requests = None

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

    def _fetch(self, ref: ray.ObjectRef | _Sent, epoch: int, k: int) -> BatchReply:
        if isinstance(ref, _Sent):
            try:
                return ref.client.receive(ref.seq)
            except (OSError, EOFError) as exc:  # the actor died: ask again through Ray
                if ref.client is self._requests:
                    self._lose_requests(exc)
                ref = self._actor.get_batch.remote(ref.request)
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, RaypipeError):
                raise cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            raise RaypipeError(
                f"loader: the pipeline actor serving rank {self.rank} of {self.name!r} is gone at epoch {epoch}, "
                f"batch {k} ({type(exc).__name__}); resume from state_dict() once the service is back"
            ) from exc

    def _check_store(self, arrays: list) -> None:
        """Warn once when this node's ranks' batches in flight may not fit its object store, where
        Ray would spill them (see :mod:`cluster.object_store`); GPU batches (CUDA IPC) do not count."""
        self._store_checked = True
        batch_bytes = sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
        if batch_bytes == 0:
            return
        store_bytes, gpus = object_store.node_store(self.location.node_id)
        node_ranks = min(self.config.world_size, local_world_size() or max(1, gpus))
        risk = object_store.spill_risk(batch_bytes, self.prefetch, node_ranks, store_bytes)
        if risk is not None:
            warnings.warn(f"loader: rank {self.rank} of {self.name!r}: {risk}", object_store.ObjectStoreWarning, 3)

    def _convert(self, array: np.ndarray | IpcArray | host_ring.HostArray) -> Any:
        if isinstance(array, IpcArray):
            return self._importer.to_torch(array, self._cuda_index)
        if isinstance(array, host_ring.HostArray):
            array = self._host.to_array(array)
        if self.output == "numpy":
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


@dataclasses.dataclass(frozen=True)
class _Sent:
    """A batch request sent over the actor's socket: its sequence number there, and the request
    to send again through Ray if the socket breaks before the reply."""

    client: request_channel.RequestClient
    seq: int
    request: BatchRequest


class _Acks:
    """A rank's acknowledgements, sent to the coordinator together: at most every
    :data:`ACK_INTERVAL_S`, at once when samples were skipped (they are journaled), and at the end
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
        self._coordinator.ack.remote(self._rank, *self._position, self._skipped, self._timings)
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


def _settle(refs: list, requests: request_channel.RequestClient | None) -> None:
    """Wait (a bounded time) for the requests an abandoned iteration left in flight, so that a
    service shut down right after a ``break`` does not kill its actors mid-request (Ray then
    logs each as a failed task it will retry), and the socket's next reply is the next request's."""
    if requests is not None:
        requests.drain(SETTLE_TIMEOUT_S)
    refs = [ref for ref in refs if not isinstance(ref, _Sent)]
    if not refs:
        return
    try:
        ray.wait(refs, num_returns=len(refs), timeout=SETTLE_TIMEOUT_S)
    except Exception:  # Ray is shutting down too: nothing left to settle
        pass


def loader(name: str, rank: int | None = None, world_size: int | None = None, **kwargs: Any) -> Loader:
    """Open rank ``rank``'s loader of the service ``name`` (see :class:`Loader`).

    Inside a Ray Train worker, ``rank`` and ``world_size`` default to the worker's (from
    ``ray.train.get_context()``), and a loader position saved in the checkpoint Ray Train restored
    (:func:`raypipe.train.save`) is loaded: after a restart the loader continues where that
    checkpoint left off, in whatever number of workers the group now has."""
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
    """Ray Train's context when this process is one of its workers, else None."""
    try:
        from ray import train
    except ImportError:
        return None
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
