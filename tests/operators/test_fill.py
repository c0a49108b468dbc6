"""``zeros``, ``ones``, ``full`` and their ``_like`` forms, and ``copy``, against DALI 2.4's CPU
operators where installed: shapes (static and per sample), types, layouts, broadcasting and the
conversion of fill values; bad arguments and bad samples fail naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from tests.operators.outputs import assert_same

SAMPLES = [np.arange(6, dtype=np.uint8).reshape(2, 3), np.arange(4, dtype=np.uint8).reshape(1, 4)]
INT16 = [np.arange(6, dtype=np.int16).reshape(2, 3) - 3, np.arange(4, dtype=np.int16).reshape(1, 4)]
SHAPES = [np.array([2, 2], np.int32), np.array([1, 3], np.int32)]
FILLS = [np.array([1, 2], np.int16), np.array([3], np.int16)]

CASES = {
    "zeros": lambda x, f, t: f.zeros(shape=[2, 2]),
    "zeros of a scalar shape": lambda x, f, t: f.zeros(shape=3),
    "zeros, no shape": lambda x, f, t: f.zeros(),
    "zeros with a layout": lambda x, f, t: f.zeros(shape=[2, 3], layout="HW"),
    "ones as float": lambda x, f, t: f.ones(shape=[3], dtype=t.FLOAT),
    "ones as uint8": lambda x, f, t: f.ones(shape=[2, 1, 2], dtype=t.UINT8),
    "zeros_like": lambda x, f, t: f.zeros_like(x),
    "zeros_like as float": lambda x, f, t: f.zeros_like(x, dtype=t.FLOAT),
    "ones_like": lambda x, f, t: f.ones_like(x),
    "full of a vector": lambda x, f, t: f.full(np.array([1.5, 2.5], np.float32), shape=[2, 2]),
    "full of a column": lambda x, f, t: f.full(np.array([[1], [2]], np.int32), shape=[2, 3]),
    "full of a scalar": lambda x, f, t: f.full(np.array(5, np.uint8), shape=[2]),
    "full of a scalar, no shape": lambda x, f, t: f.full(np.float32(1.5)),
    "full_like of an int": lambda x, f, t: f.full_like(x, np.int32(7)),
    "full_like rounds ties away": lambda x, f, t: f.full_like(x, np.float32(2.5)),
    "full_like rounds": lambda x, f, t: f.full_like(x, np.float32(2.7)),
    "full_like saturates": lambda x, f, t: f.full_like(x, np.float32(300.7)),
    "full_like saturates below": lambda x, f, t: f.full_like(x, np.float32(-3.7)),
    "full_like to int16 rounds ties away": lambda x, f, t: f.full_like(f.cast(x, dtype=t.INT16), np.float32(-2.5)),
    "full_like of a row": lambda x, f, t: f.full_like(f.cast(x, dtype=t.FLOAT), np.float32(0.25)),
    "copy": lambda x, f, t: f.copy(x),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fills_match_dali(ours, dali, case):
    build = CASES[case]
    mine = ours(SAMPLES, lambda x: build(x, fn, types), layout="HW")
    assert_same(mine, dali(SAMPLES, build, layout="HW"))


def test_fills_give_the_values_asked_for(ours):
    """The same cases' values where DALI is absent."""
    (zeros, layout), *_ = ours(SAMPLES, lambda x: fn.zeros(shape=[2, 3], layout="HW"))
    assert layout == "HW" and all(z.dtype == np.int32 and z.shape == (2, 3) and not z.any() for z in zeros)
    ((rounded, _),) = ours(INT16, lambda x: fn.full_like(x, np.float32(-2.5)))
    assert [r.dtype for r in rounded] == [np.int16, np.int16] and rounded[1].tolist() == [[-3, -3, -3, -3]]
    ((saturated, _),) = ours(SAMPLES, lambda x: fn.full_like(x, np.float32(300.7)))
    assert saturated[0].tolist() == [[255] * 3] * 2
    ((copied, layout),) = ours(SAMPLES, lambda x: fn.copy(x), layout="HW")
    assert layout == "HW" and [c.tolist() for c in copied] == [s.tolist() for s in SAMPLES]


def test_shapes_and_fill_values_per_sample_match_dali(ours, dali):
    def build(x, f, t, shapes, fills):
        return f.full(fills, shape=shapes), f.zeros(shape=shapes, dtype=t.INT16), f.ones(shape=shapes)

    mine = ours(SAMPLES, lambda x, s, v: build(x, fn, types, s, v), per_sample=[SHAPES, FILLS])
    assert [a.tolist() for a in mine[0][0]] == [[[1, 2], [1, 2]], [[3, 3, 3]]]
    assert [a.shape for a in mine[1][0]] == [(2, 2), (1, 3)] and mine[1][0][0].dtype == np.int16
    assert_same(mine, dali(SAMPLES, build, per_sample=[SHAPES, FILLS]))


def test_copy_on_the_gpu_stage_is_the_input(ours):
    ((copied, layout),) = ours(SAMPLES, lambda x: fn.copy(x.gpu()), layout="HW")
    assert layout == "HW" and [c.tolist() for c in copied] == [s.tolist() for s in SAMPLES]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: fn.zeros(shape=[2, -1]), r"zeros: shape must hold non-negative extents, got \[2, -1\]"),
        (lambda: fn.ones(shape=[2], layout="HW"), "ones: layout 'HW' does not match the 1-D shape"),
        (lambda: fn.full(np.int32(1), shape=[2], layout="HWC"), "full: layout 'HWC' does not match"),
        (lambda: fn.zeros_like(fn.zeros(shape=[1]), dtype="text"), "zeros_like: dtype must be"),
        (lambda: fn.zeros(shape=[2], dtype=types.FLOAT, bogus=1), "zeros: .*bogus"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(build, message):
    pipe = rp.pipeline_def(build, batch_size=2, num_threads=1, device_id=None)()
    with pytest.raises(ArgumentError, match=message):
        pipe.build()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: fn.full_like(x, np.array([1, 2], np.int32)), r"full_like: a fill value of shape \[2\] does not"),
        (lambda x: fn.full(np.array([1, 2, 3], np.int32), shape=[2, 2]), r"shape \[3\] does not broadcast to"),
        (lambda x: fn.full(np.array([1, 2], np.int32)), "without shape the output is a scalar"),
    ],
)
def test_bad_samples_fail_naming_the_operator_and_sample(ours, build, message):
    with pytest.raises(rp.errors.SampleError, match=message) as failed:
        ours(SAMPLES, build)
    assert "sample 0" in str(failed.value)
