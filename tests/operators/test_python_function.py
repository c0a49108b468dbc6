"""``python_function`` and ``dl_tensor_python_function`` against DALI 2.4's CPU build where
installed: several outputs, ``batch_processing``, ``output_layouts`` and DALI's empty layouts, DLPack
capsules in and out; on ``gpu`` the batch by default and samples with ``batch_processing=False``;
errors that name the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError
from tests.operators.outputs import assert_same

SAMPLES = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 2), np.float32), np.full((3, 1), 7, np.float32)]


def _twice_and_sum(a):
    return a * 2, a.sum(keepdims=True)


def _batch_twice(batch):
    return [s * 2 for s in batch]


def _dl_negate(capsule):
    return (-np.from_dlpack(_Holder(capsule))).__dlpack__()


def _dl_batch_sum(capsules):
    return [np.from_dlpack(_Holder(c)).sum(keepdims=True).__dlpack__() for c in capsules]


class _Holder:
    """What numpy's ``from_dlpack`` takes: an object with ``__dlpack__`` (a test's own helper)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


CASES = [
    ("two outputs", lambda f, x: f.python_function(x, function=_twice_and_sum, num_outputs=2)),
    ("batch", lambda f, x: f.python_function(x, function=_batch_twice, batch_processing=True)),
    (
        "layouts",
        lambda f, x: f.python_function(x, function=lambda a: (a, a + 1), num_outputs=2, output_layouts=["AB", "CD"]),
    ),
    ("one layout", lambda f, x: f.python_function(x, function=lambda a: a, output_layouts="XY")),
    ("no layout", lambda f, x: f.python_function(x, function=lambda a: a)),
    ("dlpack", lambda f, x: f.dl_tensor_python_function(x, function=_dl_negate, batch_processing=False)),
    ("dlpack default", lambda f, x: f.dl_tensor_python_function(x, function=_dl_batch_sum)),
]


def _ours(build, device: str = "cpu"):
    @rp.pipeline_def(batch_size=len(SAMPLES), num_threads=2, seed=0)
    def pipe():
        x = fn.external_source(source=lambda: SAMPLES, batch=True, layout="HW")
        outs = build(fn, x.gpu() if device == "gpu" else x)
        return tuple(outs) if isinstance(outs, (list, tuple)) else outs

    with pipe() as p:
        outs = p.run()
    return [([np.asarray(o.as_cpu().at(i)) for i in range(len(SAMPLES))], o.layout()) for o in outs]


def _dalis(build):
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(
        batch_size=len(SAMPLES), num_threads=1, device_id=None, seed=0, exec_async=False, exec_pipelined=False
    )
    def pipe():
        x = dali.fn.external_source(source=lambda: SAMPLES, batch=True, layout="HW")
        outs = build(dali.fn, x)
        return tuple(outs) if isinstance(outs, (list, tuple)) else outs

    p = pipe()
    p.build()
    return [([np.asarray(o[i]) for i in range(len(SAMPLES))], o.layout()) for o in p.run()]


@pytest.mark.parametrize(("name", "build"), CASES, ids=[c[0] for c in CASES])
def test_outputs_and_layouts_are_dalis(name, build):
    assert_same(_ours(build), _dalis(build))


@pytest.mark.parametrize("batch_processing", [False, True])
def test_on_the_gpu_with_batch_processing_given_the_values_are_the_cpus(batch_processing):
    function = _batch_twice if batch_processing else _twice_and_sum
    outputs = 1 if batch_processing else 2

    def build(f, x):
        return f.python_function(x, function=function, num_outputs=outputs, batch_processing=batch_processing)

    assert_same(_ours(build, "gpu"), _ours(build))


def test_on_the_gpu_the_function_gets_the_batch_by_default():
    seen = []

    def record(batch):
        seen.append(len(batch))
        return batch

    _ours(lambda f, x: f.python_function(x, function=record), "gpu")
    assert seen and set(seen) == {len(SAMPLES)}  # every call a batch (the pipeline runs ahead)
    seen.clear()
    _ours(lambda f, x: f.python_function(x, function=record, batch_processing=False), "gpu")
    assert seen[:3] == [2, 1, 3]  # every call one sample: its rows


@pytest.mark.parametrize(
    ("function", "kwargs", "message"),
    [
        (lambda a: a, {"num_outputs": 2}, "num_outputs=2, but the function returned ndarray"),
        (lambda a: (a, a, a), {"num_outputs": 2}, "num_outputs=2, but the function returned 3 values"),
        (lambda b: b[:1], {"batch_processing": True}, "returned 1 samples for a batch of 3"),
        # what DALI refuses as a sample, named here rather than met later as a missing attribute
        (lambda a: None, {}, "output 0 of the function is None; it must be a numpy array"),
        (lambda a: [1, 2], {}, "output 0 of the function is of type list"),
        (lambda a: (a, 3), {"num_outputs": 2}, "output 1 of the function is of type int"),
        (lambda a: np.array(["x"], dtype=object), {}, "is an array of object"),
        (lambda b: [s.astype(str) for s in b], {"batch_processing": True}, "is an array of <U"),
    ],
)
def test_a_function_that_returns_the_wrong_outputs_fails_naming_the_operator(function, kwargs, message):
    with pytest.raises(SampleError, match=message):
        _ours(lambda f, x: f.python_function(x, function=function, **kwargs))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"function": 3}, "function must be callable"),
        ({"function": abs, "num_outputs": -1}, "num_outputs must be a non-negative int"),
        (
            {"function": abs, "num_outputs": 2, "output_layouts": ["A", "B", "C"]},
            "output_layouts must be one layout or one per output",
        ),
        ({"function": abs, "batch_processing": "yes"}, "batch_processing must be a bool"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(kwargs, message):
    with pytest.raises(ArgumentError, match=f"python_function: {message}"):
        _ours(lambda f, x: f.python_function(x, **kwargs))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("name", ["python_function", "dl_tensor_python_function"])
def test_a_function_without_outputs_runs_for_every_sample_for_its_side_effects(name, device):
    """``num_outputs=0`` (DALI's way to print or record from a pipeline): nothing uses the operator,
    yet it runs on every sample (or batch), and what it returns is dropped."""
    seen = []

    def record(data):
        seen.append(data)  # returns None, as DALI needs (raypipe drops any value)

    def build(f, x):
        placed = getattr(f, name)(x, function=record, num_outputs=0, batch_processing=name.startswith("dl"))
        assert placed == () or placed == []  # DALI gives []
        return x

    assert len(_ours(build, device)[0][0]) == len(SAMPLES)
    calls = len(SAMPLES) if name == "python_function" else 1
    assert len(seen) >= calls  # and the batch run ahead
    if name != "python_function" or not _dali_installed():
        return
    seen.clear()
    _dalis(build)
    assert len(seen) == calls


def _dali_installed() -> bool:
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        return False
    return True
