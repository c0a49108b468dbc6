"""The pipeline a service serves (its function and keyword arguments), kept in Ray's GCS key-value
store under the service's name: its pipeline actors and CPU helpers read it there when they start
(and when Ray restarts them) instead of taking it as constructor arguments.

Ray keeps constructor arguments over 100 KB in the object store, owned by the process that starts
the actor, and logs an error for each such actor that a restart fails once they are lost; the
keyword arguments can be that large (a ``files`` list of a million paths pickles to about 100 MB).
Kept apart from the service's record (:mod:`cluster.service_record`), they also leave that record
small for every loader to read. Compressed: such a list of paths shrinks 25 times (96 to 4 MB, in
0.16 s each way), and every actor and helper fetches it from the GCS."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from ray import cloudpickle

from raypipe.errors import RaypipeError

from . import service_kv

PART = "pipeline"


def publish(service: str, pipeline: Callable, kwargs: dict[str, Any]) -> None:
    """Record ``pipeline`` and its keyword arguments for ``service``'s actors."""
    blob = zlib.compress(cloudpickle.dumps((pipeline, kwargs)), 1)
    service_kv.put(service, PART, blob)


def load(service: str) -> tuple[Callable, dict[str, Any]]:
    """``(pipeline, kwargs)`` of ``service``; RaypipeError when it recorded none (it was shut down)."""
    blob = service_kv.get(service, PART)
    if blob is None:
        raise RaypipeError(f"service {service!r} has no pipeline on record: it was shut down")
    return cloudpickle.loads(zlib.decompress(blob))
