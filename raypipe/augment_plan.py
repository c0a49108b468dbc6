"""Which augmentation each sample gets, as pure numpy functions of its uniform draws.

An automatic augmentation policy applies, to each sample, a short sequence of augmentations
chosen at random (:mod:`raypipe.auto_aug`). A selector turns a batch's keyed uniform draws (shape
``(draws, samples)``, :meth:`raypipe.operator.Operator.draws`) into a plan: for each level of the
sequence and each sample, the augmentation to apply (``-1``: none) and the row of its parameter
table. A row is the magnitude bin, or, for an augmentation whose magnitude is negated at random,
``2 * bin + sign`` (``sign`` 1: negated). The same draws give the same plan for a sample whatever
batch, chunk or process it is planned in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _choice(u: np.ndarray, count: int) -> np.ndarray:
    """Uniform integers in ``[0, count)`` from uniforms in ``[0, 1)``."""
    return np.minimum((u * count).astype(np.int64), count - 1)


def _rows(branch: np.ndarray, bins: np.ndarray | int, sign: np.ndarray, negated: np.ndarray) -> np.ndarray:
    """Parameter-table rows: ``2 * bin + sign`` where the chosen augmentation is negated at random."""
    randomly = negated[np.maximum(branch, 0)] & (branch >= 0)
    return np.where(randomly, 2 * np.asarray(bins) + sign, bins)


@dataclass(frozen=True)
class Fixed:
    """One augmentation (branch 0) with magnitude bin ``bin`` for every sample."""

    bin: int
    negated: bool

    @property
    def draws(self) -> int:
        return 1

    def plan(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        branch = np.zeros((1, u.shape[1]), dtype=np.int64)
        sign = _choice(u[:1], 2)
        return branch, _rows(branch, self.bin, sign, np.array([self.negated]))


@dataclass(frozen=True)
class RandAugment:
    """``n`` augmentations in a row, each drawn uniformly from ``negated``'s (one flag per
    augmentation: whether its magnitude is negated at random), all with magnitude bin ``m``."""

    n: int
    m: int
    negated: tuple[bool, ...]

    @property
    def draws(self) -> int:
        return 2 * self.n

    def plan(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        branch = _choice(u[: self.n], len(self.negated))
        sign = _choice(u[self.n : 2 * self.n], 2)
        return branch, _rows(branch, self.m, sign, np.array(self.negated))


@dataclass(frozen=True)
class TrivialAugment:
    """One augmentation drawn uniformly, with a magnitude bin drawn uniformly from ``num_bins``."""

    num_bins: int
    negated: tuple[bool, ...]

    @property
    def draws(self) -> int:
        return 3

    def plan(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        branch = _choice(u[:1], len(self.negated))
        bins = _choice(u[1:2], self.num_bins)
        sign = _choice(u[2:3], 2)
        return branch, _rows(branch, bins, sign, np.array(self.negated))


@dataclass(frozen=True)
class SubPolicies:
    """AutoAugment: a sub-policy drawn uniformly, then each of its stages applied with its
    probability. ``augmentation[s][l]``, ``probability[s][l]`` and ``bin[s][l]`` describe stage ``l``
    of sub-policy ``s`` (augmentation ``-1``: the sub-policy has fewer stages)."""

    augmentation: np.ndarray
    probability: np.ndarray
    bin: np.ndarray
    negated: tuple[bool, ...]

    @classmethod
    def of(cls, stages: Sequence[Sequence[tuple[int, float, int]]], negated: Sequence[bool]) -> SubPolicies:
        """From each sub-policy's stages as ``(augmentation, probability, bin)`` triples."""
        width = max(len(s) for s in stages)
        augmentation = np.full((len(stages), width), -1, dtype=np.int64)
        probability = np.zeros((len(stages), width), dtype=np.float64)
        bins = np.zeros((len(stages), width), dtype=np.int64)
        for s, sub_policy in enumerate(stages):
            for level, (aug, p, b) in enumerate(sub_policy):
                augmentation[s, level], probability[s, level], bins[s, level] = aug, p, b
        for array in (augmentation, probability, bins):
            array.flags.writeable = False
        return cls(augmentation, probability, bins, tuple(negated))

    @property
    def draws(self) -> int:
        return 1 + 2 * self.augmentation.shape[1]

    def plan(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        levels = self.augmentation.shape[1]
        chosen = _choice(u[0], len(self.augmentation))
        runs = u[1 : 1 + levels] < self.probability[chosen].T
        branch = np.where(runs, self.augmentation[chosen].T, -1)
        sign = _choice(u[1 + levels :], 2)
        return branch, _rows(branch, self.bin[chosen].T, sign, np.array(self.negated))
