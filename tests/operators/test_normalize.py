"""normalize: against DALI 2.4's CPU operator on real decoded JPEGs (per-sample and batch
statistics, axes, given and per-sample mean and stddev, epsilon, ddof, scale, shift, dtypes), and
against numpy float64 statistics without DALI.

Tolerance: raypipe takes the statistics in float64 and DALI in float32 with its own summation
order: float results within 1e-5 absolute (unit-variance values), integer results within 1 where
the exact value is next to a rounding tie (at most 0.5% of the values)."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError


def assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert diff.max() <= 1
        assert np.count_nonzero(diff) <= 5e-3 * diff.size
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


MEANS = [np.full((1, 1, 3), v, np.float32) for v in (90.0, 100.0, 110.0, 120.0)]
STDDEVS = [np.full((1, 1, 3), v, np.float32) for v in (40.0, 50.0, 60.0, 70.0)]

# (id, per-sample batches, build(x, fn, types, device, *per_sample)); raypipe's batch=True runs on gpu
CASES = [
    ("default", [], lambda x, fn, types, d: fn.normalize(x, device=d)),
    ("axes", [], lambda x, fn, types, d: fn.normalize(x, axes=[0, 1], device=d)),
    (
        "names-u8",
        [],
        lambda x, fn, types, d: fn.normalize(x, axis_names="HW", scale=64, shift=128, dtype=types.UINT8, device=d),
    ),
    ("epsilon-ddof", [], lambda x, fn, types, d: fn.normalize(x, epsilon=50.0, ddof=1, device=d)),
    ("given", [], lambda x, fn, types, d: fn.normalize(x, mean=100.0, stddev=60.0, epsilon=4.0, device=d)),
    (
        "per-sample",
        [MEANS, STDDEVS],
        lambda x, fn, types, d, m, s: fn.normalize(x, axes=[0, 1], mean=m, stddev=s, device=d),
    ),
    ("mean-only", [MEANS], lambda x, fn, types, d, m: fn.normalize(x, axes=[0, 1], mean=m, device=d)),
    ("int16", [], lambda x, fn, types, d: fn.normalize(x, scale=1000, dtype=types.INT16, device=d)),
    ("batch", [], lambda x, fn, types, d: fn.normalize(x, batch=True, device=d)),
    ("batch-axes", [], lambda x, fn, types, d: fn.normalize(x, batch=True, axis_names="HW", shift=1.0, device=d)),
]


# batch statistics are a batch step on either device (on the CPU, after the CPU stage gathers the batch)
RUNS = [(d, *c) for c in CASES for d in ("cpu", "gpu")]


@pytest.mark.parametrize("device, case, values, build", RUNS, ids=[f"{r[1]}-{r[0]}" for r in RUNS])
def test_against_dali(ours, dali, images, device, case, values, build):
    ((theirs, their_layout),) = dali(
        images, lambda x, fn, types, *a: build(x, fn, types, "cpu", *a), "HWC", per_sample=values
    )
    ((mine, my_layout),) = ours(
        images, lambda x, *a: build(x.gpu() if device == "gpu" else x, fn, types, device, *a), "HWC", per_sample=values
    )
    assert my_layout == their_layout == "HWC"
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their)


def test_statistics_without_dali(ours, images):
    (samples, _), (batched, _) = ours(
        images,
        lambda x: (fn.normalize(x, axes=[0, 1], ddof=1), fn.normalize(x.gpu(), batch=True, scale=2.0, device="gpu")),
        "HWC",
    )
    pixels = np.concatenate([i.reshape(-1) for i in images]).astype(np.float64)
    for image, out, whole in zip(images, samples, batched, strict=True):
        values = image.astype(np.float64)
        mean, std = values.mean(axis=(0, 1)), values.std(axis=(0, 1), ddof=1)
        assert_close(out, ((values - mean) / std).astype(np.float32))
        assert_close(whole, (2 * (values - pixels.mean()) / pixels.std()).astype(np.float32))
        assert abs(float(out.mean())) < 1e-4


def test_constant_samples_give_shift(ours):
    (((out,), _),) = ours([np.full((3, 4), 7, np.uint8)], lambda x: fn.normalize(x, shift=0.5))
    assert out.dtype == np.float32 and (out == 0.5).all()


def test_batch_statistics_on_the_cpu_equal_the_gpu_batch_step(ours, images):
    (on_cpu, _), (on_gpu, _) = ours(
        images, lambda x: (fn.normalize(x, batch=True), fn.normalize(x.gpu(), batch=True, device="gpu")), "HWC"
    )
    for a, b in zip(on_cpu, on_gpu, strict=True):
        np.testing.assert_array_equal(a, b)


def test_axes_and_axis_names_are_exclusive(ours, images):
    with pytest.raises(ArgumentError, match="mutually exclusive"):
        ours(images, lambda x: fn.normalize(x, axes=[0], axis_names="H"), "HWC")
