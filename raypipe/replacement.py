"""How a service keeps a batch whole when ``on_error="skip"`` drops some of its samples.

Data-parallel ranks need equal batch counts and equal batch shapes, so a skipped
sample is not simply left out: its slot is filled with a copy of a kept sample of
the same batch, flagged as padding. Which sample fills which slot is a pure function
of the planned batch and the skipped sample indices, so a replay, a restarted actor
or a resumed rank fills it the same way; the real (non-padding) samples of an epoch
are exactly its good samples, whatever the world size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .batch_spec import BatchSpec
from .errors import SampleError


def fill_skipped(
    spec: BatchSpec, skipped: Iterable[int], sources: Iterable[str] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the planned batch ``spec`` whose samples ``skipped`` were dropped:
    ``(rows, sample_indices, is_pad)``, where ``rows[j]`` is the row of the kept (shorter)
    batch that fills slot ``j``. Raises SampleError when every sample was skipped."""
    planned = np.asarray(spec.sample_indices, dtype=np.int64)
    is_pad = np.arange(len(planned)) >= spec.num_real
    bad = np.isin(planned, np.fromiter(skipped, dtype=np.int64))
    kept = np.flatnonzero(~bad)
    if len(kept) == 0:
        files = ", ".join(sorted(set(sources))) or "unknown files"
        raise SampleError(
            f"every sample of batch {spec.index} of epoch {spec.epoch} was skipped ({files}): "
            "nothing is left to fill the batch with"
        )
    rows = np.empty(len(planned), dtype=np.int64)
    rows[kept] = np.arange(len(kept))
    holes = np.flatnonzero(bad)
    rows[holes] = np.arange(len(holes)) % len(kept)
    return rows, planned[kept][rows], is_pad | bad


@dataclass(frozen=True)
class Replacement:
    """:func:`fill_skipped` for a batch being made: slot ``j`` holds row ``rows[j]`` of the kept
    samples, the one computed at batch position ``sources[j]``; ``sample_indices`` and ``is_pad``
    of the whole batch (replacements flagged as padding)."""

    rows: list[int]
    sources: list[int]
    sample_indices: list[int]
    is_pad: list[bool]


def replacement(
    spec: BatchSpec, kept: Sequence[int], skipped: Iterable[int], sources: Iterable[str] = ()
) -> Replacement:
    """How the batch ``spec`` whose samples ``skipped`` were dropped, leaving the samples at batch
    positions ``kept``, is made whole (raises as :func:`fill_skipped` does)."""
    rows, samples, is_pad = fill_skipped(spec, skipped, sources)
    order = rows.tolist()
    return Replacement(order, [kept[r] for r in order], samples.tolist(), is_pad.tolist())
