"""The selectors of :mod:`raypipe.augment_plan`: which augmentation and parameter row each sample
gets, from its keyed draws, as pure numpy functions."""

from __future__ import annotations

import numpy as np

from raypipe.augment_plan import Fixed, RandAugment, SubPolicies, TrivialAugment
from raypipe.keyed_random import keyed_uniforms


def test_fixed_applies_its_one_augmentation_with_a_random_sign_where_negated():
    u = keyed_uniforms(0, 1, 0, range(1000), 1)
    branch, row = Fixed(4, True).plan(u)
    assert (branch == 0).all() and set(row[0].tolist()) == {8, 9}
    assert (Fixed(4, False).plan(u)[1] == 4).all()


def test_rand_augment_draws_n_operations_each_uniformly_all_with_bin_m():
    selector = RandAugment(3, 7, (True, False, True, False))
    branch, row = selector.plan(keyed_uniforms(2, 1, 0, range(20_000), selector.draws))
    assert branch.shape == row.shape == (3, 20_000)
    for level in range(3):
        np.testing.assert_allclose(np.bincount(branch[level], minlength=4) / 20_000, [0.25] * 4, atol=0.015)
    negated = np.isin(branch, [0, 2])
    assert set(row[negated].tolist()) == {14, 15} and set(row[~negated].tolist()) == {7}


def test_a_samples_plan_does_not_depend_on_the_samples_planned_with_it():
    selector = SubPolicies.of([[(0, 0.5, 1), (1, 0.5, 2)], [(1, 0.9, 0)]], [True, False])
    whole = selector.plan(keyed_uniforms(3, 9, 2, range(64), selector.draws))
    for i in (0, 17, 63):
        alone = selector.plan(keyed_uniforms(3, 9, 2, [i], selector.draws))
        assert [p[:, i].tolist() for p in whole] == [p[:, 0].tolist() for p in alone]


def test_trivial_augment_picks_one_augmentation_and_a_bin_per_sample():
    selector = TrivialAugment(31, (True, False, False))
    branch, row = selector.plan(keyed_uniforms(1, 2, 0, range(30_000), selector.draws))
    assert branch.shape == (1, 30_000)
    counts = np.bincount(branch[0], minlength=3) / 30_000
    np.testing.assert_allclose(counts, [1 / 3] * 3, atol=0.01)
    signed = row[0][branch[0] == 0]
    assert signed.max() == 61 and signed.min() == 0, "2 * bin + sign over 31 bins"
    np.testing.assert_allclose(np.mean(signed % 2), 0.5, atol=0.02)
    assert row[0][branch[0] > 0].max() == 30, "unsigned: the bin itself"


def test_auto_augment_runs_each_stage_of_the_drawn_sub_policy_with_its_probability():
    selector = SubPolicies.of([[(0, 0.8, 3), (1, 0.3, 5)], [(2, 1.0, 7)]], [False, True, False])
    branch, row = selector.plan(keyed_uniforms(4, 2, 1, range(40_000), selector.draws))
    first = branch[0] != 2  # sub-policy 0 (stage 0 is augmentation 0, or none)
    np.testing.assert_allclose(np.mean(~first), 0.5, atol=0.01)
    np.testing.assert_allclose(np.mean(branch[0][first] == 0), 0.8, atol=0.01)
    np.testing.assert_allclose(np.mean(branch[1][first] == 1), 0.3, atol=0.01)
    assert (branch[1][~first] == -1).all(), "sub-policy 1 has one stage"
    assert set(row[1][branch[1] == 1].tolist()) == {10, 11}, "augmentation 1 is negated at random: 2 * 5 + sign"
    assert set(row[0][branch[0] == 2].tolist()) == {7}
