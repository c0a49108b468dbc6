"""The coordinator's record: one JSON value per service in Ray's GCS key-value store.

The GCS outlives every actor of the cluster (Ray Serve's controller recovers from it the same
way), so a coordinator that Ray restarts on any node reads back what it had written. The record
(:meth:`cluster.coordinator_state.CoordinatorState.to_record`) is rewritten whole on every
change to it: it is a few numbers per rank and changes rarely (attachments, skipped samples,
helpers).
"""

from __future__ import annotations

import json
from typing import Any

from ray.experimental import internal_kv

from .naming import NAMESPACE


def _key(service: str) -> bytes:
    return f"raypipe/{service}/coordinator".encode()


def save(service: str, record: dict[str, Any]) -> None:
    """Replace the service's coordinator record with ``record`` (JSON-serialisable)."""
    internal_kv._internal_kv_put(_key(service), json.dumps(record).encode(), overwrite=True, namespace=NAMESPACE)


def load(service: str) -> dict[str, Any] | None:
    """The service's last coordinator record, or None if it has none."""
    blob = internal_kv._internal_kv_get(_key(service), namespace=NAMESPACE)
    return None if blob is None else json.loads(blob)


def clear(service: str) -> None:
    """Forget the service's coordinator record (at shutdown)."""
    internal_kv._internal_kv_del(_key(service), namespace=NAMESPACE)
