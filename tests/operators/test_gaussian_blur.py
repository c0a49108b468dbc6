"""gaussian_blur: against DALI 2.4's CPU operator on real decoded JPEGs and on small volumes and
sequences (layouts HWC, CHW, FHWC, DHWC; per-sample and per-axis arguments; cpu and gpu), and
against explicit Gaussian weights without DALI.

Tolerance: both filter axis by axis in float32, summing in other orders: uint8 results may differ
by 1 next to a rounding tie (at most 0.5% of the values), float results within 1e-4 absolute for
0..255 data."""

from __future__ import annotations

import math

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError
from raypipe.operators.gaussian_blur import GaussianBlur
from raypipe.sample_contexts import SampleContexts
from tests.operators.outputs import case_samples, on_both


def assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert diff.max() <= 1
        assert np.count_nonzero(diff) <= 5e-3 * diff.size
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


_RNG = np.random.default_rng(5)
VOLUMES = [_RNG.integers(0, 256, s, dtype=np.uint8) for s in ((5, 8, 9, 2), (3, 6, 11, 2))]
SIGMAS = [np.float32(v) for v in (0.5, 1.0, 2.5, 4.0)]

# (id, samples: None for the JPEGs, layout, per-sample batches, build(x, fn, types, device, *per_sample))
CASES = [
    ("sigma", None, "HWC", [], lambda x, fn, types, d: fn.gaussian_blur(x, sigma=1.5, device=d)),
    ("window", None, "HWC", [], lambda x, fn, types, d: fn.gaussian_blur(x, window_size=7, device=d)),
    (
        "per-axis",
        None,
        "HWC",
        [],
        lambda x, fn, types, d: fn.gaussian_blur(x, sigma=[2.0, 0.7], window_size=[3, 9], device=d),
    ),
    ("per-sample", None, "HWC", [SIGMAS], lambda x, fn, types, d, s: fn.gaussian_blur(x, sigma=s, device=d)),
    ("float", None, "HWC", [], lambda x, fn, types, d: fn.gaussian_blur(x, sigma=1.0, dtype=types.FLOAT, device=d)),
    ("chw", "chw", "CHW", [], lambda x, fn, types, d: fn.gaussian_blur(x, sigma=2.0, device=d)),
    ("volume", VOLUMES, "DHWC", [], lambda x, fn, types, d: fn.gaussian_blur(x, sigma=1.0, device=d)),
    ("sequence", VOLUMES, "FHWC", [], lambda x, fn, types, d: fn.gaussian_blur(x, sigma=[1.0, 3.0], device=d)),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, samples, layout, values, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, values, build, device):
    samples = case_samples(samples, images)
    theirs, mine = on_both(ours, dali, samples, build, device, layout, per_sample=values)
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their)


def test_impulse_gives_the_normalized_gaussian(ours):
    impulse = np.zeros((1, 15), np.float32)
    impulse[0, 7] = 1.0
    (((out,), _),) = ours([impulse], lambda x: fn.gaussian_blur(x, sigma=[0.0001, 1.2], window_size=[1, 0]), "HW")
    (((flat,), _),) = ours([np.full((6, 7, 3), 200, np.uint8)], lambda x: fn.gaussian_blur(x, sigma=3.0), "HWC")
    radius = math.ceil(3 * 1.2)
    x = np.arange(-radius, radius + 1)
    weights = np.exp(-(x**2) / (2 * 1.2**2))
    expected = np.zeros(15)
    expected[7 - radius : 8 + radius] = weights / weights.sum()
    np.testing.assert_allclose(out[0], expected, atol=1e-7)
    assert (flat == 200).all()


def test_border_mirrors_without_repeating_the_edge(ours):
    ramp = np.array([[0.0, 10.0, 20.0, 30.0]], np.float32)
    (((out,), _),) = ours([ramp], lambda x: fn.gaussian_blur(x, sigma=[0.0001, 1.0], window_size=[1, 3]), "HW")
    w = np.exp(-0.5 * np.array([1.0, 0.0, 1.0]))
    w /= w.sum()
    padded = np.array([10.0, 0.0, 10.0, 20.0, 30.0, 20.0])
    np.testing.assert_allclose(out[0], [w @ padded[i : i + 3] for i in range(4)], rtol=1e-6)


def test_a_batch_array_is_blurred_at_once_as_each_sample_alone():
    batch = _RNG.integers(0, 256, (3, 9, 10, 3), dtype=np.uint8)
    op = GaussianBlur("gpu", 0, sigma=1.3)
    op.output_layout(["HWC"])
    ctxs = SampleContexts(0, 0, np.arange(3))
    together = op.run_batch(np, [batch], {}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == batch.shape
    for i in range(3):
        np.testing.assert_array_equal(together[i], op.run_sample([batch[i]], {}, ctxs[i]))
    sigmas = [np.float32(1.0), np.float32(2.0), np.float32(1.0)]
    apart = op.run_batch(np, [batch], {"sigma": sigmas}, ctxs)
    for i in range(3):
        np.testing.assert_array_equal(apart[i], op.run_sample([batch[i]], {"sigma": sigmas[i]}, ctxs[i]))


def test_refusals(ours, images):
    with pytest.raises(rp.SampleError, match="give sigma, window_size or both"):
        ours(images, lambda x: fn.gaussian_blur(x), "HWC")
    with pytest.raises(ArgumentError, match="window_size must be odd"):
        ours(images, lambda x: fn.gaussian_blur(x, window_size=4), "HWC")
