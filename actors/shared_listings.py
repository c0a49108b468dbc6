"""Object-store listings a service hands to its pipeline actors and CPU helpers, kept in Ray's GCS
key-value store under the service's name (compressed: a million keys take a few MB): the service
lists a bucket once, its actors install the listing before they build the pipeline
(:mod:`raypipe.storage.listings`)."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Hashable
from typing import Any

from ray.experimental import internal_kv

from raypipe.storage import listings

NAMESPACE = "raypipe"


def _key(service: str) -> bytes:
    return f"raypipe/{service}/listings".encode()


def publish(service: str, found: dict[Hashable, Any]) -> None:
    """Record ``found`` for ``service``'s actors (nothing when empty, clearing an older record)."""
    if not found:
        clear(service)
        return
    blob = zlib.compress(pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL), 1)
    internal_kv._internal_kv_put(_key(service), blob, overwrite=True, namespace=NAMESPACE)


def install(service: str) -> None:
    """Use the listings ``service`` recorded, if any, in this process (none outside a Ray cluster:
    a helper built in a plain process lists for itself)."""
    if not internal_kv._internal_kv_initialized():
        return
    blob = internal_kv._internal_kv_get(_key(service), namespace=NAMESPACE)
    if blob is not None:
        listings.install(pickle.loads(zlib.decompress(blob)))


def clear(service: str) -> None:
    """Forget ``service``'s listings (at shutdown)."""
    internal_kv._internal_kv_del(_key(service), namespace=NAMESPACE)
