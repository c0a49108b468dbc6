"""``reductions.min`` and ``reductions.max`` against DALI 2.4's CPU build where installed: every
axis, given axes, axis names and ``keep_dims``, on volumes of several types."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn

RNG = np.random.default_rng(9)
SAMPLES = {
    "float32": [RNG.normal(size=(2, 5, 6, 7)).astype(np.float32), RNG.normal(size=(2, 4, 8, 3)).astype(np.float32)],
    "uint8": [RNG.integers(0, 255, (2, 5, 6, 7)).astype(np.uint8), RNG.integers(0, 255, (2, 4, 8, 3)).astype(np.uint8)],
    "int16": [
        RNG.integers(-999, 999, (2, 5, 6, 7)).astype(np.int16),
        RNG.integers(-9, 9, (2, 4, 8, 3)).astype(np.int16),
    ],
}
ARGS = [
    {},
    {"axes": [1, 2]},
    {"axis_names": "DW"},
    {"axes": [0], "keep_dims": True},
    {"axis_names": "HW", "keep_dims": True},
]


@pytest.mark.parametrize("args", ARGS, ids=range(len(ARGS)))
@pytest.mark.parametrize("dtype", sorted(SAMPLES))
@pytest.mark.parametrize("name", ["min", "max"])
def test_reductions_match_dali(ours, dali, name, dtype, args):
    samples = SAMPLES[dtype]
    mine = ours(samples, lambda x: getattr(fn.reductions, name)(x, **args), layout="CDHW")
    theirs = dali(samples, lambda x, f, t: getattr(f.reductions, name)(x, **args), layout="CDHW")
    assert mine[0][1] == theirs[0][1]
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    if not args:
        assert mine[0][0][0] == getattr(np, f"a{name}")(samples[0]) and mine[0][0][0].shape == ()
