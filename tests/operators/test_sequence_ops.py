"""``element_extract``, ``sequence_rearrange`` and ``per_frame`` against DALI 2.4's CPU build where
installed: frames, layouts and several outputs; static and per-sample orders with repeats and
drops; samples of different lengths; the ``gpu`` device gives the cpu result; indices outside a
sample, empty orders, layouts that are not sequences and scalars marked per frame fail naming the
operator. (Per-frame values taken by operators: ``tests/test_frame_args.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError
from tests.operators.outputs import assert_same

SEQUENCES = [
    np.arange(4 * 2 * 3, dtype=np.uint8).reshape(4, 2, 3),
    (np.arange(3 * 2 * 3, dtype=np.float32).reshape(3, 2, 3) + 100) / 7,
]
SEQUENCES[1] = SEQUENCES[1].astype(np.uint8)
ORDERS = [np.array([1, 0, 1], np.int32), np.array([2], np.int32)]

CASES = [
    ("extract", "FHW", lambda x, f, t: tuple(f.element_extract(x, element_map=[2, 0]))),
    ("extract-one", "FHW", lambda x, f, t: f.element_extract(x, element_map=1)),
    ("extract-no-layout", "", lambda x, f, t: tuple(f.element_extract(x, element_map=[0, 2]))),
    ("rearrange", "FHW", lambda x, f, t: f.sequence_rearrange(x, new_order=[2, 2, 0])),
    ("rearrange-no-layout", "", lambda x, f, t: f.sequence_rearrange(x, new_order=[1])),
    ("per-frame", "FHW", lambda x, f, t: f.per_frame(x)),
    ("per-frame-replace", "XHW", lambda x, f, t: f.per_frame(x, replace=True)),
]


@pytest.mark.parametrize(("name", "layout", "build"), CASES, ids=[c[0] for c in CASES])
def test_frames_and_layouts_are_dalis(ours, dali, name, layout, build):
    mine = ours(SEQUENCES, lambda x: build(x, fn, types), layout=layout)
    assert_same(mine, dali(SEQUENCES, build, layout=layout))


def test_a_per_sample_order_is_dalis(ours, dali):
    def build(x, f, t, order):
        return f.sequence_rearrange(x, new_order=order)

    mine = ours(SEQUENCES, lambda x, o: build(x, fn, types, o), layout="FHW", per_sample=[ORDERS])
    assert_same(mine, dali(SEQUENCES, build, layout="FHW", per_sample=[ORDERS]), layout="FHW")
    np.testing.assert_array_equal(mine[0][0][0], SEQUENCES[0][[1, 0, 1]])


@pytest.mark.parametrize(("name", "layout", "build"), CASES, ids=[c[0] for c in CASES])
def test_the_gpu_device_gives_the_cpu_result(ours, name, layout, build):
    cpu = ours(SEQUENCES, lambda x: build(x, fn, types), layout=layout)
    assert_same(ours(SEQUENCES, lambda x: build(x.gpu(), fn, types), layout=layout), cpu)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: fn.element_extract(x, element_map=[3]), r"element_map\[0\] = 3 is outside the sample's 3 frames"),
        (lambda x: fn.sequence_rearrange(x, new_order=[0, 3]), r"new_order\[1\] = 3 is outside the sample's 3 frames"),
        (lambda x: fn.sequence_rearrange(x, new_order=[-1]), r"new_order\[0\] = -1 is outside the sample's 4"),
    ],
)
def test_an_index_outside_a_sample_fails_naming_it(ours, build, message):
    with pytest.raises(SampleError, match=f"sample [01] .*{message}"):
        ours(SEQUENCES, build, layout="FHW")


def test_per_frame_marks_data_without_a_layout_as_frames(ours, dali):
    values = [np.arange(4, dtype=np.float32), np.arange(3, dtype=np.float32)]
    mine = ours(values, lambda x: fn.per_frame(x))
    assert_same(mine, dali(values, lambda x, f, t: f.per_frame(x)), layout="F")


def test_a_scalar_cannot_be_marked_per_frame(ours):
    with pytest.raises(SampleError, match="per_frame: a scalar cannot be marked as a sequence"):
        ours([np.float32(1.0)], lambda x: fn.per_frame(x))


def test_a_sequence_needs_frames_of_something(ours):
    with pytest.raises(SampleError, match="a sequence needs its frames and at least one more axis"):
        ours([np.arange(3, dtype=np.int32)], lambda x: fn.element_extract(x, element_map=0), layout="F")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: fn.element_extract(x, element_map=0), "layout starting with 'F', got 'HWC'"),
        (lambda x: fn.sequence_rearrange(x, new_order=[0]), "layout starting with 'F', got 'HWC'"),
        (lambda x: fn.sequence_rearrange(x, new_order=[]), "new_order must not be empty"),
        (lambda x: fn.sequence_rearrange(x), "new_order is required"),
        (lambda x: fn.element_extract(x, element_map=[]), "element_map must name at least one frame"),
        (lambda x: fn.element_extract(x, element_map=[0.5]), "element_map must be an int"),
        (lambda x: fn.per_frame(x), "per_frame: the input already has the layout 'HWC'; pass replace=True"),
        (lambda x: fn.per_frame(x, replace=1), "per_frame: replace must be a bool"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, build, message):
    with pytest.raises(ArgumentError, match=message):
        ours([np.zeros((2, 2, 1), np.uint8)], build, layout="HWC")
