"""The self-driven reader order: sharding, moving shards, shuffle buffer, padding."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from raypipe.keyed_random import sample_generator
from raypipe.reader_order import epoch_batches, listing_order, shard_bounds, shuffle_buffer_order


def test_shard_bounds_match_dali():
    assert [shard_bounds(10, s, 3) for s in range(3)] == [(0, 3), (3, 6), (6, 10)]


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 300),
    batch_size=st.integers(1, 17),
    num_shards=st.integers(1, 6),
    epoch=st.integers(0, 5),
    shuffle=st.booleans(),
    pad=st.booleans(),
    fill=st.integers(1, 64),
    listing=st.booleans(),
)
def test_every_shard_gets_equal_batches_and_its_samples_exactly_once(
    size, batch_size, num_shards, epoch, shuffle, pad, fill, listing
):
    if size < num_shards:
        return
    all_real = []
    counts = set()
    for shard_id in range(num_shards):
        specs = epoch_batches(
            size=size,
            batch_size=batch_size,
            epoch=epoch,
            seed=3,
            shard_id=shard_id,
            num_shards=num_shards,
            random_shuffle=shuffle,
            initial_fill=fill,
            pad_last_batch=pad,
            shuffled_listing=listing,
        )
        counts.add(len(specs))
        assert all(len(s.sample_indices) == batch_size for s in specs)
        assert [s.index for s in specs] == list(range(len(specs)))
        assert [s.last_in_epoch for s in specs] == [False] * (len(specs) - 1) + [True]
        real = np.concatenate([s.sample_indices[: s.num_real] for s in specs])
        pads = np.concatenate([s.sample_indices[s.num_real :] for s in specs])
        start, end = shard_bounds(size, (shard_id + epoch) % num_shards, num_shards)
        shard = sorted(listing_order(size, start, end).tolist() if shuffle and listing else range(start, end))
        assert sorted(real.tolist()) == shard
        assert set(pads.tolist()) <= set(shard)
        if pad and len(pads):
            assert set(pads.tolist()) == {int(real[-1])}
        all_real.extend(real.tolist())
    assert len(counts) == 1
    assert sorted(all_real) == list(range(size))


def test_shards_move_each_epoch_unless_sticky():
    def first(epoch, stick):
        return int(
            epoch_batches(size=12, batch_size=2, epoch=epoch, seed=0, shard_id=0, num_shards=3, stick_to_shard=stick)[
                0
            ].sample_indices[0]
        )

    assert [first(e, False) for e in range(4)] == [0, 4, 8, 0]
    assert [first(e, True) for e in range(4)] == [0, 0, 0, 0]


def test_shuffle_buffer_is_local_and_deterministic():
    order = np.arange(1000)
    a = shuffle_buffer_order(order, 10, sample_generator(1, 0, 0, 9))
    b = shuffle_buffer_order(order, 10, sample_generator(1, 0, 0, 9))
    c = shuffle_buffer_order(order, 10, sample_generator(2, 0, 0, 9))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert sorted(a.tolist()) == order.tolist()
    # a buffer of 10 can only emit sample i once it has read it: position >= i - 9
    assert all(pos >= int(v) - 9 for pos, v in enumerate(a))
    assert not np.array_equal(a, order)


def test_shuffled_epochs_differ():
    def order(epoch):
        specs = epoch_batches(size=50, batch_size=5, epoch=epoch, seed=1, random_shuffle=True, initial_fill=50)
        return np.concatenate([s.sample_indices for s in specs]).tolist()

    assert order(0) != order(1) and sorted(order(0)) == sorted(order(1))


def test_a_shuffled_listing_gives_every_shard_every_class():
    """A class-sorted folder (10 classes of 100 files) read by 4 shards with DALI's default shuffle
    buffer: from the shuffled listing every shard's first batch mixes most classes; from the
    listing as stored each shard holds 2-3 classes."""

    def first_batch_classes(shard_id: int, listing: bool) -> set[int]:
        specs = epoch_batches(
            size=1000, batch_size=32, epoch=0, seed=0, shard_id=shard_id, num_shards=4,
            random_shuffle=True, shuffled_listing=listing,
        )  # fmt: skip
        return set((specs[0].sample_indices // 100).tolist())

    assert all(len(first_batch_classes(s, True)) >= 8 for s in range(4))
    assert all(len(first_batch_classes(s, False)) <= 3 for s in range(4))


def test_the_listing_order_is_one_permutation_whatever_the_shards():
    whole = listing_order(1000, 0, 1000)
    assert sorted(whole.tolist()) == list(range(1000)) and not np.array_equal(whole, np.arange(1000))
    parts = [listing_order(1000, *shard_bounds(1000, s, 3)) for s in range(3)]
    assert np.array_equal(np.concatenate(parts), whole)
