"""Several readers in one pipeline, read in step.

DALI lets a pipeline hold several readers; readers of datasets of one length with the same order
arguments (sharding, shuffling, padding, seed) give the same sample index at every batch position,
which is how ported pipelines read images and masks from parallel file lists. Here the first reader
(in graph order) decides the order and every reader reads the index it gives; readers that would
not stay in step are refused when the pipeline is built, naming both and the value that differs."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .errors import PipelineDefinitionError
from .graph import OpNode


def check_aligned(readers: Sequence[OpNode]) -> None:
    """Raise unless every reader (prepared) has the first one's length and order arguments."""
    if len(readers) < 2:
        return
    first = readers[0]
    wanted = {"dataset length": len(first.op), **first.op.order_arguments()}
    for other in readers[1:]:
        found = {"dataset length": len(other.op), **other.op.order_arguments()}
        for key in dict.fromkeys([*wanted, *found]):
            if wanted.get(key) != found.get(key):
                raise PipelineDefinitionError(
                    f"readers {first.label} and {other.label} cannot read in step: {key} is {wanted.get(key)!r} in "
                    f"{first.label} but {found.get(key)!r} in {other.label}; a pipeline may hold several readers only "
                    "over datasets of one length with the same order arguments (as DALI then keeps them aligned)"
                )


def combined_digest(readers: Sequence[OpNode]) -> str:
    """What identifies the data of all ``readers``: the reader's own digest when there is one, else a
    hash of every reader's digest in graph order (another dataset behind any reader changes it)."""
    digests = [r.op.digest() for r in readers]
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("|".join(digests).encode()).hexdigest()[:16]
