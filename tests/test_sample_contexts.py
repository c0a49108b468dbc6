"""A batch's sample contexts as one array: the same contexts, and the same random streams, as one
``SampleContext`` per sample, each knowing its entry in the batch."""

from __future__ import annotations

import numpy as np

from raypipe.keyed_random import SampleContext
from raypipe.sample_contexts import SampleContexts


def test_contexts_are_made_on_demand_and_equal_the_per_sample_ones():
    indices = np.array([7, 3, 11, 3], dtype=np.int64)
    ctxs = SampleContexts(5, 2, indices, batch=9)
    expected = [SampleContext(5, 2, int(i), 9, slot) for slot, i in enumerate(indices)]
    assert len(ctxs) == 4 and list(ctxs) == expected
    assert ctxs[2] == expected[2] and ctxs[-1] == expected[-1]
    assert list(ctxs[1:3]) == expected[1:3] and isinstance(ctxs[1:3], SampleContexts)
    assert ctxs.sample_indices.dtype == np.int64 and ctxs.sample_indices.tolist() == [7, 3, 11, 3]
    assert ctxs[0].rng(4).random() == expected[0].rng(4).random()


def test_the_kept_entries_of_a_batch_keep_their_slots():
    """The GPU stage runs the kept samples of a batch: each context names its entry in the batch."""
    ctxs = SampleContexts(5, 2, np.array([7, 11]), batch=3, slots=np.array([0, 2]))
    assert [(c.sample_index, c.batch, c.slot) for c in ctxs] == [(7, 3, 0), (11, 3, 2)]
    assert ctxs[1:].slots.tolist() == [2] and ctxs[1].slot == 2


def test_the_random_stream_does_not_depend_on_the_place_in_the_batch():
    assert SampleContext(5, 2, 7, 0, 0).rng(1).random() == SampleContext(5, 2, 7, 4, 3).rng(1).random()
