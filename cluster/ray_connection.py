"""Joining the Ray cluster a service lives on, failing in seconds where Ray would wait.

``ray.init`` given the address of a head that no longer answers (``RAY_ADDRESS``, or the address
file that ``ray start`` leaves in Ray's temporary folder when its head dies without ``ray stop``)
retries for as long as the process lives, printing one warning every 30 s. raypipe's entry
points (``rp.serve``, ``rp.loader``, ``raypipe stats``/``doctor``) first open one TCP connection
to that address and fail at once, naming the address and where it came from."""

from __future__ import annotations

import os
import socket
from typing import Any

import ray

from raypipe.errors import RaypipeError

#: seconds to wait for the head's port to accept a connection
REACH_TIMEOUT_S = 5.0


def init_ray(address: str | None, **init_args: Any) -> None:
    """``ray.init(address, **init_args)`` unless Ray is initialized; RaypipeError, before Ray
    starts waiting, when the cluster the address resolves to does not answer or none is found."""
    if ray.is_initialized():
        return
    target = _bootstrap_address(address)
    if target is not None:
        _check_reachable(target, _where_from(address))
    try:
        ray.init(address=address, **init_args)
    except ConnectionError as exc:  # the port answered, but not as a Ray head
        at = target or address or "the local address"
        raise RaypipeError(f"cannot join the Ray cluster at {at} ({_where_from(address)}): {exc}") from None


def _bootstrap_address(address: str | None) -> str | None:
    """The ``host:port`` ``ray.init(address)`` will connect to, as Ray resolves it (``RAY_ADDRESS``
    first, then the address file); None where it starts a local instance, uses Ray Client, or the
    resolution (Ray's own, internal) is not available."""
    given = os.environ.get("RAY_ADDRESS") or address
    if given is not None and given.startswith("ray://"):
        return None  # Ray Client has timeouts of its own
    try:
        from ray._private import services  # Ray's resolver, the one ray.init uses
    except ImportError:
        return None
    try:
        return services.canonicalize_bootstrap_address(address)
    except ConnectionError:
        raise RaypipeError(
            "no Ray cluster to connect to: RAY_ADDRESS is unset and no cluster started with `ray start` "
            "runs on this machine (start one with `ray start --head`, or set RAY_ADDRESS to a running head)"
        ) from None
    except Exception:  # an internal API that changed: leave the connecting to ray.init
        return None


def _where_from(address: str | None) -> str:
    if os.environ.get("RAY_ADDRESS"):
        return "RAY_ADDRESS"
    if address not in (None, "auto"):
        return "the address given"
    try:
        from ray._common.utils import get_ray_address_file

        file = get_ray_address_file(None)
    except ImportError:
        file = "ray_current_cluster in Ray's temporary folder"
    return (
        f"read from {file}, which `ray start` wrote; if that head is gone, `ray stop --force` "
        "removes the file, and RAY_ADDRESS=local starts a fresh local instance"
    )


def _check_reachable(target: str, where_from: str) -> None:
    """RaypipeError naming ``target`` unless its port accepts a connection within the timeout."""
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        timed_out = isinstance(exc, TimeoutError)
        why = f"no answer within {REACH_TIMEOUT_S:.0f} s" if timed_out else getattr(exc, "strerror", None) or exc
        raise RaypipeError(f"cannot reach the Ray cluster's head at {target} ({where_from}): {why}") from None
