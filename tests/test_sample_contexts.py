"""A batch's sample contexts as one array: the same contexts, and the same random streams, as one
``SampleContext`` per sample."""

from __future__ import annotations

import numpy as np

from raypipe.keyed_random import SampleContext
from raypipe.sample_contexts import SampleContexts


def test_contexts_are_made_on_demand_and_equal_the_per_sample_ones():
    indices = np.array([7, 3, 11, 3], dtype=np.int64)
    ctxs = SampleContexts(5, 2, indices)
    expected = [SampleContext(5, 2, int(i)) for i in indices]
    assert len(ctxs) == 4 and list(ctxs) == expected
    assert ctxs[2] == expected[2] and ctxs[-1] == expected[-1]
    assert list(ctxs[1:3]) == expected[1:3] and isinstance(ctxs[1:3], SampleContexts)
    assert ctxs.sample_indices.dtype == np.int64 and ctxs.sample_indices.tolist() == [7, 3, 11, 3]
    assert ctxs[0].rng(4).random() == expected[0].rng(4).random()
