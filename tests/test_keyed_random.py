"""Keyed random streams: the reused per-thread generator gives exactly the fresh generator's
stream, whatever was drawn from it before, and threads never share one."""

from __future__ import annotations

import threading

import numpy as np

from raypipe.keyed_random import SampleContext, reused_generator, sample_generator

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
