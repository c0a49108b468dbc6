"""Listings of object-store folders handed from a service to its actors: listing a bucket of a
million objects takes minutes, so a service lists it once (when it builds its pipeline to check
it) and its pipeline actors and CPU helpers use that listing instead of listing again (and check
its digest as they check any reader's).

A listing is keyed by what was listed (the URL and the arguments that filter it). A reader lists
through :func:`listed`, which returns the listing given to this process under that key, or lists;
a reader that listed a URL says so with ``shared_listing()``, which :func:`of_pipeline` collects."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

_GIVEN: dict[Hashable, Any] = {}
_LOCK = threading.Lock()


def listed(key: Hashable, make: Callable[[], Any]) -> Any:
    """The listing given to this process under ``key``, else ``make()``'s (listed now)."""
    with _LOCK:
        found = _GIVEN.get(key)
    return make() if found is None else found


def install(listings: dict[Hashable, Any]) -> None:
    """Use ``listings`` (made by another process) instead of listing again."""
    with _LOCK:
        _GIVEN.update(listings)


def forget() -> None:
    """Drop every listing given to this process."""
    with _LOCK:
        _GIVEN.clear()


def of_pipeline(pipe: Any) -> dict[Hashable, Any]:
    """The object-store listings the readers of the built pipeline ``pipe`` made, by key."""
    found = {}
    for node in pipe.engine.staged.readers:
        share = getattr(node.op, "shared_listing", None)
        item = share() if share is not None else None
        if item is not None:
            found[item[0]] = item[1]
    return found
