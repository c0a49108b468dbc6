"""The one position contract: ``state_dict()`` / ``load_state_dict(state)`` everywhere.

A pipeline, a framework iterator, a rank loader and a pipeline actor all describe where
they are with the same small plain dict:

``{"format": 1, "fingerprint": ..., "epoch": e, "offset": s, <order fields>, <info>}``

``offset`` counts the samples of epoch ``e``'s order already consumed (for a service,
by all ranks together: a stream position, so it resumes into any world size). The
order fields are what that order depends on (dataset length and digest, seed,
shuffling, batch size, ...); ``fingerprint`` hashes them. Loading a state whose
fingerprint differs is an error naming every differing field, unless ``strict=False``.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from typing import Any

from .errors import ArgumentError

STATE_FORMAT = 1


def fingerprint(order: Mapping[str, Any]) -> str:
    """A short stable hash of the fields an order depends on."""
    blob = json.dumps(dict(order), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_state(order: Mapping[str, Any], epoch: int, offset: int, **info: Any) -> dict[str, Any]:
    """The state dict at (``epoch``, ``offset``) of the order described by ``order``."""
    return {
        "format": STATE_FORMAT,
        "fingerprint": fingerprint(order),
        "epoch": int(epoch),
        "offset": int(offset),
        **dict(order),
        **info,
    }


def read_state(state: Any, order: Mapping[str, Any], *, owner: str, strict: bool = True) -> tuple[int, int]:
    """(epoch, offset) of ``state`` after checking it belongs to ``order``.

    Raises ArgumentError naming ``owner`` and every differing field when the state comes
    from another dataset, seed, shuffle or batching; ``strict=False`` warns instead."""
    if not isinstance(state, Mapping):
        raise ArgumentError(f"{owner}: a state must be a dict from state_dict(), got {type(state).__name__}")
    missing = [k for k in ("format", "fingerprint", "epoch", "offset") if k not in state]
    if missing:
        raise ArgumentError(f"{owner}: not a raypipe state dict (missing {missing}); use state_dict() to make one")
    if state["format"] != STATE_FORMAT:
        raise ArgumentError(f"{owner}: state format {state['format']!r} is not the supported {STATE_FORMAT}")
    epoch, offset = state["epoch"], state["offset"]
    for key, value in (("epoch", epoch), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ArgumentError(f"{owner}: state {key} must be a non-negative int, got {value!r}")
    if state["fingerprint"] != fingerprint(order):
        differ = [f"{k}={state.get(k, '<absent>')!r} (here {v!r})" for k, v in order.items() if state.get(k) != v]
        message = (
            f"{owner}: the state was saved for another order: {', '.join(differ) or 'fingerprint differs'}; "
            "pass strict=False to load it anyway"
        )
        if strict:
            raise ArgumentError(message)
        warnings.warn(message.replace("; pass strict=False to load it anyway", ""), stacklevel=3)
    return epoch, offset
