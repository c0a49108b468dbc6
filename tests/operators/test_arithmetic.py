"""Arithmetic on pipeline data (DALI's mathematical expressions): DALI's result types and values,
wired through DataNode operators in real pipelines on the CPU and GPU stages."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.operators.arithmetic import apply, constant_dtype

U8 = np.array([1, 200, 3], np.uint8)
F32 = np.array([1.5, -2.0, 3.0], np.float32)
I32 = np.array([7, -7, 9], np.int32)
I16 = np.array([7, -7, 9], np.int16)


def _c(value):
    return np.asarray(value, dtype=constant_dtype(value))


# (expression, operation, left, right, what DALI 2.4 gives: dtype and values)
CASES = [
    ("u8 + 1", "add", U8, _c(1), "int32", [2, 201, 4]),
    ("u8 * 2.5", "mul", U8, _c(2.5), "float32", [2.5, 500.0, 7.5]),
    ("u8 / 2", "truediv", U8, _c(2), "float32", [0.5, 100.0, 1.5]),
    ("u8 // 2", "floordiv", U8, _c(2), "int32", [0, 100, 1]),
    ("f32 / 2", "truediv", F32, _c(2), "float32", [0.75, -1.0, 1.5]),
    ("i32 // 2", "floordiv", I32, _c(2), "int32", [3, -3, 4]),
    ("u8 - u8", "sub", U8, U8, "uint8", [0, 0, 0]),
    ("u8 + f32", "add", U8, F32, "float32", [2.5, 198.0, 6.0]),
    ("u8 + i32", "add", U8, I32, "int32", [8, 193, 12]),
    ("1 - u8", "sub", _c(1), U8, "int32", [0, -199, -2]),
    ("i32 ** 2", "pow", I32, _c(2), "int32", [49, 49, 81]),
    ("u8 + i16", "add", U8, I16, "int16", [8, 193, 12]),
    ("u8 * 300", "mul", U8, _c(300), "int32", [300, 60000, 900]),
    ("i32 / i32", "truediv", I32, I32, "float32", [1.0, 1.0, 1.0]),
    ("u8 + True", "add", U8, _c(True), "uint8", [2, 201, 4]),
    ("u8 * u8", "mul", U8, U8, "uint8", [1, 64, 9]),
    ("f32 // 2", "floordiv", F32, _c(2), "float32", [0.75, -1.0, 1.5]),
    ("i32 % 3", "mod", I32, _c(3), "int32", [1, -1, 0]),
    ("f32 % 2", "mod", F32, _c(2), "float32", [1.5, -0.0, 1.0]),
    ("i32 ** -1", "pow", I32, _c(-1), "int32", [0, 0, 0]),
    ("u8 == 3", "eq", U8, _c(3), "bool", [False, False, True]),
    ("u8 != u8", "ne", U8, U8, "bool", [False, False, False]),
    ("u8 < i16", "lt", U8, I16, "bool", [True, False, True]),
    ("i32 <= f32", "le", I32, F32, "bool", [False, True, False]),
    ("f32 > 1", "gt", F32, _c(1), "bool", [True, False, True]),
    ("i16 >= i32", "ge", I16, I32, "bool", [True, True, True]),
    ("u8 & i16", "and", U8, I16, "int16", [1, 200, 1]),
    ("u8 | 2", "or", U8, _c(2), "int32", [3, 202, 3]),
    ("i32 ^ i16", "xor", I32, I16, "int32", [0, 0, 0]),
    ("u8 ^ 255", "xor", U8, _c(255), "int32", [254, 55, 252]),
]


@pytest.mark.parametrize("expression, op, left, right, dtype, values", CASES, ids=[c[0] for c in CASES])
def test_types_and_values_are_dalis(expression, op, left, right, dtype, values):
    out = apply(np, op, left, right)
    assert str(out.dtype) == dtype
    np.testing.assert_array_equal(out, np.asarray(values, dtype=dtype))


def test_unary_and_division_by_zero():
    np.testing.assert_array_equal(apply(np, "neg", U8), np.array([255, 56, 253], np.uint8))
    assert apply(np, "pos", U8) is not U8 and apply(np, "pos", U8).tolist() == U8.tolist()
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(apply(np, "truediv", I32, _c(0)), np.array([np.inf, -np.inf, np.inf], np.float32))
    for op in ("floordiv", "mod"):
        with pytest.raises(ValueError, match="integer .* by zero"):
            apply(np, op, I32, _c(0))


def test_integer_powers_with_negative_exponents_are_cs():
    bases = np.array([1, -1, -1, 2, 0, -3], np.int32)
    exponents = np.array([-5, -3, -2, -1, 3, 3], np.int32)
    np.testing.assert_array_equal(apply(np, "pow", bases, exponents), np.array([1, -1, 1, 0, 0, -27], np.int32))
    np.testing.assert_array_equal(apply(np, "pow", U8, U8), np.array([1, 0, 27], np.uint8))


def test_bitwise_operators_refuse_floats():
    with pytest.raises(TypeError, match="bitwise & takes integers or bools"):
        apply(np, "and", I32, F32)


def _feed(array):
    """DALI's external_source callback giving ``array`` as a batch of one, every iteration."""
    return lambda: [array]


def test_against_dali():
    dali = pytest.importorskip("nvidia.dali")
    arrays = {"u8": U8, "f32": F32, "i32": I32, "i16": I16}

    def run_dali(expression):
        @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def graph():
            names = {n: dali.fn.external_source(source=_feed(a), batch=True) for n, a in arrays.items()}
            return eval(expression, {}, names)

        pipe = graph()
        pipe.build()
        return np.asarray(pipe.run()[0][0])

    for expression, *_, dtype, values in CASES:
        theirs = run_dali(expression)
        assert str(theirs.dtype) == dtype, expression
        np.testing.assert_array_equal(theirs, np.asarray(values, dtype=dtype), err_msg=expression)


@rp.pipeline_def(batch_size=4, num_threads=2, seed=3)
def expressions(files, on_gpu):
    jpegs, labels = fn.readers.file(files=files, labels=[0, 1, 2, 3])
    images = fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=6)
    if on_gpu:
        images, labels = images.gpu(), labels.gpu()
    return images / 255.0, labels * 2 + 1, 1 - labels, -labels, images - images, 10 // (labels + 1), images


@pytest.mark.parametrize("on_gpu", [False, True], ids=["cpu", "gpu-stage"])
def test_expressions_in_a_pipeline(jpeg_files, on_gpu):
    with expressions(jpeg_files[:4], on_gpu) as pipe:
        scaled, odd, flipped, negated, zero, quotient, images = (out.as_cpu() for out in pipe.run())
    assert scaled.layout() == "HWC" and scaled.dtype == rp.types.FLOAT
    np.testing.assert_allclose(np.asarray(scaled), np.asarray(images) / np.float32(255.0), rtol=1e-6)
    assert np.asarray(odd).ravel().tolist() == [1, 3, 5, 7] and np.asarray(odd).dtype == np.int32
    assert np.asarray(flipped).ravel().tolist() == [1, 0, -1, -2]
    assert np.asarray(negated).ravel().tolist() == [0, -1, -2, -3]
    assert not np.asarray(zero).any() and np.asarray(zero).dtype == np.uint8
    assert np.asarray(quotient).ravel().tolist() == [10, 5, 3, 2]


@rp.pipeline_def(batch_size=4, num_threads=2, seed=3)
def comparisons(files, on_gpu):
    _, labels = fn.readers.file(files=files, labels=[0, 1, 2, 3])
    if on_gpu:
        labels = labels.gpu()
    return labels == 2, labels != 2, 1 < labels, labels <= 1, (labels & 1) == 1, labels | 4, labels ^ labels


@pytest.mark.parametrize("on_gpu", [False, True], ids=["cpu", "gpu-stage"])
def test_comparisons_and_bitwise_operators_in_a_pipeline(jpeg_files, on_gpu):
    with comparisons(jpeg_files[:4], on_gpu) as pipe:
        eq, ne, gt, le, odd, ored, xored = (np.asarray(out.as_cpu()).ravel() for out in pipe.run())
    assert eq.dtype == np.bool_ and eq.tolist() == [False, False, True, False]
    assert ne.tolist() == [True, True, False, True] and gt.tolist() == [False, False, True, True]
    assert le.tolist() == [True, True, False, False] and odd.tolist() == [False, True, False, True]
    assert ored.dtype == np.int32 and ored.tolist() == [4, 5, 6, 7] and xored.tolist() == [0, 0, 0, 0]


def test_equality_outside_a_definition_is_identity(jpeg_files):
    nodes = []

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def pipe():
        _, labels = fn.readers.file(files=jpeg_files[:2])
        nodes.extend([labels, labels + 1])
        return labels

    pipe().build()
    first, second = nodes
    assert first == first and first != second and not (first == second)
    assert second in nodes and {first: 1}[first] == 1


def test_integer_division_by_zero_names_the_sample(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def divide():
        _, labels = fn.readers.file(files=jpeg_files[:2], labels=[1, 0])
        return 10 // labels

    with divide() as pipe:
        with pytest.raises(rp.SampleError, match=r"sample 1 .*integer // by zero"):
            pipe.run()


def test_operands_must_be_numbers(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def bad():
        _, labels = fn.readers.file(files=jpeg_files[:2])
        return labels + "1"

    with pytest.raises(TypeError, match="unsupported operand"):
        bad().build()

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def none():
        _, labels = fn.readers.file(files=jpeg_files[:2])
        return labels * None

    with pytest.raises(TypeError, match="unsupported operand"):
        none().build()


@pytest.mark.parametrize(
    ("op", "constant"), [("add", None), ("sub", 7), ("mul", 0.5), ("truediv", None), ("xor", None), ("lt", None)]
)
def test_a_batch_of_one_shape_is_one_operation_with_each_samples_values(op, constant):
    """``run_batch`` (the GPU stage's call, numpy here): images and a per-sample scalar stacked, each
    sample's operands aligned to their trailing axes as alone; ragged samples go one by one."""
    from raypipe.operators.arithmetic import Arithmetic
    from raypipe.sample_contexts import SampleContexts

    rng = np.random.default_rng(8)
    images = [rng.integers(0, 256, (5, 6, 3), dtype=np.uint8) for _ in range(4)]
    scalars = [np.array(rng.integers(1, 9), dtype=np.uint8) for _ in range(4)]
    inputs = [images] if constant is not None else [images, scalars]
    arithmetic = Arithmetic("gpu", 0, op=op, constant=constant)
    ctxs = SampleContexts(0, 0, np.arange(4))
    together = arithmetic.run_batch(np, inputs, {}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == (4, 5, 6, 3)
    for i in range(4):
        alone = arithmetic.compute(np, [batch[i] for batch in inputs], {}, ctxs[i])
        assert together[i].dtype == alone.dtype
        np.testing.assert_array_equal(together[i], alone)
    ragged = [images[0], images[1][:2]]
    one_by_one = arithmetic.run_batch(np, [ragged, scalars[:2]] if constant is None else [ragged], {}, ctxs[:2])
    assert isinstance(one_by_one, list) and one_by_one[1].shape == (2, 6, 3)


def _with_tensor_constants(f, x):
    """Expressions of sample data with arrays and lists, on either side (a public script's
    ``mt * coin + (1 - coin) * np.float32([[1, 0, 0], [0, 1, 0]])`` blends transforms so)."""
    identity = np.float32([[1, 0, 0], [0, 1, 0]])
    return (
        (1 - x) * identity,
        x + np.float32([1, 2]),
        x * np.array([1, 2], np.int64),  # an int64 array is an int32 constant, as DALI makes it
        x + [1.5, 2],
        x - (3, 4),
    )


def test_arrays_and_lists_are_tensor_constants_broadcast_against_samples():
    scalars = [np.int32(0), np.int32(1), np.int32(5)]

    @rp.pipeline_def(batch_size=3, num_threads=1, seed=0)
    def pipe():
        x = fn.external_source(source=lambda: scalars)
        return (*_with_tensor_constants(fn, x), np.float32([[2, 0], [0, 2]]) * x)  # an array first too

    with pipe() as p:
        outs = p.run()
    for i, s in enumerate(scalars):
        got = [np.asarray(o.at(i)) for o in outs]
        f32, i32 = np.float32, np.int32  # DALI's types: float32 with any integer, int32 for int32 and int64
        expected = [
            ((1 - s) * np.array([[1, 0, 0], [0, 1, 0]])).astype(f32),
            (s + np.array([1, 2])).astype(f32),
            (s * np.array([1, 2])).astype(i32),
            (s + np.array([1.5, 2])).astype(f32),
            (s - np.array([3, 4])).astype(i32),
            (np.array([[2, 0], [0, 2]]) * s).astype(f32),
        ]
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def theirs():
        return _with_tensor_constants(dali.fn, dali.fn.external_source(source=lambda: scalars))

    reference = theirs()
    reference.build()
    for o, e in zip(reference.run(), outs, strict=False):
        for i in range(3):
            mine = np.asarray(e.at(i))
            np.testing.assert_array_equal(np.asarray(o[i]), mine)
            assert np.asarray(o[i]).dtype == mine.dtype
