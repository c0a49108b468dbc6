"""A rank's transport to its pipeline actor: batch requests out, batches in.

A request travels over the actor's socket (:mod:`actors.request_channel`) when this process can
map the actor's shared memory and reach its socket, else as a Ray call. A batch's outputs arrive
as host arrays in the object store, as descriptors of the actor's shared-memory segments
(:mod:`actors.host_ring`), or as CUDA IPC handles into the actor's device ring
(:mod:`actors.cuda_ipc`) when the rank trains on the actor's GPU; :meth:`BatchClient.unpack`
makes arrays of all three and hands each segment and ring slot back once the rank is done with
it. Which transport is in use, and why not a faster one, is in ``host_transport`` and
``request_transport``. Nothing here knows about epochs beyond the request it sends: positions,
acknowledgements and the training-facing iterator live in :mod:`cluster.loader`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from actors import host_ring, ragged, request_channel
from actors.cuda_ipc import CopiedReleases, Importer, IpcArray
from actors.protocol import BatchReply, BatchRequest, RaggedArray
from raypipe.errors import RaypipeError

#: How long an abandoned iteration waits for its requests in flight (see :meth:`BatchClient.settle`).
SETTLE_TIMEOUT_S = 10.0
#: ``RAYPIPE_HOST_RING=0`` in a rank's environment keeps its host batches in the object store.
HOST_RING_ENV = "RAYPIPE_HOST_RING"
#: ``RAYPIPE_REQUEST_SOCKET=0`` keeps a rank's batch requests on Ray.
REQUEST_SOCKET_ENV = "RAYPIPE_REQUEST_SOCKET"


@dataclass(frozen=True)
class Pending:
    """A batch request in flight: as a Ray call (``ref``), or over the actor's socket (``socket``
    and the request's sequence number there; sent again through Ray if the socket breaks before
    the reply)."""

    request: BatchRequest
    ref: ray.ObjectRef | None = None
    socket: request_channel.RequestClient | None = None
    seq: int = -1


class BatchClient:
    """Sends one rank's batch requests to its pipeline actor ``actor`` and receives the batches.

    ``gpu_uuid`` and ``cuda_index``: the rank's GPU when its batches may come by CUDA IPC (None:
    host batches only); ``rank_slots``: how many batches the rank may hold at once (prefetch + 1);
    ``label`` names the rank in errors ("rank 0 of 'svc'")."""

    def __init__(
        self,
        actor: Any,
        label: str,
        rank_slots: int,
        gpu_uuid: bytes | None = None,
        cuda_index: int | None = None,
    ):
        self._actor = actor
        self._label = label
        self._rank_slots = rank_slots
        self._gpu_uuid = gpu_uuid
        self._cuda_index = cuda_index
        self._importer = Importer() if gpu_uuid is not None else None
        self._ipc_releases = (
            CopiedReleases(lambda key: self._actor.release.remote(key)) if self._importer is not None else None
        )
        self._host = host_ring.Importer() if os.environ.get(HOST_RING_ENV, "1") != "0" else None
        self._host_exporter: str | None = None  # the actor's host exporter, once checked
        self.host_transport = "object store" if self._host is not None else f"object store ({HOST_RING_ENV}=0)"
        self._requests: request_channel.RequestClient | None = None
        self.request_transport = "ray"

    @property
    def maps_host_memory(self) -> bool:
        """Whether host batches come through the actor's shared memory (not the object store)."""
        return self._host_exporter is not None

    def request(self, epoch: int, start: int, index: int) -> Pending:
        """Ask for batch ``index`` of ``epoch`` (begun at ``start``), handing back the shared-memory
        batches this rank no longer uses."""
        exporter = self._host_exporter
        released = self._host.released(exporter) if exporter is not None else []
        request = BatchRequest(epoch, start, index, self._gpu_uuid, self._rank_slots, exporter, tuple(released))
        if self._requests is not None:
            try:
                return Pending(request, socket=self._requests, seq=self._requests.send((request,)))
            except OSError as exc:
                self._lose_requests(exc)
        return Pending(request, ref=self._actor.get_batch.remote(request))

    def receive(self, pending: Pending) -> BatchReply:
        """The reply to ``pending``; a request lost with the actor's socket is asked again through
        Ray, and a channel the reply offers (a restarted actor's) is taken."""
        reply = self._wait(pending)
        self.offer(reply.host_channel, reply.requests)
        return reply

    def _wait(self, pending: Pending) -> BatchReply:
        request, ref = pending.request, pending.ref
        if pending.socket is not None:
            try:
                return pending.socket.receive(pending.seq)
            except (OSError, EOFError) as exc:  # the actor died: ask again through Ray
                if pending.socket is self._requests:
                    self._lose_requests(exc)
                ref = self._actor.get_batch.remote(request)
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, RaypipeError):
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            raise RaypipeError(
                f"loader: the pipeline actor serving {self._label} is gone at epoch {request.epoch}, "
                f"batch {request.index} ({type(exc).__name__}); resume from state_dict() once the service is back"
            ) from exc

    def unpack(self, reply: BatchReply) -> list[Any]:
        """``reply``'s outputs as arrays: host batches as numpy arrays (read-only views of the
        actor's shared memory where they came that way), a ragged output as a list of per-sample
        numpy arrays (views of its packed array), CUDA IPC batches as torch tensors on the
        rank's GPU, copied out of the actor's ring (whose slots go back once the copies are done)."""
        arrays = [self._array(a) for a in reply.outputs]
        if any(isinstance(a, IpcArray) for a in reply.outputs):
            self._ipc_releases.add((reply.epoch, reply.index), self._importer.last_copy)
        return arrays

    def _array(self, output: np.ndarray | IpcArray | host_ring.HostArray | RaggedArray) -> Any:
        if isinstance(output, RaggedArray):
            return ragged.split(self._array(output.flat), output.shapes)
        if isinstance(output, IpcArray):
            return self._importer.to_torch(output, self._cuda_index)
        if isinstance(output, host_ring.HostArray):
            return self._host.to_array(output)
        return output

    def offer(self, channel: dict[str, Any] | None, requests: dict[str, str] | None) -> None:
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
        self.close()
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
        self.close()
        self.request_transport = f"ray (the actor's socket broke: {exc or type(exc).__name__})"

    def begin_pass(self) -> None:
        """A new pass over the rank's batches abandons those in flight: every IPC ring slot is
        free (ordered after the rank's earlier requests, so no slot it copies is reused)."""
        if self._importer is not None:
            self._actor.release_all.remote()

    def release_copied(self) -> None:
        """Hand back the ring slots of every batch received so far, once their copies are done."""
        if self._ipc_releases is not None:
            self._ipc_releases.flush()

    def settle(self, pending: list[Pending]) -> None:
        """Wait (a bounded time) for the requests an abandoned iteration left in flight, so that a
        service shut down right after a ``break`` does not kill its actors mid-request (Ray then
        logs each as a failed task it will retry), and the socket's next reply is the next
        request's."""
        if self._requests is not None:
            self._requests.drain(SETTLE_TIMEOUT_S)
        refs = [p.ref for p in pending if p.ref is not None]
        if not refs:
            return
        try:
            ray.wait(refs, num_returns=len(refs), timeout=SETTLE_TIMEOUT_S)
        except Exception:  # Ray is shutting down too: nothing left to settle
            pass

    def close(self) -> None:
        """Close the socket to the actor, if open (requests then go through Ray)."""
        if self._requests is not None:
            self._requests.close()
            self._requests = None
