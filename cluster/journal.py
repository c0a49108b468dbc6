"""Where a coordinator keeps the state it must not lose: Ray's GCS key-value store.

The GCS outlives every actor of the cluster (Ray Serve's controller recovers from it
the same way), so a coordinator that Ray restarts on any node reads back what it
had written. One key per service, rewritten whole on every journaled change: the
state is a few numbers per rank and changes rarely (attachments, skipped samples).
"""

from __future__ import annotations

import json
from typing import Any

from ray.experimental import internal_kv

from .naming import NAMESPACE


def _key(service: str) -> bytes:
    return f"raypipe/{service}/coordinator".encode()


def save(service: str, snapshot: dict[str, Any]) -> None:
    """Replace the service's journaled state with ``snapshot`` (JSON-serialisable)."""
    internal_kv._internal_kv_put(_key(service), json.dumps(snapshot).encode(), overwrite=True, namespace=NAMESPACE)


def load(service: str) -> dict[str, Any] | None:
    """The service's last journaled state, or None if it has none."""
    blob = internal_kv._internal_kv_get(_key(service), namespace=NAMESPACE)
    return None if blob is None else json.loads(blob)


def clear(service: str) -> None:
    """Forget the service's state (at shutdown)."""
    internal_kv._internal_kv_del(_key(service), namespace=NAMESPACE)
