"""random.normal and random.uniform's dtype and shape-like input: DALI's shapes and types, the
distributions' moments (DALI's generator differs, so values are not compared), determinism per
(seed, epoch, sample), per-sample mean and stddev, and errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.keyed_random import SampleContext
from raypipe.operators.random import Beta, Choice, Normal, Uniform

SAMPLES = [np.zeros((3, 4), np.uint8), np.zeros((2, 5), np.uint8)]

# (id, build(data, fn, types)): compared with DALI for shapes and types only
CASES = [
    ("normal", lambda x, fn, types: fn.random.normal()),
    ("normal-shape", lambda x, fn, types: fn.random.normal(shape=[2, 3], mean=5.0, stddev=2.0)),
    ("normal-int32", lambda x, fn, types: fn.random.normal(shape=4, stddev=100.0, dtype=types.INT32)),
    ("normal-float64", lambda x, fn, types: fn.random.normal(shape=3, dtype=types.FLOAT64)),
    ("normal-shape-like", lambda x, fn, types: fn.random.normal(x)),
    ("uniform-int32", lambda x, fn, types: fn.random.uniform(range=[0, 10], shape=4, dtype=types.INT32)),
    ("uniform-uint8", lambda x, fn, types: fn.random.uniform(range=[0, 10], shape=4, dtype=types.UINT8)),
    ("uniform-float64", lambda x, fn, types: fn.random.uniform(range=[0, 10], shape=4, dtype=types.FLOAT64)),
    ("uniform-values-int", lambda x, fn, types: fn.random.uniform(values=[1, 3], shape=4, dtype=types.INT16)),
    ("uniform-shape-like", lambda x, fn, types: fn.random.uniform(x)),
    ("coin-flip-shape-like", lambda x, fn, types: fn.random.coin_flip(x, probability=0.3)),
    ("coin-flip-number-input", lambda x, fn, types: fn.random.coin_flip(0.4)),  # a shape-like scalar
]


@pytest.mark.parametrize("case, build", CASES, ids=[c[0] for c in CASES])
def test_shapes_and_types_are_dalis(ours, dali, case, build):
    theirs = dali(SAMPLES, build)
    mine = ours(SAMPLES, lambda x: build(x, fn, types))
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape


@pytest.mark.parametrize("dtype", [types.FLOAT16, types.BOOL])
def test_types_dali_refuses_are_refused_by_name(dtype):
    for op in ("normal", "uniform"):
        with pytest.raises(rp.ArgumentError, match=f"random.{op}: dtype .* is not supported"):
            (Normal if op == "normal" else Uniform)("cpu", 0, dtype=dtype)


def _values(ours, build, n=8):
    ((samples, _),) = ours([np.zeros(1, np.uint8)] * n, build)
    return np.stack(samples)


def test_coin_flip_with_a_shape_like_input(ours):
    """One flip per value of each sample of the input, in its shape; ``shape`` and an input together
    are refused."""
    ((flips, layout),) = ours(SAMPLES, lambda x: fn.random.coin_flip(x, probability=1.0), layout="HW")
    assert layout == "" and [f.shape for f in flips] == [(3, 4), (2, 5)]
    assert all(f.dtype == np.int32 and (f == 1).all() for f in flips)
    ((scalars, _),) = ours(SAMPLES, lambda x: fn.random.coin_flip(0.4, probability=0.0))
    assert all(f.shape == () and int(f) == 0 for f in scalars)
    with pytest.raises(rp.ArgumentError, match="give shape or a shape-like input, not both"):
        ours(SAMPLES, lambda x: fn.random.coin_flip(x, shape=[2]))


def test_normal_moments_and_determinism(ours):
    values = _values(ours, lambda x: fn.random.normal(shape=[4000], mean=3.0, stddev=2.0))
    assert values.dtype == np.float32 and values.shape == (8, 4000)
    assert abs(values.mean() - 3.0) < 0.05 and abs(values.std() - 2.0) < 0.05
    assert abs(np.mean(((values - 3.0) / 2.0) ** 4) - 3.0) < 0.15  # a normal's kurtosis
    assert abs(np.mean(np.abs(values - 3.0) < 2.0) - 0.6827) < 0.01  # one sigma
    np.testing.assert_array_equal(values, _values(ours, lambda x: fn.random.normal(shape=[4000], mean=3.0, stddev=2.0)))
    other = ours([np.zeros(1, np.uint8)] * 8, lambda x: fn.random.normal(shape=[4000]), seed=1)[0][0]
    assert not np.array_equal(np.stack(other), (values - 3.0) / 2.0)


def test_normal_moments_against_dali(dali):
    theirs = np.stack(dali([np.zeros(1, np.uint8)] * 8, lambda x, fn, types: fn.random.normal(shape=[4000]))[0][0])
    assert abs(theirs.mean()) < 0.05 and abs(theirs.std() - 1.0) < 0.05


def test_normal_per_sample_mean_and_stddev(ours):
    def build(x):
        mean = fn.python_function(x, function=lambda s: np.float32(100.0 * s[0]))
        return fn.random.normal(shape=[3000], mean=mean, stddev=fn.constant(fdata=0.5))

    ((samples, _),) = ours([np.array([k], np.uint8) for k in range(4)], build)
    for k, sample in enumerate(samples):
        assert abs(sample.mean() - 100.0 * k) < 0.05 and abs(sample.std() - 0.5) < 0.03


def test_normal_integer_type_rounds_and_saturates(ours):
    values = _values(ours, lambda x: fn.random.normal(shape=[2000], mean=-1.0, stddev=50.0, dtype=types.UINT8))
    assert values.dtype == np.uint8 and (values == 0).mean() > 0.45 and values.max() > 50


def test_uniform_types(ours):
    ints = _values(ours, lambda x: fn.random.uniform(range=[0, 10], shape=[2000], dtype=types.INT32))
    assert ints.dtype == np.int32 and set(np.unique(ints)) == set(range(11))  # 10 from rounding, as DALI warns
    doubles = _values(ours, lambda x: fn.random.uniform(range=[2, 3], shape=[2000], dtype=types.FLOAT64))
    assert doubles.dtype == np.float64 and 2 <= doubles.min() and doubles.max() < 3 and abs(doubles.mean() - 2.5) < 0.01
    picks = _values(ours, lambda x: fn.random.uniform(values=[1, 3], shape=[100], dtype=types.INT16))
    assert picks.dtype == np.int16 and set(np.unique(picks)) == {1, 3}
    default = _values(ours, lambda x: fn.random.uniform(range=[2, 3], shape=[10]))
    assert default.dtype == np.float32


@pytest.mark.parametrize(
    "range_, match", [([1, 1], r"must not be empty \(lo < hi\), got \[1, 1\]"), ([2, 1], "lo <= hi")]
)
def test_uniform_refuses_an_empty_or_reversed_range_as_dali_does(range_, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.random.uniform(range=range_)

    with pytest.raises(rp.ArgumentError, match=f"random.uniform: range .*{match}"):
        pipe().build()


def test_uniform_picks_from_values_whatever_the_range(ours):
    values = _values(ours, lambda x: fn.random.uniform(range=[1, 1], values=[4, 5], shape=[50]))
    assert set(np.unique(values)) == {4, 5}


def test_shape_like_draws_each_sample_alone_as_in_a_chunk():
    op = Normal("cpu", 3)
    ctxs = [SampleContext(5, 1, i) for i in range(3)]
    inputs = [np.zeros((2, 3)), np.zeros(4), np.zeros((1, 1, 2))]
    chunk = op.run_chunk([inputs], {}, ctxs)
    assert [c.shape for c in chunk] == [(2, 3), (4,), (1, 1, 2)]
    for got, x, ctx in zip(chunk, inputs, ctxs, strict=True):
        np.testing.assert_array_equal(got, op.run_sample([x], {}, ctx))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"stddev": -1.0}, "stddev must be non-negative"),
        ({"mean": "x"}, "mean must be a number"),
        ({"shape": [-1]}, "shape must hold non-negative ints"),
    ],
)
def test_normal_argument_errors_before_anything_runs(kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.random.normal(**kwargs)

    with pytest.raises(rp.ArgumentError, match=f"random.normal: .*{match}"):
        pipe().build()


def test_normal_and_uniform_on_the_gpu_draw_what_the_cpu_draws():
    """``device="gpu"`` (on the GPU stage; the host path where there is no GPU) keys each sample's
    values as the CPU operator does: the same values, the input's shapes."""
    volumes = [np.zeros((1, 3, 4, 5), np.float32), np.zeros((1, 2, 2, 6), np.float32)]

    def build(gpu: bool):
        @rp.pipeline_def(batch_size=2, num_threads=1, seed=6)
        def pipe():
            x = fn.external_source(source=lambda: volumes, batch=True)
            x = x.gpu() if gpu else x
            spread = fn.random.uniform(range=(0.5, 1.0), seed=13)  # own seeds: graphs of other places
            return fn.random.normal(x, stddev=spread, seed=11), fn.random.uniform(x, range=(2.0, 3.0), seed=12)

        return pipe()

    results = []
    for gpu in (False, True):
        with warnings.catch_warnings(), build(gpu) as p:
            warnings.simplefilter("ignore")  # no GPU here: the GPU stage runs on the host
            results.append([[np.asarray(out.as_cpu().at(i)) for i in range(2)] for out in p.run()])
    for cpu_out, gpu_out in zip(*results, strict=True):
        for a, b in zip(cpu_out, gpu_out, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype == np.float32
            np.testing.assert_array_equal(a, b)


# --- random.choice and random.beta ---

# (id, samples, layout, build(data, fn, types)): compared with DALI for shapes, types and layouts
CHOICE_CASES = [
    ("rows", SAMPLES, "", lambda x, fn, types: fn.random.choice(x)),
    ("rows-shape", SAMPLES, "AB", lambda x, fn, types: fn.random.choice(x, shape=3)),
    ("rows-one", SAMPLES, "AB", lambda x, fn, types: fn.random.choice(x)),
    ("rows-2d-shape", SAMPLES, "AB", lambda x, fn, types: fn.random.choice(x, shape=[3, 2])),
    (
        "values",
        [np.array([1.5, 2.5], np.float32), np.array([7.0], np.float32)],
        "X",
        lambda x, fn, types: fn.random.choice(x),
    ),
    ("values-shape", [np.array([1, 2, 3], np.int16)], "X", lambda x, fn, types: fn.random.choice(x, shape=[2, 2])),
    ("values-shape-1", [np.array([1, 2, 3], np.int16)], "X", lambda x, fn, types: fn.random.choice(x, shape=4)),
    ("bools", [np.array([True, False])], "", lambda x, fn, types: fn.random.choice(x, shape=4)),
    ("halves", [np.array([1.5, 2.5], np.float16)], "", lambda x, fn, types: fn.random.choice(x, shape=4)),
    ("count", [np.array(5, np.int64), np.array(3, np.int64)], "", lambda x, fn, types: fn.random.choice(x, shape=4)),
    ("count-uint8", [np.array(5, np.uint8)], "", lambda x, fn, types: fn.random.choice(x, p=[0.5, 0, 0, 0, 0.5])),
    ("shape-like", [np.array([1, 2, 3], np.int32)], "X", lambda x, fn, types: fn.random.choice(x, x)),
    ("constant-count", [np.zeros(1)], "", lambda x, fn, types: fn.random.choice(5, shape=2)),
    ("constant-values", [np.zeros(1)], "", lambda x, fn, types: fn.random.choice([0.5, 1.5], shape=2)),
]


@pytest.mark.parametrize("case, samples, layout, build", CHOICE_CASES, ids=[c[0] for c in CHOICE_CASES])
def test_choice_shapes_types_and_layouts_are_dalis(ours, dali, case, samples, layout, build):
    theirs = dali(samples, build, layout=layout)
    mine = ours(samples, lambda x: build(x, fn, types), layout=layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape


def _frequencies(values, support) -> np.ndarray:
    return np.array([(values == v).mean() for v in support])


def test_choice_frequencies(ours):
    counts = _values(ours, lambda x: fn.random.choice(5, shape=[5000]))
    assert counts.dtype == np.int32 and set(np.unique(counts)) == set(range(5))
    assert np.abs(_frequencies(counts, range(5)) - 0.2).max() < 0.01
    p = [0.1, 0.0, 0.6, 0.3]
    picks = _values(ours, lambda x: fn.random.choice([10.0, 20.0, 30.0, 40.0], p=p, shape=[5000]))
    assert picks.dtype == np.float32 and not (picks == 20.0).any()
    assert np.abs(_frequencies(picks, [10.0, 20.0, 30.0, 40.0]) - p).max() < 0.01
    rows = np.array([[1, 2, 3], [4, 5, 6]], np.int16)
    ((samples, _),) = ours([rows] * 4, lambda x: fn.random.choice(x, shape=[2000]))
    picked = np.concatenate(samples)
    assert picked.shape == (8000, 3) and {tuple(r) for r in picked} == {(1, 2, 3), (4, 5, 6)}
    assert abs((picked[:, 0] == 1).mean() - 0.5) < 0.02


def test_choice_against_dali_frequencies(dali):
    p = [0.1, 0.0, 0.6, 0.3]
    ((theirs, _),) = dali([np.zeros(1)] * 4, lambda x, fn, types: fn.random.choice(4, p=p, shape=[5000]))
    assert np.abs(_frequencies(np.stack(theirs), range(4)) - p).max() < 0.01


def test_choice_per_sample_p_and_shape(ours):
    ps = [np.array([1.0, 0.0, 0.0], np.float32), np.array([0.0, 0.5, 0.5], np.float32)]
    ((samples, _),) = ours(
        [np.array([7, 8, 9], np.int32)] * 2, lambda x, p: fn.random.choice(x, p=p, shape=50), per_sample=[ps]
    )
    assert (samples[0] == 7).all() and set(np.unique(samples[1])) == {8, 9}
    shapes = [np.array([2, 3], np.int32), np.array([4, 1], np.int32)]
    ((samples, _),) = ours([np.array(6, np.int32)] * 2, lambda x, s: fn.random.choice(x, shape=s), per_sample=[shapes])
    assert [s.shape for s in samples] == [(2, 3), (4, 1)] and all(s.dtype == np.int32 for s in samples)
    ((samples, _),) = ours([np.array([1, 2], np.int32)] * 2, lambda x: fn.random.choice(x, p=0.5, shape=200))
    assert all(set(np.unique(s)) == {1, 2} for s in samples)  # one probability: every value's


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"p": [0.5, 0.4]}, "p must sum to 1, got 0.9"),
        ({"p": [1.5, -0.5]}, r"p must hold probabilities in \[0, 1\]"),
        ({"p": "x"}, r"p must hold probabilities|p must be a number"),
        ({"shape": [-1]}, "shape must hold non-negative ints"),
        ({"shape": 2, "_shape_like": True}, "shape cannot be given with a shape-like input"),
        ({"no_such": 1}, "unexpected keyword argument 'no_such'"),
    ],
)
def test_choice_argument_errors_before_anything_runs(kwargs, match):
    shape_like = kwargs.pop("_shape_like", False)

    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        values = fn.external_source(source=lambda: [np.array([1, 2], np.int32)], batch=True)
        return fn.random.choice(values, *([values] if shape_like else []), **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"random.choice: .*{match}"):
        pipe().build()


@pytest.mark.parametrize(
    "sample, kwargs, match",
    [
        (np.array(2.0, np.float32), {}, "a scalar input .* must be an integer, got float32"),
        (np.array(0, np.int32), {}, "needs a positive number of values to choose from, got 0"),
        (np.zeros((0, 3), np.int32), {}, "needs a positive number of values to choose from, got 0"),
        (np.array([1, 2, 3], np.int32), {"p": [0.5, 0.5]}, "p has 2 probabilities for 3 values"),
        (np.array([1, 2, 3], np.int32), {"p": 0.5}, "p must hold probabilities in .* summing to 1"),
    ],
)
def test_choice_data_errors_name_the_operator(ours, sample, kwargs, match):
    with pytest.raises(rp.SampleError, match=f"random.choice: {match}"):
        ours([sample], lambda x: fn.random.choice(x, **kwargs))


BETA_CASES = [
    ("scalar", lambda x, fn, types: fn.random.beta()),
    ("shape", lambda x, fn, types: fn.random.beta(shape=[2, 3], alpha=0.5, beta=0.5)),
    ("float64", lambda x, fn, types: fn.random.beta(shape=3, dtype=types.FLOAT64)),
    ("shape-like", lambda x, fn, types: fn.random.beta(x)),
    ("empty", lambda x, fn, types: fn.random.beta(shape=0)),
]


@pytest.mark.parametrize("case, build", BETA_CASES, ids=[c[0] for c in BETA_CASES])
def test_beta_shapes_types_and_layouts_are_dalis(ours, dali, case, build):
    theirs = dali(SAMPLES, build, layout="AB")
    mine = ours(SAMPLES, lambda x: build(x, fn, types), layout="AB")
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape


def _beta_moment(alpha: float, beta: float, k: int) -> float:
    """E[X**k] of Beta(alpha, beta)."""
    return math.prod((alpha + r) / (alpha + beta + r) for r in range(k))


@pytest.mark.parametrize("alpha, beta", [(2.0, 5.0), (0.5, 0.5), (1.0, 1.0), (0.05, 3.0)])
def test_beta_moments(ours, alpha, beta):
    """Mean and variance within five standard errors (from the distribution's own moments)."""
    values = _values(ours, lambda x: fn.random.beta(alpha=alpha, beta=beta, shape=[5000]), n=4).astype(np.float64)
    assert values.min() >= 0.0 and values.max() <= 1.0
    m1, m2, m3, m4 = (_beta_moment(alpha, beta, k) for k in (1, 2, 3, 4))
    var = m2 - m1**2
    fourth = m4 - 4 * m3 * m1 + 6 * m2 * m1**2 - 3 * m1**4  # the central fourth moment
    assert abs(values.mean() - m1) < 5 * math.sqrt(var / values.size)
    assert abs(values.var() - var) < 5 * math.sqrt((fourth - var**2) / values.size)


def test_beta_moments_against_dali(dali):
    build = lambda x, fn, types: fn.random.beta(alpha=2.0, beta=5.0, shape=[5000])  # noqa: E731
    theirs = np.stack(dali([np.zeros(1)] * 4, build)[0][0])
    assert abs(theirs.mean() - 2 / 7) < 0.005 and abs(theirs.var() - 10 / 392) < 0.002


def test_beta_float64_and_per_sample_parameters(ours):
    doubles = _values(ours, lambda x: fn.random.beta(shape=[10], dtype=types.FLOAT64))
    assert doubles.dtype == np.float64
    alphas = [np.float32(a) for a in (1.0, 9.0)]
    betas = [np.float32(b) for b in (9.0, 1.0)]
    ((samples, _),) = ours(
        [np.zeros(1)] * 2, lambda x, a, b: fn.random.beta(alpha=a, beta=b, shape=[4000]), per_sample=[alphas, betas]
    )
    assert abs(samples[0].mean() - 0.1) < 0.01 and abs(samples[1].mean() - 0.9) < 0.01


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alpha": 0.0}, "alpha must be positive"),
        ({"beta": -1.0}, "beta must be positive"),
        ({"alpha": float("inf")}, "alpha must be finite"),
        ({"dtype": types.INT32}, "dtype int32 is not supported"),
        ({"dtype": types.FLOAT16}, "dtype float16 is not supported"),
        ({"shape": [2, -1]}, "shape must hold non-negative ints"),
    ],
)
def test_beta_argument_errors_before_anything_runs(kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.random.beta(**kwargs)

    with pytest.raises(rp.ArgumentError, match=f"random.beta: .*{match}"):
        pipe().build()


def test_beta_per_sample_errors_name_the_operator(ours):
    with pytest.raises(rp.SampleError, match="random.beta: alpha must be positive"):
        ours([np.zeros(1)], lambda x, a: fn.random.beta(alpha=a), per_sample=[[np.float32(-1.0)]])


@pytest.mark.parametrize(
    "cls, kwargs", [(Choice, {"shape": 7}), (Choice, {"p": [0.2, 0.8], "shape": 7}), (Beta, {"shape": 7})]
)
def test_choice_and_beta_draw_each_sample_alone_as_in_a_chunk(cls, kwargs):
    op = cls("cpu", 3, **kwargs)
    op.bind_inputs(1 if cls is Choice else 0, ())
    ctxs = [SampleContext(5, 1, i) for i in range(4)]
    inputs = [[np.array([3, 4], np.int32)] * 4] if cls is Choice else []
    chunk = op.run_chunk(inputs, {}, ctxs)
    again = cls("cpu", 3, **kwargs).run_chunk(inputs, {}, ctxs[::-1])[::-1]
    for k, ctx in enumerate(ctxs):
        alone = op.run_sample([i[k] for i in inputs], {}, ctx)
        np.testing.assert_array_equal(chunk[k], alone)
        np.testing.assert_array_equal(chunk[k], again[k])


def _keyed(batch_size, runs, threads, seed=7):
    @rp.pipeline_def(batch_size=batch_size, num_threads=threads, seed=seed)
    def pipe():
        return (
            fn.random.choice(10, shape=5),
            fn.random.choice([1.0, 2.0], p=[0.3, 0.7], shape=4),
            fn.random.beta(shape=3),
        )

    out = []
    with pipe() as p:
        for _ in range(runs):
            out.append([[np.asarray(o.at(i)) for i in range(batch_size)] for o in p.run()])
    return [np.concatenate([np.stack(run[k]) for run in out]) for k in range(3)]


def test_choice_and_beta_do_not_depend_on_threads_or_batches():
    one = _keyed(4, 1, 1)
    for other in (_keyed(4, 1, 3), _keyed(2, 2, 2)):
        for a, b in zip(one, other, strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(one, _keyed(4, 1, 1, seed=8), strict=True):
        assert not np.array_equal(a, b)
