"""Skipped samples are replaced by copies of kept ones, flagged as padding, deterministically."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.batch_spec import BatchSpec
from raypipe.errors import SampleError
from raypipe.replacement import Replacement, fill_skipped, replacement


def test_holes_are_filled_with_kept_rows_and_flagged_as_padding():
    spec = BatchSpec(3, 1, np.array([10, 11, 12, 13, 10]), num_pad=1)
    rows, samples, is_pad = fill_skipped(spec, [11, 13])
    assert rows.tolist() == [0, 0, 1, 1, 2], "kept rows keep their order; holes take kept rows in turn"
    assert samples.tolist() == [10, 10, 12, 12, 10]
    assert is_pad.tolist() == [False, True, False, True, True], "replacements and the reader's padding"
    again = fill_skipped(spec, [13, 11])
    assert all(np.array_equal(a, b) for a, b in zip(again, (rows, samples, is_pad))), "a pure function"


def test_nothing_skipped_changes_nothing():
    spec = BatchSpec(0, 0, np.array([4, 5, 6]))
    rows, samples, is_pad = fill_skipped(spec, [])
    assert rows.tolist() == [0, 1, 2] and samples.tolist() == [4, 5, 6] and not is_pad.any()


def test_a_batch_with_nothing_left_names_the_files():
    spec = BatchSpec(2, 7, np.array([1, 2]))
    with pytest.raises(SampleError, match=r"every sample of batch 7 of epoch 2 was skipped \(a.jpg, b.jpg\)"):
        fill_skipped(spec, [1, 2], ["b.jpg", "a.jpg"])


def test_a_replacement_names_the_batch_position_each_slot_is_copied_from():
    spec = BatchSpec(3, 1, np.array([10, 11, 12, 13, 10]), num_pad=1)
    made = replacement(spec, [0, 2, 4], [11, 13])  # the kept samples were computed at positions 0, 2, 4
    rows, samples, is_pad = fill_skipped(spec, [11, 13])
    assert made == Replacement(rows.tolist(), [0, 0, 2, 2, 4], samples.tolist(), is_pad.tolist())
