"""A service's entries in Ray's GCS key-value store: one value per part (its record, its
coordinator's record, its pipeline, its object-store listings), under ``raypipe/<service>/<part>``.

The GCS outlives every actor of the cluster, so a pipeline actor, CPU helper or coordinator that Ray
restarts reads back what the service wrote, and any process on the cluster (a rank's loader,
``raypipe stats``) can read it too. Service names hold no ``/`` (``rp.serve`` checks), so a
service's entries are exactly the keys under its prefix, and shutdown forgets them all at once."""

from __future__ import annotations

from ray.experimental import internal_kv

#: The namespace of every raypipe entry (the one its actors are registered in).
NAMESPACE = "raypipe"


def _prefix(service: str) -> bytes:
    return f"raypipe/{service}/".encode()


def put(service: str, part: str, value: bytes) -> None:
    """Store ``value`` as ``service``'s ``part``, replacing what was there."""
    internal_kv._internal_kv_put(_prefix(service) + part.encode(), value, overwrite=True, namespace=NAMESPACE)


def get(service: str, part: str) -> bytes | None:
    """``service``'s ``part``, or None when it has none."""
    return internal_kv._internal_kv_get(_prefix(service) + part.encode(), namespace=NAMESPACE)


def delete(service: str, part: str) -> None:
    """Forget ``service``'s ``part``."""
    internal_kv._internal_kv_del(_prefix(service) + part.encode(), namespace=NAMESPACE)


def forget(service: str) -> None:
    """Forget every entry of ``service`` (at shutdown)."""
    internal_kv._internal_kv_del(_prefix(service), del_by_prefix=True, namespace=NAMESPACE)


def connected() -> bool:
    """Whether this process reaches a GCS (it is connected to a Ray cluster)."""
    return internal_kv._internal_kv_initialized()
