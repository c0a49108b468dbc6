"""The Ray object store that host batches cross: how full it is, what Ray has spilled, and
whether a rank's prefetch fits its node's store.

A pipeline actor returns each host batch through its node's shared-memory store, and the rank
maps it without a copy. A batch waiting in the store is a primary copy that Ray may spill to
disk when the store fills; reading it back (a restore) costs a disk write and read of the
whole batch. A rank keeps at most ``prefetch`` batches waiting and one in the training step,
and every rank on a node shares the node's store, so spilling in a normal epoch is avoided by
keeping ``(prefetch + 1) x batch bytes x ranks on the node`` well inside the store:
:func:`spill_risk` says when it is not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import ray

#: The share of a node's object store that a node's ranks may fill with batches before the
#: loader warns: other objects (Ray's own, the trainer's) need the rest.
SAFE_SHARE = 0.5


class ObjectStoreWarning(UserWarning):
    """A rank's batches in flight may not fit its node's object store: Ray would spill them."""


@dataclass(frozen=True)
class StoreUsage:
    """The cluster's object stores together: bytes in use and in all, and what Ray has spilled to
    disk and restored since the cluster started (Ray's own counters, every user's objects)."""

    used_bytes: int
    capacity_bytes: int
    spilled_bytes: int
    spilled_objects: int
    restored_bytes: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def usage() -> StoreUsage:
    """The object stores of the cluster this process is connected to, as Ray reports them.

    Any raylet gathers the counters of every node (Ray's ``FormatGlobalMemoryInfo``, what
    ``ray memory`` calls). The raylet is found through this process's own Ray connection and the
    channel is closed on return: a fresh GCS client per call would leave native threads behind
    that crash the interpreter at exit."""
    from ray._common.network_utils import build_address
    from ray._private.grpc_utils import init_grpc_channel
    from ray._private.internal_api import MAX_MESSAGE_LENGTH
    from ray.core.generated import node_manager_pb2, node_manager_pb2_grpc

    raylet = next((node for node in ray.nodes() if node.get("Alive")), None)
    if raylet is None:
        raise RuntimeError("Ray lists no live node to ask for the object store's use")
    options = [
        ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
        ("grpc.max_receive_message_length", MAX_MESSAGE_LENGTH),
    ]
    with init_grpc_channel(build_address(raylet["NodeManagerAddress"], raylet["NodeManagerPort"]), options) as channel:
        request = node_manager_pb2.FormatGlobalMemoryInfoRequest(include_memory_info=False)
        reply = node_manager_pb2_grpc.NodeManagerServiceStub(channel).FormatGlobalMemoryInfo(request, timeout=60.0)
    stats = reply.store_stats
    return StoreUsage(
        used_bytes=int(stats.object_store_bytes_used),
        capacity_bytes=int(stats.object_store_bytes_avail),
        spilled_bytes=int(stats.spilled_bytes_total),
        spilled_objects=int(stats.spilled_objects_total),
        restored_bytes=int(stats.restored_bytes_total),
    )


def node_store(node_id: str) -> tuple[int, int]:
    """``(object store bytes, GPUs)`` of the node ``node_id`` (0, 0 when Ray does not list it)."""
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("Alive", True):
            resources: dict[str, Any] = node.get("Resources", {})
            return int(resources.get("object_store_memory", 0)), int(resources.get("GPU", 0))
    return 0, 0


def spill_risk(batch_bytes: int, prefetch: int, node_ranks: int, store_bytes: int) -> str | None:
    """Why ``node_ranks`` ranks each holding ``prefetch`` waiting batches and one in training, of
    ``batch_bytes`` each, may make Ray spill batches of a node store of ``store_bytes``; None
    when they fit in :data:`SAFE_SHARE` of it (or nothing crosses the store)."""
    if batch_bytes <= 0 or store_bytes <= 0:
        return None
    in_flight = (prefetch + 1) * batch_bytes * node_ranks
    if in_flight <= SAFE_SHARE * store_bytes:
        return None
    return (
        f"{prefetch + 1} batches per rank (prefetch={prefetch} waiting, one in training) x {_mib(batch_bytes)} "
        f"x {node_ranks} rank(s) on the node = {_mib(in_flight)}, more than {SAFE_SHARE:.0%} of the node's "
        f"{_mib(store_bytes)} object store: Ray would spill batches to disk and read them back. Lower prefetch, "
        "ship fewer bytes (dtype=types.UINT8 or FLOAT16, with rp.Normalize on the rank) or give the node a larger "
        "store (ray start --object-store-memory)"
    )


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"
