"""``x[...]`` on pipeline data against DALI 2.4: ints, negative indices, slices with steps and
clamped bounds, ``None`` as a whole axis, ``newaxis`` (named or not), per-sample indices and bounds;
layouts follow the kept axes. DALI-free checks of the same cases and of the errors."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types

SAMPLES = [np.arange(60, dtype=np.int32).reshape(4, 5, 3), np.arange(24, dtype=np.int32).reshape(2, 4, 3)]


def _index(x, fn, types):
    """A per-sample index from the data: 1 for every sample here (its first element is 0 or 12)."""
    return fn.cast(x[0, 0, 0] * 0 + 1, dtype=types.INT32)


# (id, build(x, fn, types, newaxis), expected per sample (None: checked against DALI only), layout)
CASES = [
    ("slices-and-index", lambda x, fn, types, na: x[1:3, :, 0], None, "HW"),
    ("negative-index", lambda x, fn, types, na: x[-1, 0], [[45, 46, 47], [12, 13, 14]], "C"),
    ("step", lambda x, fn, types, na: x[::2, 1], None, "HC"),
    ("past-the-end", lambda x, fn, types, na: x[10:, 0], None, "HC"),
    ("reversed", lambda x, fn, types, na: x[::-1, 0, 0], [[45, 30, 15, 0], [12, 0]], "H"),
    ("negative-bounds-and-none", lambda x, fn, types, na: x[-3:-1, None, 2], None, "HW"),
    ("newaxis", lambda x, fn, types, na: x[0, na, 1:3], None, ""),
    ("named-newaxis", lambda x, fn, types, na: x[na("N")], None, "NHWC"),
    ("all-indices", lambda x, fn, types, na: x[1, 1, 1], [19, 16], ""),
    ("per-sample-index", lambda x, fn, types, na: x[_index(x, fn, types), 0:1, 0], [[15], [12]], "W"),
    ("per-sample-bound", lambda x, fn, types, na: x[1, _index(x, fn, types) : 3, 0], [[18, 21], [15, 18]], "W"),
]


def _ours(build):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        data = fn.constant(idata=[0], dtype=types.INT32)  # a CPU source of two samples
        data = fn.python_function(data, function=_next_sample())
        return build(fn.reshape(data, layout="HWC"))

    with pipe() as p:
        (out,) = p.run()
        return [np.asarray(out.at(i)) for i in range(2)], out.layout()


def _next_sample():
    it = iter(SAMPLES * 100)
    return lambda _: next(it)


@pytest.mark.parametrize("case, build, expected, layout", CASES, ids=[c[0] for c in CASES])
def test_against_dali(case, build, expected, layout):
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import types as dali_types

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = dali_fn.external_source(source=lambda: SAMPLES, batch=True, layout="HWC")
        return build(x, dali_fn, dali_types, dali.newaxis)

    p = pipe()
    p.build()
    (theirs,) = p.run()
    mine, my_layout = _ours(lambda x: build(x, fn, types, rp.newaxis))
    assert my_layout == theirs.layout() == layout
    for i, my in enumerate(mine):
        their = np.asarray(theirs[i])
        assert my.dtype == their.dtype and my.shape == their.shape
        np.testing.assert_array_equal(my, their)


@pytest.mark.parametrize("case, build, expected, layout", [c for c in CASES if c[2] is not None], ids=lambda c: c)
def test_without_dali(case, build, expected, layout):
    mine, my_layout = _ours(lambda x: build(x, fn, types, rp.newaxis))
    assert [m.tolist() for m in mine] == expected and my_layout == layout


def test_shapes_as_numpy_gives_them():
    (out, _), (named, layout) = _ours(lambda x: x[1:3, :, 0]), _ours(lambda x: x[rp.newaxis("N"), ::2])
    assert [m.shape for m in out] == [(2, 5), (1, 4)]
    assert [m.shape for m in named] == [(1, 2, 5, 3), (1, 1, 4, 3)] and layout == "NHWC"
    np.testing.assert_array_equal(named[0][0], SAMPLES[0][::2])


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda x: x[5], "index 5 out of range for axis 0 of extent 4"),
        (lambda x: x[:, :, :, :], "4 subscripts for 3-D samples"),
    ],
)
def test_errors_in_the_data_name_the_sample(build, match):
    with pytest.raises(rp.SampleError, match=match):
        _ours(build)


@pytest.mark.parametrize(
    "key, match",
    [
        (slice(1, 3, 0), "step cannot be 0"),
        ((Ellipsis, 0), "Ellipsis"),
        (1.5, "indices must be ints"),
        ("a", "indices must be ints"),
        ((rp.newaxis("N"), rp.newaxis), "name every new axis or none"),
    ],
)
def test_errors_at_the_call(key, match):
    with rp.Pipeline(batch_size=1), pytest.raises(rp.ArgumentError, match=match):
        fn.constant(idata=[1, 2], dtype=types.INT32)[key]


def test_on_the_gpu_stage_without_a_gpu():
    (out, layout) = _ours(lambda x: x.gpu()[-1, 1:, ::-1])
    assert out[1].tolist() == [[17, 16, 15], [20, 19, 18], [23, 22, 21]] and layout == "WC"


def test_a_data_node_is_not_iterable():
    with rp.Pipeline(batch_size=1), pytest.raises(TypeError, match="cannot be unpacked"):
        first, second = fn.constant(idata=[1, 2], dtype=types.INT32)
