"""How a service keeps a batch whole when ``on_error="skip"`` drops some of its samples.

Data-parallel ranks need equal batch counts and equal batch shapes, so a skipped
sample is not simply left out: its slot is filled with a copy of a kept sample of
the same batch, flagged as padding. Which sample fills which slot is a pure function
of the planned batch and the skipped sample indices, so a replay, a restarted actor
or a resumed rank fills it the same way; the real (non-padding) samples of an epoch
are exactly its good samples, whatever the world size.
"""

from __future__ import annotations

from collections.abc import Iterable

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
