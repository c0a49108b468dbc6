"""random.normal and random.uniform's dtype and shape-like input: DALI's shapes and types, the
distributions' moments (DALI's generator differs, so values are not compared), determinism per
(seed, epoch, sample), per-sample mean and stddev, and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.keyed_random import SampleContext
from raypipe.operators.random import Normal, Uniform

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
