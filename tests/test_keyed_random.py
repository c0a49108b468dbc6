"""Keyed random streams: the reused per-thread generator gives exactly the fresh generator's
stream, whatever was drawn from it before, and threads never share one; the vectorised keyed
draws are deterministic, the same whatever samples, order, chunks or threads they are drawn with,
distinct per key, and uniform."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raypipe.keyed_random import SampleContext, keyed_uniforms, reused_generator, sample_generator
from raypipe.operator import SEEDED_STREAM, Operator

KEYS = [(1, 2, 3, 4), (5, 0, 7, 4), (1, 2, 3, 9), (2**63, 5, 2**40, 4), (0, 0, 0, 4)]


def _draws(generator: np.random.Generator) -> list:
    return [
        generator.random(3).tolist(),
        generator.integers(0, 10, 5, dtype=np.uint32).tolist(),  # buffered 32-bit draws
        generator.integers(0, 2**40, 2).tolist(),
        generator.uniform(-1, 1),
    ]


def test_reused_equals_fresh_after_any_earlier_draws():
    for key in KEYS:
        half = reused_generator(*key)
        half.integers(0, 3, 1, dtype=np.uint32)  # leaves half a 64-bit word buffered
        assert _draws(reused_generator(*key)) == _draws(sample_generator(*key)), key


def test_streams_differ_by_every_key_part():
    first = [_draws(reused_generator(*key)) for key in KEYS]
    assert len({repr(d) for d in first}) == len(KEYS)


def test_threads_keep_their_own_generators():
    key_a, key_b = KEYS[0], KEYS[1]
    barrier = threading.Barrier(2)
    results = {}

    def work(name, key):
        generator = reused_generator(*key)
        barrier.wait()  # both threads hold their generator before either draws
        results[name] = (id(generator), _draws(generator))

    threads = [threading.Thread(target=work, args=(n, k)) for n, k in (("a", key_a), ("b", key_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"][0] != results["b"][0]
    assert results["a"][1] == _draws(sample_generator(*key_a))
    assert results["b"][1] == _draws(sample_generator(*key_b))


def test_sample_context_uses_the_keyed_stream():
    ctx = SampleContext(seed=3, epoch=1, sample_index=42)
    assert ctx.rng(7).random(4).tolist() == sample_generator(3, 1, 42, 7).random(4).tolist()


# keyed_uniforms: the vectorised draws


def test_draws_are_deterministic_floats_in_the_unit_interval():
    draws = keyed_uniforms(7, 3, 2, range(50), 40)
    assert draws.shape == (40, 50) and draws.dtype == np.float64
    assert draws.min() >= 0.0 and draws.max() < 1.0
    np.testing.assert_array_equal(draws, keyed_uniforms(7, 3, 2, list(range(50)), 40))


@settings(max_examples=50, deadline=None)
@given(
    indices=st.lists(st.integers(0, 2**40), min_size=1, max_size=40),
    count=st.integers(1, 48),
    key=st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**40), st.integers(0, 1000)),
)
def test_a_samples_draws_do_not_depend_on_the_others_or_their_order(indices, count, key):
    seed, stream, epoch = key
    together = keyed_uniforms(seed, stream, epoch, indices, count)
    for column, index in enumerate(indices):
        np.testing.assert_array_equal(together[:, column], keyed_uniforms(seed, stream, epoch, [index], count)[:, 0])
    order = np.random.default_rng(0).permutation(len(indices))
    np.testing.assert_array_equal(
        keyed_uniforms(seed, stream, epoch, [indices[i] for i in order], count), together[:, order]
    )
    np.testing.assert_array_equal(keyed_uniforms(seed, stream, epoch, indices, 1), together[:1])  # counter-based


def test_draws_differ_by_every_key_part():
    base = (1, 2, 3)
    keys = [base, (9, 2, 3), (1, 8, 3), (1, 2, 4), (2**63, 2, 3)]
    columns = [keyed_uniforms(*key, [10, 11], 8) for key in keys]
    rows = {tuple(c[:, i]) for c in columns for i in range(2)}
    assert len(rows) == 2 * len(keys)  # every key and every sample its own draws


def test_draws_look_uniform_and_independent():
    draws = keyed_uniforms(0, 5, 0, range(20_000), 16)  # 320,000 values
    assert abs(draws.mean() - 0.5) < 0.003 and abs(draws.var() - 1 / 12) < 0.002
    counts = np.histogram(draws, bins=20, range=(0, 1))[0]
    chi2 = ((counts - draws.size / 20) ** 2 / (draws.size / 20)).sum()
    assert chi2 < 50  # 19 degrees of freedom: 43.8 at p = 0.001
    for a, b in ((draws[:, :-1], draws[:, 1:]), (draws[:-1], draws[1:])):  # neighbouring samples, draws
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.01
    epochs = keyed_uniforms(0, 5, 1, range(20_000), 16)
    assert abs(np.corrcoef(draws.ravel(), epochs.ravel())[0, 1]) < 0.01


def _operator(seed=None, op_id=4) -> Operator:
    from raypipe.operators.random import Uniform

    return Uniform(device="cpu", op_id=op_id, seed=seed)


def test_operator_draws_are_keyed_like_its_generator():
    ctxs = [SampleContext(3, 1, i) for i in (5, 9, 2)]
    np.testing.assert_array_equal(_operator().draws(ctxs, 6), keyed_uniforms(3, 4, 1, [5, 9, 2], 6))
    own = _operator(seed=77).draws(ctxs, 6)
    np.testing.assert_array_equal(own, keyed_uniforms(77, SEEDED_STREAM, 1, [5, 9, 2], 6))
    np.testing.assert_array_equal(own, _operator(seed=77, op_id=9).draws(ctxs, 6))  # one seed, one stream
    other_pipeline = [SampleContext(8, 1, i) for i in (5, 9, 2)]
    np.testing.assert_array_equal(own, _operator(seed=77).draws(other_pipeline, 6))
    assert not np.array_equal(_operator().draws(ctxs, 6), _operator().draws(other_pipeline, 6))


def test_operator_draws_for_samples_of_several_epochs_keep_their_order():
    ctxs = [SampleContext(3, 1, 5), SampleContext(3, 2, 5), SampleContext(4, 1, 5)]
    op = _operator()
    np.testing.assert_array_equal(op.draws(ctxs, 3), np.hstack([op.draws([c], 3) for c in ctxs]))


@pytest.mark.parametrize("threads, chunk", [(1, 1), (2, 7), (4, 16)])
def test_operator_draws_do_not_depend_on_threads_or_chunks(threads, chunk):
    op = _operator()
    ctxs = [SampleContext(0, 0, i) for i in range(100)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda first: op.draws(ctxs[first : first + chunk], 12), range(0, 100, chunk)))
    np.testing.assert_array_equal(np.hstack(parts), op.draws(ctxs, 12))


def test_operator_draws_for_a_batchs_contexts_as_one_array():
    from raypipe.sample_contexts import SampleContexts

    batch = SampleContexts(3, 1, np.array([5, 9, 2, 2**40]))
    for op in (_operator(), _operator(seed=77)):
        np.testing.assert_array_equal(op.draws(batch, 6), op.draws(list(batch), 6))
        np.testing.assert_array_equal(op.draws(batch[1:2], 6), op.draws([batch[1]], 6))
