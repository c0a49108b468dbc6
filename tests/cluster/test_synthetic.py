"""A synthetic loader from an example batch: same shapes, dtypes, count; timed steps; bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import raypipe as rp


def test_batches_match_the_example_and_steps_are_timed():
    example = (torch.zeros(4, 3, 8, 8), torch.arange(4, dtype=torch.int64), np.ones((4, 2), np.float16))
    synthetic = rp.synthetic_loader(example, batches=3)
    assert len(synthetic) == 3
    seen = []
    for batch in synthetic:
        time.sleep(0.02)
        seen.append(batch)
    assert len(seen) == 3 and all(b is seen[0] for b in seen), "one batch made once, no I/O"
    images, labels, extra = seen[0]
    assert images.shape == (4, 3, 8, 8) and images.dtype == torch.float32 and images.std() > 0.1, "uniform noise"
    assert labels.dtype == torch.int64 and not labels.any()
    assert extra.dtype == np.float16 and extra.shape == (4, 2) and 0 <= extra.min() and extra.max() < 1
    stats = synthetic.stats()
    assert stats["steps"] == 3 and stats["trained_s"] >= 0.06 and 0 < stats["batches_per_s"] <= 50


def test_bad_arguments_name_the_problem():
    with pytest.raises(rp.ArgumentError, match="batches is required"):
        rp.synthetic_loader((np.zeros(2),))
    with pytest.raises(rp.ArgumentError, match="batches must be a positive int"):
        rp.synthetic_loader((np.zeros(2),), batches=0)
    with pytest.raises(rp.ArgumentError, match="an rp.loader or an example batch"):
        rp.synthetic_loader("imagenet", batches=2)
    with pytest.raises(rp.ArgumentError, match="torch tensors or numpy arrays"):
        rp.synthetic_loader(([1, 2],), batches=2)
