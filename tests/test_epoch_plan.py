"""The epoch plan: equal batch counts, exactly-once, disjoint ranks, determinism, O(1) at 2e9."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import raypipe as rp
from raypipe import permutation
from raypipe.epoch_plan import plan
from raypipe.permutation import FeistelPermutation


def _all(p):
    return {(r, k): p.batch(r, k) for r in range(p.world_size) for k in range(p.num_batches)}


@settings(max_examples=250, deadline=None)
@given(
    n=st.integers(1, 400),
    world=st.integers(1, 7),
    batch=st.integers(1, 9),
    shuffle=st.sampled_from(["global", "buffer", "none"]),
    last=st.sampled_from(["pad", "drop", "partial"]),
    seed=st.integers(0, 2**40),
    epoch=st.integers(0, 50),
    block=st.integers(1, 40),
)
def test_plan_properties(n, world, batch, shuffle, last, seed, epoch, block):
    if n < world or (last == "drop" and n < world * batch):
        with pytest.raises(rp.ArgumentError):
            plan(n, seed, epoch, world, batch, shuffle, last, block_size=block)
        return
    p = plan(n, seed, epoch, world, batch, shuffle, last, block_size=block, initial_fill=5)
    batches = _all(p)
    real = []
    for (_rank, k), spec in batches.items():
        assert spec.epoch == epoch and spec.index == k and spec.last_in_epoch == (k == p.num_batches - 1)
        assert 1 <= len(spec.sample_indices) <= batch
        if last != "partial" or k < p.num_batches - 1:
            assert len(spec.sample_indices) == batch
        assert all(0 <= i < n for i in spec.sample_indices.tolist())
        real.extend(spec.sample_indices[: spec.num_real].tolist())
    assert len(real) == len(set(real)), "a sample was planned twice"
    if last == "drop":
        assert len(real) == (n // (world * batch)) * world * batch
    else:
        assert sorted(real) == list(range(n)), "exactly once per epoch"
        pads = [s for s in batches.values() if s.num_pad]
        assert all(s.last_in_epoch for s in pads), "padding only tops up the last batch"
    again = _all(plan(n, seed, epoch, world, batch, shuffle, last, block_size=block, initial_fill=5))
    assert all(np.array_equal(again[key].sample_indices, batches[key].sample_indices) for key in batches)


@pytest.mark.parametrize("shuffle", ["global", "buffer"])
def test_new_order_each_epoch_and_seed(shuffle):
    def order(seed, epoch):
        p = plan(1000, seed, epoch, 4, 10, shuffle, "pad")
        return np.concatenate([p.batch(r, k).sample_indices for k in range(p.num_batches) for r in range(4)])

    assert not np.array_equal(order(0, 0), order(0, 1))
    assert not np.array_equal(order(0, 0), order(1, 0))
    assert np.array_equal(order(3, 7), order(3, 7))


def test_global_order_does_not_depend_on_world_size():
    def stream(world, batch):
        p = plan(96, 5, 2, world, batch, "global", "pad")
        return np.concatenate([p.batch(r, k).sample_indices for k in range(p.num_batches) for r in range(world)])

    assert np.array_equal(stream(1, 96), stream(4, 8)) and np.array_equal(stream(4, 8), stream(3, 4))


def test_buffer_mode_reads_blocks_in_order():
    p = plan(10_000, 1, 0, 2, 50, "buffer", "pad", block_size=500, initial_fill=1)
    samples = p.batch(0, 3).sample_indices
    assert np.all(np.diff(samples) == 1), "with a buffer of one, a rank reads contiguous runs"


def test_two_billion_samples_cost_constant_memory():
    n = 2_000_000_000
    p = plan(n, 11, 3, 64, 256, "global", "partial")
    specs = [p.batch(r, k) for r, k in [(0, 0), (63, 0), (5, 100_000), (17, p.num_batches - 1), (0, 77_777)]]
    samples = np.concatenate([s.sample_indices for s in specs])
    assert samples.min() >= 0 and samples.max() < n
    assert len(np.unique(samples)) == len(samples)
    assert p.num_batches == -(-n // (64 * 256))


@pytest.mark.parametrize("n", [1, 2, 5, 64, 1000, 4099, permutation.TABLE_MAX + 1])
def test_feistel_is_a_bijection_with_an_inverse(n):
    perm = FeistelPermutation(n, key=42)
    values = perm(np.arange(n))
    assert sorted(values.tolist()) == list(range(n))
    assert np.array_equal(perm.inverse(values), np.arange(n))


@pytest.mark.parametrize("n", [1, 24, 4099, permutation.TABLE_MAX])
def test_a_tabulated_permutation_has_the_networks_values(n, monkeypatch):
    tabulated = FeistelPermutation(n, key=9)
    positions = np.random.default_rng(n).integers(0, n, size=50)
    values, scalar, inverse = tabulated(positions), tabulated(n - 1), tabulated.inverse(positions)
    monkeypatch.setattr(permutation, "TABLE_MAX", 0)
    computed = FeistelPermutation(n, key=9)
    assert np.array_equal(values, computed(positions))
    assert np.array_equal(inverse, computed.inverse(positions))
    assert scalar.shape == () and scalar == computed(n - 1)
    assert values.dtype == np.int64
    with pytest.raises(IndexError, match=rf"position {n} outside \[0, {n}\)"):
        tabulated(np.array([0, n]))


def _stream(p, first=0, last=None):
    """The real samples of global batches [first, last) in global order (ranks in turn)."""
    last = p.num_batches if last is None else last
    out = []
    for k in range(first, last):
        for r in range(p.world_size):
            spec = p.batch(r, k)
            out.extend(spec.sample_indices[: spec.num_real].tolist())
    return out


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(8, 300),
    worlds=st.lists(st.integers(1, 6), min_size=2, max_size=3),
    batch=st.integers(1, 7),
    shuffle=st.sampled_from(["global", "buffer", "none"]),
    last=st.sampled_from(["pad", "partial"]),
    cuts=st.lists(st.integers(0, 40), min_size=2, max_size=2),
    seed=st.integers(0, 2**32),
)
def test_resume_into_other_world_sizes_is_exactly_once_in_the_same_order(n, worlds, batch, shuffle, last, cuts, seed):
    worlds = [w for w in worlds if w <= n]
    if len(worlds) < 2:
        return
    full = _stream(plan(n, seed, 2, 1, batch, shuffle, last, block_size=5, initial_fill=7))
    delivered, start = [], 0
    for i, world in enumerate(worlds):
        p = plan(n, seed, 2, world, batch, shuffle, last, block_size=5, initial_fill=7, start=start)
        stop = p.num_batches if i == len(worlds) - 1 else min(cuts[i % 2], p.num_batches - 1)
        delivered.extend(_stream(p, 0, stop))
        start = p.offset_after(stop)
        counts = {len([p.batch(r, k) for k in range(p.num_batches)]) for r in range(world)}
        assert counts == {p.num_batches}, "equal batch counts on every rank after a resume"
    assert delivered == full, "the same global order, every sample exactly once, across the parts"


def test_resume_with_drop_keeps_whole_global_batches():
    p = plan(100, 3, 0, 4, 5, "global", "drop", start=60)
    assert p.num_batches == 2 and p.offset_after(2) == 100
    p = plan(100, 3, 0, 4, 5, "global", "drop", start=90)
    assert p.num_batches == 0, "fewer than one global batch left: nothing to read"


@pytest.mark.parametrize("shuffle", ["global", "buffer", "none"])
def test_any_batch_of_a_two_billion_sample_epoch_after_a_resume_in_every_mode(shuffle):
    n = 2_000_000_000
    p = plan(n, 11, 3, 64, 256, shuffle, "pad", start=1_234_567_890)
    specs = [p.batch(r, k) for r, k in [(0, 0), (5, 1_000), (63, p.num_batches - 1)]]
    samples = np.concatenate([s.sample_indices for s in specs])
    assert samples.min() >= 0 and samples.max() < n and len(np.unique(samples)) == len(samples)
    assert p.num_batches == -(-(n - 1_234_567_890) // (64 * 256))


def test_buffer_window_keeps_samples_near_their_stream_position():
    p = plan(10_000, 4, 1, 1, 100, "buffer", "pad", block_size=10_000, initial_fill=500)
    order = np.concatenate([p.batch(0, k).sample_indices for k in range(p.num_batches)])
    assert sorted(order.tolist()) == list(range(10_000))
    assert np.abs(order - np.arange(10_000)).max() < 500, "a sample moves within its window only"
    assert not np.array_equal(order, np.arange(10_000))
