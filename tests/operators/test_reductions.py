"""The ``reductions`` against DALI 2.4's CPU build where installed, on ``cpu`` and ``gpu``: ``min``,
``max``, ``sum``, ``mean``, ``mean_square`` and ``rms`` over every axis, given axes, axis names and
``keep_dims``, on volumes of every type DALI takes; every ``dtype`` each allows (and that the others
fail); ``std_dev`` and ``variance`` about a mean from ``reductions.mean`` or given per sample, with
``ddof``; empty, 0-d and overflowing samples. Float32 sums are DALI's bit for bit (its summation
order). Everywhere: the values against numpy, DALI's order on a sum where it matters, and the
errors for bad arguments and samples."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(9)
SHAPES = [(2, 5, 6, 7), (3, 9, 20, 11)]
TYPE_NAMES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32"]
DALI_TYPES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT"]


def _samples(dtype: str) -> list[np.ndarray]:
    """Two CDHW volumes of ``dtype``: integers over their whole range (so narrow sums wrap)."""
    if dtype == "float32":
        return [(RNG.normal(size=shape) * 100).astype(np.float32) for shape in SHAPES]
    info = np.iinfo(dtype)
    return [RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True) for shape in SHAPES]


SAMPLES = {name: _samples(name) for name in TYPE_NAMES}
ARGS = [
    {},
    {"axes": [1, 2]},
    {"axis_names": "DW"},
    {"axes": [0], "keep_dims": True},
    {"axis_names": "HW", "keep_dims": True},
]
SINGLE = ["min", "max", "sum", "mean", "mean_square", "rms"]
SUMS = ["sum", "mean", "mean_square", "rms"]


def _assert_same(mine, theirs):
    assert mine[0][1] == theirs[0][1]
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)  # exact: NaN equals NaN, DALI's summation order


def _on_both_devices(ours, samples, build, layout="", per_sample=()):
    """raypipe's outputs on ``cpu`` and on ``gpu`` (every input moved there), from one pipeline."""
    both = ours(samples, lambda *xs: (build(*xs), build(*(x.gpu() for x in xs))), layout=layout, per_sample=per_sample)
    return [both[0]], [both[1]]


@pytest.mark.parametrize("args", ARGS, ids=range(len(ARGS)))
@pytest.mark.parametrize("dtype", TYPE_NAMES)
@pytest.mark.parametrize("name", SINGLE)
def test_reductions_match_dali(ours, dali, name, dtype, args):
    samples = SAMPLES[dtype]
    theirs = dali(samples, lambda x, f, t: getattr(f.reductions, name)(x, **args), layout="CDHW")
    for mine in _on_both_devices(ours, samples, lambda x: getattr(fn.reductions, name)(x, **args), "CDHW"):
        _assert_same(mine, theirs)


@pytest.mark.parametrize("dtype", TYPE_NAMES)
@pytest.mark.parametrize("name", SUMS)
def test_every_dtype_dali_allows_and_no_other(ours, dali, name, dtype):
    samples = SAMPLES[dtype]
    for ours_type, dali_type in zip([*TYPE_NAMES, "float64"], [*DALI_TYPES, "FLOAT64"], strict=True):
        args = {"axes": [1, 3], "dtype": dali_type}
        try:
            theirs = dali(samples, lambda x, f, t, a=args: _reduce(f, t, name, x, **a))
        except RuntimeError:  # DALI: "Unsupported types"
            with pytest.raises((ArgumentError, SampleError), match="dtype"):
                ours(samples, lambda x, a=args: _reduce(fn, types, name, x, **a))
            continue
        for mine in _on_both_devices(ours, samples, lambda x, a=args: _reduce(fn, types, name, x, **a)):
            _assert_same(mine, theirs)
            assert mine[0][0][0].dtype == np.dtype(ours_type)


def _reduce(f, t, name, *inputs, **args):
    """``f.reductions.<name>(*inputs, **args)`` with ``dtype`` given by its name in ``t`` (DALI's or
    raypipe's ``fn`` and ``types``)."""
    if "dtype" in args:
        args["dtype"] = getattr(t, args["dtype"])
    return getattr(f.reductions, name)(*inputs, **args)


DEVIATION_ARGS = [
    {},
    {"axes": [1, 2], "ddof": 1},
    {"axis_names": "DW"},
    {"axes": [0], "keep_dims": True, "ddof": 1},
    {"axis_names": "HW", "keep_dims": True, "ddof": 2},
    {"axes": [-1, 0, 2]},
]


@pytest.mark.parametrize("mean_keeps_dims", [False, True])
@pytest.mark.parametrize("args", DEVIATION_ARGS, ids=range(len(DEVIATION_ARGS)))
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int16", "int32", "uint64"])
@pytest.mark.parametrize("name", ["std_dev", "variance"])
def test_deviations_about_a_computed_mean_match_dali(ours, dali, name, dtype, args, mean_keeps_dims):
    samples = SAMPLES[dtype]
    reduced = {k: v for k, v in args.items() if k in ("axes", "axis_names")}

    def build(x, f):
        return getattr(f.reductions, name)(x, f.reductions.mean(x, **reduced, keep_dims=mean_keeps_dims), **args)

    theirs = dali(samples, lambda x, f, t: build(x, f), layout="CDHW")
    for mine in _on_both_devices(ours, samples, lambda x: build(x, fn), "CDHW"):
        _assert_same(mine, theirs)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("name", ["std_dev", "variance"])
def test_deviations_about_a_given_mean_match_dali(ours, dali, name, keep):
    samples = SAMPLES["int16"]
    shapes = [(s.shape[0], 1, 1, s.shape[3]) if keep else (s.shape[0], s.shape[3]) for s in samples]
    means = [np.full(shapes[0], 3.25, np.float32), np.linspace(-50, 50, 33, dtype=np.float32).reshape(shapes[1])]
    theirs = dali(samples, lambda x, f, t, m: getattr(f.reductions, name)(x, m, axes=[1, 2]), per_sample=[means])
    for mine in _on_both_devices(
        ours, samples, lambda x, m: getattr(fn.reductions, name)(x, m, axes=[1, 2]), per_sample=[means]
    ):
        _assert_same(mine, theirs)
    whole = dali(samples, lambda x, f, t: getattr(f.reductions, name)(x, 1.5, ddof=3))
    _assert_same(ours(samples, lambda x: getattr(fn.reductions, name)(x, 1.5, ddof=3)), whole)


def _edge_cases():
    """(id, samples, operator, arguments, mean arguments or None) where DALI's answer is not a plain
    sum: empty reductions, no axes, 0-d samples, wrap-around, overflow and NaN as an integer."""
    empty = [np.zeros((0, 3), np.float32), np.zeros((2, 0), np.float32)]
    u16 = [np.array([[65535, 65535], [7, 3]], np.uint16)]
    i8 = [np.array([[-100, 100], [-128, 127], [5, -3]], np.int8)]
    cases = []
    for op in SUMS:
        cases += [
            (f"{op}-empty", empty, op, {}, None),
            (f"{op}-empty-axis0", empty, op, {"axes": 0}, None),
            (f"{op}-empty-axis1", empty, op, {"axes": [1]}, None),
            (f"{op}-no-axes", SAMPLES["int16"], op, {"axes": []}, None),
            (f"{op}-no-axis-names", SAMPLES["uint8"], op, {"axis_names": ""}, None),
            (f"{op}-0d", [np.array(7.5, np.float32), np.array(-0.0, np.float32)], op, {}, None),
            (f"{op}-uint16-wraps", u16, op, {"axes": [1]}, None),
            (f"{op}-int8-narrow", i8, op, {"dtype": "INT64" if op == "mean_square" else "INT8"}, None),
            (f"{op}-overflow", [np.array([3e38, 3e38, -1], np.float32)], op, {}, None),
        ]
        cases += [(f"{op}-empty-{t}", [np.zeros((0,), np.dtype(t))], op, {}, None) for t in TYPE_NAMES]
    for t, name in zip(DALI_TYPES[:-1], TYPE_NAMES[:-1], strict=True):  # NaN and overflow to every integer
        cases.append((f"mean-empty-to-{name}", [np.zeros((0, 2), np.dtype(name))], "mean", {"dtype": t}, None))
        cases.append((f"rms-empty-to-{name}", [np.zeros((2, 0), np.dtype(name))], "rms", {"dtype": t}, None))
    order = [np.array([2.0**24] + [1.0] * 32, np.float32)]  # see test_float_sums_in_dalis_order
    cases.append(("sum-order", order, "sum", {}, None))
    for op in ["std_dev", "variance"]:
        cases += [
            (f"{op}-empty", [np.zeros((0, 3), np.float32)], op, {}, {}),
            (f"{op}-empty-axis0", [np.zeros((0, 3), np.uint8)], op, {"axes": 0}, {"axes": 0}),
            (f"{op}-no-axes", SAMPLES["float32"], op, {"axes": []}, {"axes": []}),
            (f"{op}-0d", [np.array(7, np.int32)], op, {}, {}),
            (f"{op}-negative-ddof", SAMPLES["uint8"], op, {"ddof": -2, "axes": [3]}, {"axes": [3]}),
            (f"{op}-int64", SAMPLES["int64"], op, {"axes": [0, 3]}, {"axes": [0, 3]}),
        ]
    return cases


EDGE_CASES = _edge_cases()


@pytest.mark.parametrize("case, samples, name, args, mean", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edge_cases_match_dali(ours, dali, case, samples, name, args, mean):
    layout = "CDHW" if samples[0].ndim == 4 else ""

    def build(x, f, t):
        means = () if mean is None else (f.reductions.mean(x, **mean),)
        return _reduce(f, t, name, x, *means, **args)

    theirs = dali(samples, lambda x, f, t: build(x, f, t), layout=layout)
    for mine in _on_both_devices(ours, samples, lambda x: build(x, fn, types), layout):
        _assert_same(mine, theirs)


# --- raypipe alone (against numpy and values DALI gives) ---


#: float32's epsilon: a float32 sum of n terms is within about n * EPS of the sum of their magnitudes
#: (each addition, and each conversion of a term to float32, rounds by at most EPS / 2 of its value)
EPS = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("dtype", TYPE_NAMES)
def test_values_against_numpy(ours, dtype):
    sample = SAMPLES[dtype][0]
    out = {}
    for name in SUMS:  # sum in its default type (64-bit sums take no other), the others in float32
        args = {"axes": [1, 2]} if name == "sum" else {"axes": [1, 2], "dtype": "FLOAT"}
        out[name] = ours([sample], lambda x, n=name, a=args: _reduce(fn, types, n, x, **a))[0][0][0]
    wide, n = sample.astype(np.float64), sample.shape[1] * sample.shape[2]
    magnitude = np.abs(wide).mean(axis=(1, 2))
    if dtype == "float32":
        assert np.all(np.abs(out["sum"] - wide.sum(axis=(1, 2))) <= n * EPS * np.abs(wide).sum(axis=(1, 2)))
    else:  # integers sum exactly in 64 bits, wrapping as numpy's
        np.testing.assert_array_equal(out["sum"], sample.sum(axis=(1, 2), dtype=out["sum"].dtype))
    assert np.all(np.abs(out["mean"] - wide.mean(axis=(1, 2))) <= (n + 2) * EPS * magnitude)  # and the scaling
    if dtype in ("uint16", "int64", "uint64"):
        return  # their squares wrap (uint16's in int32), as DALI's do
    squares = (wide**2).mean(axis=(1, 2))  # positive terms: the bound is relative, with the square root's
    np.testing.assert_allclose(out["mean_square"], squares, rtol=(n + 3) * EPS)
    np.testing.assert_allclose(out["rms"], np.sqrt(squares), rtol=(n + 4) * EPS)


def test_default_types_are_dalis(ours):
    expected = {
        "sum": {"uint8": "uint64", "int16": "int64", "uint32": "uint64", "int64": "int64", "float32": "float32"},
        "mean": {"uint8": "float32", "int64": "float32", "float32": "float32"},
        "mean_square": {"uint16": "float32", "int32": "float32"},
        "rms": {"int8": "float32", "uint64": "float32"},
    }
    for name, by_input in expected.items():
        for given, output in by_input.items():
            out = ours(SAMPLES[given][:1], lambda x, n=name: getattr(fn.reductions, n)(x))[0][0][0]
            assert out.dtype == np.dtype(output) and out.shape == (), (name, given)


@pytest.mark.parametrize("ddof", [0, 1, 5])
def test_deviations_against_numpy(ours, ddof):
    samples = SAMPLES["float32"]
    out = ours(
        samples,
        lambda x: (
            fn.reductions.variance(x, fn.reductions.mean(x, axes=[1, 3]), axes=[1, 3], ddof=ddof),
            fn.reductions.std_dev(x, fn.reductions.mean(x, axes=[1, 3], keep_dims=True), axes=[1, 3], ddof=ddof),
        ),
    )
    for sample, variance, std in zip(samples, out[0][0], out[1][0], strict=True):
        wide, n = sample.astype(np.float64), sample.shape[1] * sample.shape[3]
        # positive terms (the float32 mean's own error adds only its square): relative bounds
        np.testing.assert_allclose(variance, wide.var(axis=(1, 3), ddof=ddof), rtol=(n + 4) * EPS)
        np.testing.assert_allclose(std, wide.std(axis=(1, 3), ddof=ddof), rtol=(n + 5) * EPS)
        assert variance.dtype == std.dtype == np.float32 and variance.shape == (sample.shape[0], sample.shape[2])


def test_float_sums_in_dalis_order(ours):
    # 33 elements: DALI sums the first 16 and the last 17 apart (to 2**24, where each +1 rounds away,
    # and to 17), then adds them; numpy's unrolled pairwise sum gives 16777244, the exact sum 2**24 + 32
    samples = [np.array([2.0**24] + [1.0] * 32, np.float32)]
    total = ours(samples, fn.reductions.sum)[0][0][0]
    assert total == np.float32(16777232) and np.sum(samples[0]) != total


def test_integer_overflow_and_empty_values_are_dalis(ours):
    def one(samples, build):
        return ours(samples, build)[0][0][0]

    assert one([np.array([200, 100, 1], np.uint8)], lambda x: fn.reductions.sum(x, dtype=types.UINT8)) == 45
    assert one([np.array([200, 100, 1], np.uint8)], lambda x: fn.reductions.mean(x, dtype=types.UINT8)) == 15
    assert one([np.array([-1, -2], np.int8)], lambda x: fn.reductions.mean(x, dtype=types.INT8)) == -1  # truncated
    assert one([np.array([65535, 65535], np.uint16)], fn.reductions.mean_square) == -131071  # int square wraps
    assert np.isnan(one([np.zeros((0, 3), np.float32)], fn.reductions.mean))
    assert one([np.zeros((0, 3), np.uint8)], fn.reductions.sum) == 0
    assert one([np.zeros(0, np.int32)], lambda x: fn.reductions.mean(x, dtype=types.INT32)) == -(2**31)
    assert one([np.zeros(0, np.uint64)], lambda x: fn.reductions.rms(x, dtype=types.UINT64)) == 2**63
    no_axes = one([np.arange(6, dtype=np.float32).reshape(2, 3)], lambda x: fn.reductions.std_dev(x, x + 1.5, axes=[]))
    np.testing.assert_array_equal(no_axes, np.zeros((2, 3), np.float32))


def test_ops_classes_have_dalis_names():
    names = ["Max", "Mean", "MeanSquare", "Min", "RMS", "StdDev", "Sum", "Variance"]
    assert [n for n in dir(ops.reductions) if n in names] == names
    assert ops.reductions.RMS.__name__ == "RMS" and ops.reductions.StdDev.__qualname__ == "reductions.StdDev"


def test_ops_class_runs():
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.arange(6, dtype=np.uint8).reshape(2, 3)])
        mean = ops.reductions.Mean(axes=1)(data)
        return ops.reductions.RMS(dtype=types.UINT8)(data), ops.reductions.Variance(axes=[1], ddof=1)(data, mean)

    with pipe() as p:
        rms, variance = p.run()
    assert np.asarray(rms.at(0)) == 3  # sqrt(55 / 6) truncated
    np.testing.assert_array_equal(np.asarray(variance.at(0)), [1, 1])


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("sum", {"axes": [0], "axis_names": "H"}, "axes and axis_names exclude each other"),
        ("sum", {"dtype": types.FLOAT64}, "dtype must be one of"),
        ("mean", {"dtype": "complex64"}, "dtype must be a numeric or bool type"),
        ("rms", {"ddof": 1}, "ddof"),
        ("max", {"dtype": types.FLOAT}, "dtype"),
        ("variance", {"ddof": 1.5}, "ddof must be an int"),
        ("std_dev", {"ddof": True}, "ddof must be an int"),
        ("std_dev", {"dtype": types.FLOAT}, "dtype"),
        ("mean_square", {"axis_names": "C"}, "names axes not in the input layout"),
    ],
)
def test_bad_arguments_fail_the_build(name, kwargs, message):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((2, 3), np.float32)], layout="HW")
        extra = (fn.reductions.mean(data),) if name in ("std_dev", "variance") else ()
        return getattr(fn.reductions, name)(data, *extra, **kwargs)

    with pytest.raises(ArgumentError, match=message):
        pipe().build()


@pytest.mark.parametrize(
    "samples, build, message",
    [
        ([np.zeros((2, 3), np.float64)], lambda x: fn.reductions.sum(x), "unsupported input type float64"),
        ([np.zeros((2, 3), np.int64)], lambda x: fn.reductions.sum(x, dtype=types.FLOAT), "dtype float32 is not"),
        ([np.zeros((2, 3), np.float32)], lambda x: fn.reductions.mean(x, axes=[1, -1]), "name an axis twice"),
        ([np.zeros((2, 3), np.float32)], lambda x: fn.reductions.rms(x, axes=[2]), "axes 2 is out of range"),
        (
            [np.zeros((2, 3), np.float32)],
            lambda x: fn.reductions.variance(x, fn.reductions.mean(x, axes=1), axes=1, ddof=3),
            "ddof 3 leaves no degrees of freedom in a reduction of 3 elements",
        ),
        ([np.zeros((2, 3), np.float32)], lambda x: fn.reductions.std_dev(x, 1), "mean input must be float32"),
        (
            [np.zeros((2, 3), np.float32)],
            lambda x: fn.reductions.std_dev(x, fn.reductions.mean(x, axes=0), axes=1),
            r"mean input has shape \(3,\), but the output .* has shape \(2,\) \(\(2, 1\) with keep_dims\)",
        ),
    ],
)  # fmt: skip
def test_bad_samples_name_the_sample(ours, samples, build, message):
    with pytest.raises(Exception, match=message) as caught:
        ours(samples, build)
    assert "sample" in str(caught.value)


@pytest.mark.parametrize("axes", [(0, 1), (0,), (1,), (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_min_and_max_over_leading_axes_equal_numpys(axes, dtype):
    """The host's min and max over axes before a kept last one (HWC over HW) run on a transposed
    copy: numpy's own values, NaN included."""
    from raypipe.operators.reductions import Max, Min

    data = np.random.default_rng(5).integers(0, 256, (7, 9, 3)).astype(dtype)
    if dtype == np.float32:
        data[2, 3, 1] = np.nan
    for cls, function in ((Min, np.min), (Max, np.max)):
        op = cls("cpu", 0, axes=list(axes), keep_dims=True)
        got = op.compute(np, [data], {}, None)
        np.testing.assert_array_equal(got, function(data, axis=axes, keepdims=True))
