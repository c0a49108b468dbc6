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

from actors import service_kv

PART = "coordinator"


def save(service: str, record: dict[str, Any]) -> None:
    """Replace the service's coordinator record with ``record`` (JSON-serialisable)."""
    service_kv.put(service, PART, json.dumps(record).encode())


def load(service: str) -> dict[str, Any] | None:
    """The service's last coordinator record, or None if it has none."""
    blob = service_kv.get(service, PART)
    return None if blob is None else json.loads(blob)
