"""Object-store listings a service hands to its pipeline actors and CPU helpers, kept in Ray's GCS
key-value store under the service's name (compressed: a million keys take a few MB): the service
lists a bucket once, its actors install the listing before they build the pipeline
(:mod:`raypipe.storage.listings`)."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Hashable
from typing import Any

from raypipe.storage import listings

from . import service_kv

PART = "listings"


def publish(service: str, found: dict[Hashable, Any]) -> None:
    """Record ``found`` for ``service``'s actors (nothing when empty, clearing an older record)."""
    if not found:
        service_kv.delete(service, PART)
        return
    blob = zlib.compress(pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL), 1)
    service_kv.put(service, PART, blob)


def install(service: str) -> None:
    """Use the listings ``service`` recorded, if any, in this process (none outside a Ray cluster:
    a helper built in a plain process lists for itself)."""
    if not service_kv.connected():
        return
    blob = service_kv.get(service, PART)
    if blob is not None:
        listings.install(pickle.loads(zlib.decompress(blob)))
