"""NumPy aliases that numba-cuda registers at its first compile are put back where NumPy dropped them."""

from __future__ import annotations

import numpy as np

from raypipe.kernels import numpy_aliases


def test_a_missing_alias_is_restored_as_the_same_function_and_a_present_one_left_alone(monkeypatch):
    if hasattr(np, "row_stack"):
        monkeypatch.delattr(np, "row_stack")
    assert numpy_aliases.restore() == ["row_stack"]
    assert np.row_stack is np.vstack
    assert numpy_aliases.restore() == [], "a second call adds nothing"
    stacked = np.row_stack([np.arange(3), np.arange(3, 6)])
    np.testing.assert_array_equal(stacked, np.arange(6).reshape(2, 3))
