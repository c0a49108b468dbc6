"""DALI's ``math`` functions: result types and values against float64 references without DALI, and
against DALI 2.4's CPU results on real decoded JPEGs, on the CPU and in the GPU stage.

Float results are compared within 4 float32 ulps (rtol 5e-7, and atol 1e-30 for values near 0):
DALI computes with the C library's float functions and numpy with its own vectorised ones, which
may round the last bit differently; integer and bool results are equal."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe import math as rmath
from raypipe.errors import ArgumentError
from raypipe.operators.math_functions import ARITY, FLOAT_UNARY, evaluate

X = np.array([-3.0, 0.25, 0.5, 2.0, 5.0], np.float32)
REFERENCE = {
    "fabs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt,
    "exp": np.exp,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
}


def assert_float_close(got: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(got, expected, rtol=5e-7 * 4, atol=1e-30)


@pytest.mark.parametrize("function", sorted(FLOAT_UNARY))
def test_float_functions_against_float64(function):
    with np.errstate(all="ignore"):
        out = evaluate(np, function, [X])
        expected = REFERENCE[function](X.astype(np.float64))
    assert out.dtype == np.float32
    assert_float_close(out, expected.astype(np.float32))
    with np.errstate(all="ignore"):
        assert evaluate(np, function, [np.array([1, 4], np.uint8)]).dtype == np.float32
        assert evaluate(np, function, [np.array([1, 4], np.float64)]).dtype == np.float64


def test_types_of_the_other_functions():
    u8, i16, i32, f32 = (np.array([253, 0, 2, 5]).astype(t) for t in ("uint8", "int16", "int32", "float32"))
    assert evaluate(np, "abs", [np.array([-3, 2], np.int16)]).tolist() == [3, 2]
    assert evaluate(np, "abs", [i16]).dtype == np.int16
    assert evaluate(np, "pow", [u8, u8]).tolist() == [237, 1, 4, 53]  # uint8 wraps, as in DALI
    assert evaluate(np, "pow", [i32, np.array(-1, np.int32)]).tolist() == [0, 0, 0, 0]
    assert evaluate(np, "fpow", [i32, i32]).dtype == np.float32
    assert evaluate(np, "atan2", [u8, np.array(1.0, np.float64)]).dtype == np.float64
    assert evaluate(np, "min", [u8, i16]).dtype == np.int16 and evaluate(np, "max", [i32, f32]).dtype == np.float32
    clamped = evaluate(np, "clamp", [u8, i16, np.array(4, np.int32)])
    assert clamped.dtype == np.int32 and clamped.tolist() == [4, 0, 2, 4]
    with pytest.raises(TypeError, match="bool"):
        evaluate(np, "sqrt", [np.array([True])])


# (id, expression on the image batch x; m is raypipe.math or nvidia.dali.math)
UNARY_CASES = sorted(set(FLOAT_UNARY) - {"rsqrt"})
CASES = [(name, lambda x, m, name=name: getattr(m, name)(x * (1 / 255.0))) for name in UNARY_CASES] + [
    ("rsqrt", lambda x, m: m.rsqrt((x + 1) * (1 / 255.0))),  # DALI's gives nan at 0, raypipe's inf
    ("floor-u8", lambda x, m: m.floor(x)),
    ("sqrt-u8", lambda x, m: m.sqrt(x)),
    ("abs", lambda x, m: m.abs(x - 128)),
    ("pow", lambda x, m: m.pow(x, 2)),
    ("pow-u8-u8", lambda x, m: m.pow(x, x)),
    ("fpow", lambda x, m: m.fpow(x, 0.5)),
    ("atan2", lambda x, m: m.atan2(x, 128)),
    ("min", lambda x, m: m.min(x, 100)),
    ("max", lambda x, m: m.max(x * 0.5, x)),
    ("clamp", lambda x, m: m.clamp(x, 50, 200)),
    ("clamp-float", lambda x, m: m.clamp(x * 1.5, 10.5, x)),
    ("clamp-named", lambda x, m: m.clamp(x, lo=50, hi=200)),
    ("pow-named", lambda x, m: m.pow(base=x, exponent=2)),
    ("atan2-named", lambda x, m: m.atan2(y=128, x=x)),
    ("sqrt-named", lambda x, m: m.sqrt(input=x)),
    ("min-list", lambda x, m: m.min(x * 1.0, [100.0, 150.0, 200.0])),  # a tensor constant per channel
    ("clamp-list", lambda x, m: m.clamp(x, 50, [100, 150, 200])),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali_on_images(ours, dali, images, case, build, device):
    import nvidia.dali.math as dali_math

    ((theirs, their_layout),) = dali(images, lambda x, fn, types: build(x, dali_math), "HWC")
    ((mine, my_layout),) = ours(images, lambda x: build(x.gpu() if device == "gpu" else x, rmath), "HWC")
    assert my_layout == their_layout == "HWC"
    for their, my in zip(theirs, mine, strict=True):
        assert my.dtype == their.dtype and my.shape == their.shape
        if my.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                assert_float_close(my, their)
        else:
            np.testing.assert_array_equal(my, their)


def test_operand_names_are_dalis():
    dali_math = pytest.importorskip("nvidia.dali.math")
    for name, arity in ARITY.items():
        dalis = list(inspect.signature(getattr(dali_math, name)).parameters)
        assert len(dalis) == arity and rmath._PARAMETERS.get(name, ("input",)) == tuple(dalis)


def test_wrong_operands_fail_by_name(jpeg_files):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe(call):
        _, labels = fn.readers.file(files=jpeg_files[:1])
        return call(labels)

    for call, match in [
        (lambda x: rmath.clamp(x, low=0, hi=2), "unknown operand 'low'"),
        (lambda x: rmath.clamp(x, 0, lo=1, hi=2), "operand 'lo' given twice"),
        (lambda x: rmath.clamp(x, lo=1), "missing 'hi'"),
        (lambda x: rmath.sqrt(x, x), "takes 1 operands"),
    ]:
        with pytest.raises(ArgumentError, match=match):
            pipe(call).build()


def test_list_and_array_operands_are_tensor_constants():
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=0)
    def pipe():
        x = fn.external_source(source=lambda: [np.float32([3, 0.5]), np.float32([0.2, 4])])
        return rmath.min(x, [1.0, 1.0]), rmath.max(np.float64([1, 1]), x), rmath.clamp(x, 0.5, (1.0, 2.0))

    with pipe() as p:
        low, high, clamped = ([np.asarray(out.at(i)) for i in range(2)] for out in p.run())
    assert all(a.dtype == np.float32 for a in (*low, *high, *clamped))
    assert [a.tolist() for a in low] == [[1.0, 0.5], [np.float32(0.2), 1.0]]
    assert [a.tolist() for a in high] == [[3.0, 1.0], [1.0, 4.0]]
    assert [a.tolist() for a in clamped] == [[1.0, 0.5], [0.5, 2.0]]


def test_fn_math_is_the_math_module(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        _, labels = fn.readers.file(files=jpeg_files[:2], labels=[4, 9])
        return fn.math.sqrt(labels), fn.math.clamp(labels, 5, 8)

    with pipe() as p:
        roots, clamped = (np.asarray(out.as_cpu()).ravel() for out in p.run())
    assert roots.tolist() == [2.0, 3.0] and roots.dtype == np.float32
    assert clamped.tolist() == [5, 8] and clamped.dtype == np.int32
    assert fn.math is rmath and "sqrt" in dir(fn.math)
