"""What happens to an epoch's incomplete last batch: one vocabulary and one batch count.

The service (``last_batch="pad"``), the readers (``pad_last_batch``) and the framework
iterators (DALI's ``LastBatchPolicy.FILL``) all speak of the same three policies:

* ``PAD`` (DALI: ``FILL``): the last batch is topped up with padding entries, reported
  as such; every batch is full.
* ``DROP``: the incomplete last batch is not yielded.
* ``PARTIAL``: the last batch is shorter.
"""

from __future__ import annotations

import enum
import math
from typing import Any

from .errors import ArgumentError


class LastBatchPolicy(enum.Enum):
    """The last-batch policy. ``FILL`` is DALI's name for ``PAD`` (the same member);
    strings ``"pad"``, ``"fill"``, ``"drop"`` and ``"partial"`` (any case) parse to it."""

    PAD = "pad"
    FILL = "pad"
    DROP = "drop"
    PARTIAL = "partial"

    @classmethod
    def parse(cls, value: Any, what: str = "last_batch") -> LastBatchPolicy:
        """The policy named by ``value``; ArgumentError naming ``what`` otherwise."""
        if isinstance(value, cls):
            return value
        name = value.lower() if isinstance(value, str) else value
        if name == "fill":
            return cls.PAD
        try:
            return cls(name)
        except ValueError:
            raise ArgumentError(
                f"{what} must be one of 'pad' (DALI: 'fill'), 'drop', 'partial' or a LastBatchPolicy, got {value!r}"
            ) from None


POLICY_NAMES = ("pad", "fill", "drop", "partial")


def num_batches(samples: int, batch_size: int, policy: LastBatchPolicy | str) -> int:
    """Batches that ``samples`` samples make under ``policy``: every caller counts with this.

    ``DROP`` keeps whole batches only; ``PAD`` and ``PARTIAL`` keep the remainder as one
    more (topped-up or shorter) batch."""
    if samples <= 0:
        return 0
    if LastBatchPolicy.parse(policy) is LastBatchPolicy.DROP:
        return samples // batch_size
    return math.ceil(samples / batch_size)
