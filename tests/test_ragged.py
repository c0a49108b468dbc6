"""Ragged batches padded into one array with their shapes (``rp.loader(pad_ragged=True)``)."""

from __future__ import annotations

import numpy as np

from raypipe.ragged import pad_to_largest, sample_shapes


def test_pad_to_the_largest_extent_per_axis_with_the_shapes():
    samples = [np.ones((2, 3), np.int16), np.full((3, 1), 5, np.int16)]
    padded, shapes = pad_to_largest(samples)
    assert padded.dtype == np.int16 and padded.shape == (2, 3, 3)
    assert padded[0].tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 0]]
    assert padded[1].tolist() == [[5, 0, 0], [5, 0, 0], [5, 0, 0]]
    assert shapes.tolist() == [[2, 3], [3, 1]] and shapes.dtype == np.int64


def test_fill_value_and_scalars():
    padded, shapes = pad_to_largest([np.array([7], np.uint8), np.array([1, 2], np.uint8)], fill=32)
    assert padded.tolist() == [[7, 32], [1, 2]] and shapes.tolist() == [[1], [2]]
    assert sample_shapes([np.float32(1), np.float32(2)]).shape == (2, 0)
