"""``permute_batch`` against DALI 2.4's CPU operator where installed (static and per-sample indices,
ragged samples, repetitions); ``batch_permutation``'s draws (permutations, no fixed points,
repetitions, a batch of one) keyed so that any thread count gives them; a mixup of a batch with its
permutation; errors naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, RaypipeError
from tests.operators.outputs import assert_same

RAGGED = [np.arange(k + 1, dtype=np.int16) * (k + 1) for k in range(5)]


@pytest.mark.parametrize("indices", [[4, 4, 0, 1, 2], [0, 1, 2, 3, 4], [3, 2, 1, 0, 0]])
def test_permute_batch_matches_dali(ours, dali, indices):
    mine = ours(RAGGED, lambda x: fn.permute_batch(x, indices=indices), layout="W")
    assert [s.tolist() for s in mine[0][0]] == [RAGGED[i].tolist() for i in indices]
    assert_same(mine, dali(RAGGED, lambda x, f, t: f.permute_batch(x, indices=indices), layout="W"))


def test_per_sample_indices_match_dali(ours, dali):
    indices = [[np.array(i, np.int32) for i in (2, 0, 4, 4, 1)]]
    mine = ours(RAGGED, lambda x, i: fn.permute_batch(x, indices=i), layout="W", per_sample=indices)
    assert [s.tolist() for s in mine[0][0]] == [RAGGED[i].tolist() for i in (2, 0, 4, 4, 1)]
    assert_same(mine, dali(RAGGED, lambda x, f, t, i: f.permute_batch(x, indices=i), layout="W", per_sample=indices))


def _permutations(batch_size: int, count: int, threads: int = 1, **args) -> list[list[int]]:
    @rp.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=11)
    def pipe():
        return fn.batch_permutation(**args)

    with pipe() as p:
        return [np.asarray(p.run()[0].as_tensor()).reshape(-1).tolist() for _ in range(count)]


def test_batch_permutation_draws_permutations_keyed_by_batch():
    drawn = _permutations(6, 40)
    assert all(sorted(p) == list(range(6)) for p in drawn)
    assert len({tuple(p) for p in drawn}) > 30, "different batches, different permutations"
    assert drawn == _permutations(6, 40, threads=3), "the same whatever the thread count"
    assert any(p[i] == i for p in drawn for i in range(6)), "fixed points happen unless refused"


def test_no_fixed_points_and_repetitions():
    for p in _permutations(6, 40, no_fixed_points=True):
        assert sorted(p) == list(range(6)) and all(v != i for i, v in enumerate(p))
    repeated = _permutations(6, 40, allow_repetitions=True, no_fixed_points=True)
    assert all(0 <= v < 6 and v != i for p in repeated for i, v in enumerate(p))
    assert any(len(set(p)) < 6 for p in repeated), "repetitions happen"
    assert _permutations(1, 3, no_fixed_points=True) == [[0]] * 3, "ignored for a batch of one, as in DALI"


def test_mixup_of_a_batch_with_its_permutation(ours):
    images = [np.full((2, 2, 1), 10 * k, np.float32) for k in range(4)]

    def mixup(x):
        perm = fn.batch_permutation(no_fixed_points=True)
        return fn.cat(0.75 * x + 0.25 * fn.permute_batch(x, indices=perm), x), perm

    (mixed, _), (perm, _) = ours(images, mixup, layout="HWC")
    for k, (sample, partner) in enumerate(zip(mixed, perm, strict=True)):
        assert int(partner) != k
        np.testing.assert_allclose(sample[:2], 0.75 * images[k] + 0.25 * images[int(partner)])


def test_bad_indices_fail():
    with pytest.raises(ArgumentError, match="permute_batch: indices is required"):
        rp.pipeline_def(lambda: fn.permute_batch(fn.zeros(shape=[1])), batch_size=2, device_id=None)().build()
    for indices, message in (([0, 2], r"indices \[2\] outside the batch of 2"), ([0], "1 indices for a batch of 2")):
        pipe = rp.pipeline_def(
            lambda i=indices: fn.permute_batch(fn.zeros(shape=[1]), indices=i), batch_size=2, device_id=None
        )()
        with pipe, pytest.raises(RaypipeError, match=f"permute_batch: {message}"):
            pipe.run()
