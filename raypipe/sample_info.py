"""What an external source's callback is told about the data it is asked for: DALI's
``types.SampleInfo`` (a per-sample callback, ``batch=False``) and ``types.BatchInfo`` (a batch
callback with ``batch_info=True``), with DALI's attribute names and positional order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SampleInfo:
    """The sample requested: its index in the epoch and in its batch, the batch's index in the
    epoch (``iteration``) and the epoch's (``epoch_idx``), all 0-based."""

    idx_in_epoch: int
    idx_in_batch: int
    iteration: int
    epoch_idx: int


@dataclass(frozen=True)
class BatchInfo:
    """The batch requested: its index in the epoch (``iteration``) and the epoch's, 0-based."""

    iteration: int
    epoch_idx: int
