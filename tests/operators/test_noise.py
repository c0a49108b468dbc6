"""noise.gaussian, noise.salt_and_pepper and noise.shot: DALI 2.4's shapes, types and layouts, its
values wherever they are certain (no spread, certain replacement), the distributions' moments and
frequencies (DALI's generator differs, so noisy values are not compared), keying per (seed, epoch,
sample) whatever the threads or batches, the same values on cpu and gpu, and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.backend import gpu_available
from raypipe.keyed_random import SampleContext
from raypipe.operators.noise import Gaussian, SaltAndPepper, Shot
from raypipe.operators.random import _CHUNK_DRAWS
from raypipe.sample_contexts import SampleContexts

TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32"]

# (id, build(data, fn, types)): compared with DALI for shapes, types and layouts
CASES = [
    ("gaussian", lambda x, fn, types: fn.noise.gaussian(x, stddev=3.0)),
    ("salt_and_pepper", lambda x, fn, types: fn.noise.salt_and_pepper(x, prob=0.3)),
    ("salt_and_pepper-per-channel", lambda x, fn, types: fn.noise.salt_and_pepper(x, prob=0.3, per_channel=True)),
    ("shot", lambda x, fn, types: fn.noise.shot(x, factor=2.0)),
]


def _images(dtype, value=20):
    return [np.full((4, 5, 3), value, dtype), np.full((2, 3, 3), value, dtype)]


def _same_outputs(theirs, mine, values: bool = False):
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape
            if values:
                np.testing.assert_array_equal(my, their)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case, build", CASES, ids=[c[0] for c in CASES])
def test_shapes_types_and_layouts_are_dalis(ours, dali, case, build, dtype):
    for layout in ("HWC", ""):
        theirs = dali(_images(dtype), build, layout=layout)
        _same_outputs(theirs, ours(_images(dtype), lambda x: build(x, fn, rp.types), layout=layout))


@pytest.mark.parametrize("op", ["gaussian", "salt_and_pepper", "shot"])
@pytest.mark.parametrize("dtype", ["float64", "float16", "bool"])
def test_types_dali_refuses_are_refused_by_name(ours, op, dtype):
    with pytest.raises(rp.SampleError, match=f"noise.{op}: unsupported input type {dtype}"):
        ours([np.zeros(3, dtype)], lambda x: getattr(fn.noise, op)(x))


@pytest.mark.parametrize("dtype", TYPES)
def test_gaussian_without_spread_rounds_and_saturates_as_dali(ours, dali, dtype):
    """With ``stddev=0`` the result is certain: the input plus ``mean`` in float32 (float64 for 32-
    and 64-bit integers), rounded and saturated as DALI does (no ties here: see below)."""
    if dtype == "float32":
        row = np.array([0.0, 1.5, -7.25, 3e38, -3e38], np.float32)
    else:
        info = np.iinfo(dtype)
        row = np.array([0, 1, 7, info.max - 1, info.min + 1, info.max // 3], dtype)
    means = [np.float32(m) for m in (0.3, 0.7, -2.2, 200.0, -200.0, 3e9, -3e9, 1e20)]
    samples = [row] * len(means)
    theirs = dali(samples, lambda x, fn, types, mean: fn.noise.gaussian(x, mean=mean, stddev=0.0), per_sample=[means])
    mine = ours(samples, lambda x, mean: fn.noise.gaussian(x, mean=mean, stddev=0.0), per_sample=[means])
    _same_outputs(theirs, mine, values=True)


def test_gaussian_of_large_integers_sums_in_float64_as_dali(ours, dali):
    samples = [np.array([123456789, 16777217], np.int32), np.array([2**60 + 1, 2**62 + 3], np.int64)]
    for sample in samples:
        theirs = dali([sample], lambda x, fn, types: fn.noise.gaussian(x, mean=1.0, stddev=0.0))
        _same_outputs(theirs, ours([sample], lambda x: fn.noise.gaussian(x, mean=1.0, stddev=0.0)), values=True)
    ((mine, _),) = ours(samples[:1], lambda x: fn.noise.gaussian(x, mean=1.0, stddev=0.0))
    np.testing.assert_array_equal(mine[0], [123456790, 16777218])  # exact: float32 would round both


def test_gaussian_rounds_ties_to_even():
    """Ties round to even, as ``cast`` does everywhere (CUDA's rounding; DALI's CPU operator rounds
    them away from zero: 128.5 is 129 there). Noise hits a tie with probability zero."""
    op = Gaussian("cpu", 0, mean=0.5, stddev=0.0)
    got = op.run_sample([np.array([128, 129, 0], np.uint8)], {}, SampleContext(0, 0, 0))
    np.testing.assert_array_equal(got, [128, 130, 0])


def _noisy(ours, build, sample, n=4, seed=0, per_sample=()):
    ((samples, _),) = ours([sample] * n, build, seed=seed, per_sample=per_sample)
    return np.stack(samples)


def test_gaussian_moments(ours):
    values = _noisy(ours, lambda x: fn.noise.gaussian(x, mean=3.0, stddev=2.0), np.zeros(20000, np.float32))
    assert values.dtype == np.float32 and values.shape == (4, 20000)
    assert abs(values.mean() - 3.0) < 0.05 and abs(values.std() - 2.0) < 0.05
    assert abs(np.mean(((values - 3.0) / 2.0) ** 4) - 3.0) < 0.15  # a normal's kurtosis
    assert abs(np.mean(np.abs(values - 3.0) < 2.0) - 0.6827) < 0.01  # one sigma
    ints = _noisy(ours, lambda x: fn.noise.gaussian(x, stddev=10.0), np.full(20000, 100, np.int16))
    assert ints.dtype == np.int16 and abs(ints.mean() - 100.0) < 0.3 and abs(ints.std() - 10.0) < 0.3
    saturated = _noisy(ours, lambda x: fn.noise.gaussian(x, stddev=50.0), np.full(20000, 250, np.uint8))
    assert abs((saturated == 255).mean() - 0.464) < 0.01  # P(250 + noise >= 254.5): P(z > 0.09)


def test_gaussian_moments_against_dali(dali):
    ((theirs, _),) = dali([np.zeros(20000, np.float32)] * 4, lambda x, fn, types: fn.noise.gaussian(x, stddev=2.0))
    theirs = np.stack(theirs)
    assert abs(theirs.mean()) < 0.05 and abs(theirs.std() - 2.0) < 0.05


def test_gaussian_per_sample_mean_and_stddev(ours):
    means = [np.float32(100.0 * k) for k in range(4)]
    stddevs = [np.float32(0.5 + k) for k in range(4)]
    values = _noisy(
        ours,
        lambda x, mean, stddev: fn.noise.gaussian(x, mean=mean, stddev=stddev),
        np.zeros(20000, np.float32),
        per_sample=[means, stddevs],
    )
    for k, sample in enumerate(values):
        assert abs(sample.mean() - 100.0 * k) < 0.05 * (k + 1) and abs(sample.std() - (0.5 + k)) < 0.03 * (k + 1)


@pytest.mark.parametrize("dtype", TYPES)
def test_salt_and_pepper_values_are_dalis(ours, dali, dtype):
    """Certain replacement (``prob=1``; ``salt_vs_pepper`` 1 or 0 per sample): DALI's default values
    (the type's maximum and minimum, 1 and -1 for float32) and given ones converted as C does
    (truncated, then wrapped: 300.7 is 44 as uint8), and ``prob=0`` keeps every value."""
    samples = [np.full((2, 3), 5, dtype)] * 4
    shares = [np.float32(s) for s in (1, 0, 1, 0)]
    for given in ({}, {"salt_val": 300.7, "pepper_val": -5.5}, {"salt_val": 1.7, "pepper_val": -1.7}):
        theirs = dali(
            samples,
            lambda x, fn, types, s, given=given: fn.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=s, **given),
            per_sample=[shares],
        )
        mine = ours(
            samples,
            lambda x, s, given=given: fn.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=s, **given),
            per_sample=[shares],
        )
        _same_outputs(theirs, mine, values=True)
    _same_outputs(
        dali(samples, lambda x, fn, types: fn.noise.salt_and_pepper(x, prob=0.0)),
        ours(samples, lambda x: fn.noise.salt_and_pepper(x, prob=0.0)),
        values=True,
    )


def test_salt_and_pepper_frequencies(ours):
    image = np.full((100, 100, 3), 7.0, np.float32)
    build = lambda x: fn.noise.salt_and_pepper(x, prob=0.3, salt_vs_pepper=0.25, salt_val=9.0, pepper_val=0.0)  # noqa: E731
    values = _noisy(ours, build, image)
    pixels = values[..., 0]
    assert abs((pixels == 9.0).mean() - 0.075) < 0.006 and abs((pixels == 0.0).mean() - 0.225) < 0.01
    assert set(np.unique(values)) == {0.0, 7.0, 9.0}


@pytest.mark.parametrize("layout", ["HWC", "CHW", ""])
def test_salt_and_pepper_replaces_a_pixels_channels_together(ours, layout):
    """Without ``per_channel``, the channels of a pixel (the layout's C axis, or the last axis) are
    kept or replaced together, as DALI's; with it each value alone."""
    image = np.full((3, 40, 50), 7, np.uint8) if layout == "CHW" else np.full((40, 50, 3), 7, np.uint8)
    axis = 0 if layout == "CHW" else -1
    for per_channel in (False, True):
        ((samples, got_layout),) = ours(
            [image] * 2,
            lambda x, per_channel=per_channel: fn.noise.salt_and_pepper(x, prob=0.5, per_channel=per_channel),
            layout=layout,
        )
        assert got_layout == layout
        for sample in samples:
            spread = sample.max(axis=axis).astype(int) - sample.min(axis=axis)
            together = (spread == 0).mean()
            assert together == 1.0 if not per_channel else together < 0.5


def test_salt_and_pepper_needs_channels_first_or_last_as_dali(ours, dali):
    build = lambda x, fn, types: fn.noise.salt_and_pepper(x, prob=0.5)  # noqa: E731
    samples = [np.full((4, 6), 5, np.uint8)]
    with pytest.raises(rp.ArgumentError, match="noise.salt_and_pepper: per_channel=False .* got 'HW'"):
        ours(samples, lambda x: build(x, fn, rp.types), layout="HW")
    mine = ours(samples, lambda x: fn.noise.salt_and_pepper(x, prob=0.5, per_channel=True), layout="HW")
    assert mine[0][1] == "HW"
    with pytest.raises(Exception, match="'C' should be the first or the last dimension"):
        dali(samples, build, layout="HW")


@pytest.mark.parametrize("op", ["gaussian", "salt_and_pepper", "shot"])
def test_empty_and_scalar_samples(ours, op):
    """A scalar is one value, an empty sample stays empty (DALI 2.4's salt_and_pepper crashes on both
    without ``per_channel``: a segmentation fault and a division by zero)."""
    for samples in ([np.uint8(100), np.uint8(7)], [np.zeros((4, 0), np.uint8), np.zeros((0, 3), np.uint8)]):
        ((got, _),) = ours(samples, lambda x: getattr(fn.noise, op)(x))  # a batch has one ndim
        assert [(g.shape, g.dtype) for g in got] == [(s.shape, np.uint8) for s in samples]
    ((got, _),) = ours([np.uint8(5)] * 200, lambda x: fn.noise.salt_and_pepper(x, prob=0.5))
    assert {int(s) for s in got} == {0, 5, 255}


def test_shot_moments_and_quanta(ours):
    values = _noisy(ours, lambda x: fn.noise.shot(x, factor=2.0), np.full(20000, 50, np.float32))
    assert values.dtype == np.float32 and (values % 2 == 0).all()
    assert abs(values.mean() - 50.0) < 0.2 and abs(values.var() - 100.0) < 3.0  # 2 * Poisson(25)
    fine = _noisy(ours, lambda x: fn.noise.shot(x, factor=0.3), np.full(20000, 50, np.uint8))
    assert fine.dtype == np.uint8 and abs(fine.mean() - 50.0) < 0.1 and abs(fine.var() - 15.085) < 0.6
    bright = _noisy(ours, lambda x: fn.noise.shot(x, factor=0.3), np.full(20000, 250, np.uint8))
    assert bright.max() == 255 and abs((bright == 255).mean() - 0.298) < 0.01  # P(0.3 * Poisson(833.3) >= 254.5)
    negative = _noisy(ours, lambda x: fn.noise.shot(x, factor=-2.0), np.full(20000, -50, np.float32))
    assert (negative % 2 == 0).all() and abs(negative.mean() + 50.0) < 0.2 and abs(negative.var() - 100.0) < 3.0
    below_zero = _noisy(ours, lambda x: fn.noise.shot(x, factor=2.0), np.array([-50, -1, 0], np.int32))
    assert (below_zero == 0).all()  # a Poisson mean of max(0, x / factor)


def test_shot_default_factor_is_dalis_effective_one(ours, dali):
    """Without ``factor`` DALI 2.4 applies 12, not the 20 its documentation gives: multiples of 12,
    of variance 12 * 60 at 60; raypipe does the same."""
    sample = np.full(20000, 60, np.float32)
    ((theirs, _),) = dali([sample] * 2, lambda x, fn, types: fn.noise.shot(x))
    for values in (np.stack(theirs), _noisy(ours, lambda x: fn.noise.shot(x), sample, n=2)):
        assert (values % 12 == 0).all() and abs(values.var() - 720.0) < 30.0


def test_shot_factor_zero_is_the_identity_and_extremes_are_kept(ours):
    """``factor`` 0 returns the input, as DALI documents (DALI 2.4 returns zeros); means beyond
    numpy's Poisson range keep their value (the noise is below float32's resolution there); NaN,
    a Poisson mean of max(0, NaN), is 0 as in DALI."""
    sample = np.array([-50.3, 50.3, 0.7, 3.0], np.float32)
    ((got, _),) = ours([sample], lambda x: fn.noise.shot(x, factor=0.0))
    np.testing.assert_array_equal(got[0], sample)
    ((got, _),) = ours([np.array([3e38, 1e20, np.inf, np.nan], np.float32)], lambda x: fn.noise.shot(x, factor=1.0))
    np.testing.assert_array_equal(got[0], np.array([3e38, 1e20, np.inf, 0.0], np.float32))


def test_shot_per_sample_factor(ours):
    factors = [np.float32(f) for f in (0.0, 1.0, 4.0)]
    values = _noisy(
        ours, lambda x, f: fn.noise.shot(x, factor=f), np.full(20000, 40, np.float32), 3, per_sample=[factors]
    )
    assert (values[0] == 40).all()
    assert abs(values[1].var() - 40.0) < 2.0 and abs(values[2].var() - 160.0) < 8.0 and (values[2] % 4 == 0).all()


OPS = [
    (Gaussian, {"stddev": 3.0}),
    (SaltAndPepper, {"prob": 0.5}),
    (SaltAndPepper, {"prob": 0.5, "per_channel": True}),
    (Shot, {"factor": 0.5}),
]


@pytest.mark.parametrize("cls, kwargs", OPS, ids=[f"{c.__name__}-{len(k)}" for c, k in OPS])
def test_a_chunk_gives_each_sample_what_it_gets_alone(cls, kwargs):
    """Keyed per sample: the same values drawn alone, in a chunk of one shape (one draw, split where
    it would exceed the cache), among samples of other shapes, or by another instance."""
    op = cls("cpu", 3, **kwargs)
    big = _CHUNK_DRAWS // 8 + 1  # two samples per draw at most
    inputs = [np.full((big, 3), 100, np.uint8) for _ in range(5)] + [np.full((2, 4, 3), 100, np.uint8)]
    ctxs = [SampleContext(5, 1, i) for i in range(len(inputs))]
    chunk = op.run_chunk([inputs], {}, ctxs)
    again = cls("cpu", 3, **kwargs).run_chunk([inputs[::-1]], {}, ctxs[::-1])[::-1]
    for got, other, x, ctx in zip(chunk, again, inputs, ctxs, strict=True):
        alone = op.run_sample([x], {}, ctx)
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_array_equal(got, alone)
        np.testing.assert_array_equal(got, other)
    assert not np.array_equal(chunk[0], chunk[1])


def _pipeline_values(batch_size, runs, threads, seed=7):
    @rp.pipeline_def(batch_size=batch_size, num_threads=threads, seed=seed)
    def pipe():
        x = fn.external_source(source=lambda: [np.full((6, 5, 3), 100, np.uint8)] * batch_size, batch=True)
        x = fn.reshape(x, layout="HWC")
        return fn.noise.gaussian(x, stddev=30.0), fn.noise.salt_and_pepper(x, prob=0.5), fn.noise.shot(x, factor=3.0)

    out = []
    with pipe() as p:
        for _ in range(runs):
            out.append([[np.asarray(o.at(i)) for i in range(batch_size)] for o in p.run()])
    return [np.concatenate([np.stack(run[k]) for run in out]) for k in range(3)]


def test_values_do_not_depend_on_threads_or_batches():
    one = _pipeline_values(4, 1, 1)
    for other in (_pipeline_values(4, 1, 3), _pipeline_values(2, 2, 2)):
        for a, b in zip(one, other, strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(one, _pipeline_values(4, 1, 1, seed=8), strict=True):
        assert not np.array_equal(a, b)


def test_on_the_gpu_the_values_are_the_cpus():
    """``device="gpu"`` (on the GPU stage; the host path where there is no GPU) keys each sample's
    noise as the CPU operator does: the same values."""
    images = [np.full((5, 6, 3), 100, np.uint8), np.full((3, 4, 3), 100, np.uint8)]

    def build(gpu: bool):
        @rp.pipeline_def(batch_size=2, num_threads=1, seed=6)
        def pipe():
            x = fn.external_source(source=lambda: images, batch=True, layout="HWC")
            x = x.gpu() if gpu else x
            spread = fn.random.uniform(range=(5.0, 20.0), seed=13)  # own seeds: graphs of other places
            return (
                fn.noise.gaussian(x, stddev=spread, seed=11),
                fn.noise.salt_and_pepper(x, prob=0.4, seed=12),
                fn.noise.shot(x, factor=spread, seed=14),
            )

        return pipe()

    results = []
    for gpu in (False, True):
        with warnings.catch_warnings(), build(gpu) as p:
            warnings.simplefilter("ignore")  # no GPU here: the GPU stage runs on the host
            results.append([[np.asarray(out.as_cpu().at(i)) for i in range(2)] for out in p.run()])
    for cpu_out, gpu_out in zip(*results, strict=True):
        for a, b in zip(cpu_out, gpu_out, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype == np.uint8
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("module", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("cls, kwargs", OPS, ids=[f"{c.__name__}-{len(k)}" for c, k in OPS])
def test_the_gpu_stages_batch_gives_the_cpu_values(module, cls, kwargs):
    """``run_batch`` (the GPU stage) on a list of samples or one array holding the batch, with the
    batch's identities as one array, gives what the CPU stage gives each sample."""
    if module == "cupy" and not gpu_available():
        pytest.skip("needs a CUDA GPU")
    xp = np if module == "numpy" else pytest.importorskip("cupy")
    op = cls("gpu", 2, **kwargs)
    batch = np.stack([np.full((7, 9, 3), 50 + 10 * k, np.uint8) for k in range(4)])
    ctxs = SampleContexts(3, 2, np.array([10, 11, 12, 13]))
    expected = [op.run_sample([x], {}, ctx) for x, ctx in zip(batch, ctxs)]
    for inputs in ([xp.asarray(x) for x in batch], xp.asarray(batch)):
        got = op.run_batch(xp, [inputs], {}, ctxs)
        for g, e in zip(got, expected, strict=True):
            g = g.get() if module == "cupy" else g
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize(
    "op, kwargs, match",
    [
        ("gaussian", {"stddev": -1.0}, "stddev must be non-negative"),
        ("gaussian", {"mean": "x"}, "mean must be a number"),
        ("gaussian", {"sigma": 1.0}, "unexpected keyword argument 'sigma'"),
        ("salt_and_pepper", {"prob": 1.5}, r"prob must be in \[0, 1\]"),
        ("salt_and_pepper", {"salt_vs_pepper": -0.1}, r"salt_vs_pepper must be in \[0, 1\]"),
        ("salt_and_pepper", {"salt_val": float("nan")}, "salt_val must be finite"),
        ("salt_and_pepper", {"per_channel": "yes"}, "per_channel must be a bool"),
        ("shot", {"factor": float("inf")}, "factor must be finite"),
    ],
)
def test_argument_errors_before_anything_runs(op, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return getattr(fn.noise, op)(fn.external_source(source=lambda: [np.zeros(3, np.uint8)], batch=True), **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"noise.{op}: .*{match}"):
        pipe().build()


@pytest.mark.parametrize(
    "op, name, value, match",
    [
        ("gaussian", "stddev", np.float32(-1.0), "stddev must be non-negative"),
        ("gaussian", "mean", np.array([1.0, 2.0], np.float32), "mean must be one number per sample"),
        ("salt_and_pepper", "prob", np.float32(2.0), r"prob must be in \[0, 1\]"),
        ("shot", "factor", np.float32(np.nan), "factor must be finite"),
    ],
)
def test_per_sample_argument_errors_name_the_operator(ours, op, name, value, match):
    with pytest.raises(rp.SampleError, match=f"noise.{op}: {match}"):
        ours([np.zeros(3, np.uint8)], lambda x, v: getattr(fn.noise, op)(x, **{name: v}), per_sample=[[value]])
