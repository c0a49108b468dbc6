"""``numba_function`` (DALI's ``nvidia.dali.plugin.numba``): ``run_fn`` compiled by Numba fills the
outputs per sample or per batch, shaped as the inputs or by ``setup_fn``; the same values as DALI's
CPU operator (where DALI is installed) and as numpy; DALI's checks of the inputs' types and
dimensions; the four ways DALI's scripts reach it; ``device="gpu"`` and a missing Numba refused
when the pipeline is defined."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.backend import GpuUnavailableWarning, gpu_available
from raypipe.plugin.numba import NumbaFunction
from raypipe.plugin.numba.experimental import NumbaFunction as ExperimentalNumbaFunction
from raypipe.plugin.numba.fn import numba_function
from raypipe.plugin.numba.fn.experimental import numba_function as experimental_numba_function

cuda = pytest.importorskip("numba.cuda")  # a global of the kernels (the simulator swaps it for its own)

IMAGES = [np.random.default_rng(k).integers(0, 256, (3 + k, 4, 3), dtype=np.uint8) for k in range(3)]


def inverted(out0, in0):
    out0[:] = 255 - in0


def swap_hw_shapes(out_shapes, in_shapes):
    for s in range(len(out_shapes[0])):
        out_shapes[0][s][0] = in_shapes[0][s][1]
        out_shapes[0][s][1] = in_shapes[0][s][0]
        out_shapes[0][s][2] = in_shapes[0][s][2]


def swap_hw(out0, in0):
    for i in range(out0.shape[0]):
        for j in range(out0.shape[1]):
            out0[i, j] = in0[j, i]


def doubled_batch(out0, in0):
    for s in range(len(out0)):
        out0[s][:] = in0[s] * 2


def sum_and_rows_shapes(out_shapes, in_shapes):
    for s in range(len(out_shapes[0])):
        out_shapes[0][s][:] = in_shapes[0][s]
        out_shapes[1][s][0] = 1


def sum_and_rows(out0, out1, in0, in1):
    out0[:] = in0 + in1
    out1[0] = in0.shape[0]


def _image_args(t, run_fn, out_type="UINT8", **extra) -> dict:
    """numba_function's arguments for one 3-D image in and one out, with DALI's ``types`` ``t``."""
    return {
        "run_fn": run_fn,
        "out_types": [getattr(t, out_type)],
        "in_types": [t.UINT8],
        "outs_ndim": [3],
        "ins_ndim": [3],
        **extra,
    }


#: case -> (inputs, numba_function arguments given DALI's ``types``, the expected outputs per sample)
CASES = {
    "per sample": (1, lambda t: _image_args(t, inverted), lambda x: [255 - x]),
    "setup_fn": (1, lambda t: _image_args(t, swap_hw, setup_fn=swap_hw_shapes), lambda x: [x.transpose(1, 0, 2)]),
    "batch_processing": (1, lambda t: _image_args(t, doubled_batch, batch_processing=True), lambda x: [x * 2]),
    "two outputs and inputs": (
        2,
        lambda t: {
            "run_fn": sum_and_rows,
            "setup_fn": sum_and_rows_shapes,
            "out_types": [t.UINT8, t.INT64],
            "in_types": [t.UINT8, t.UINT8],
            "outs_ndim": [3, 1],
            "ins_ndim": [3, 3],
        },
        lambda x: [x + x, np.array([x.shape[0]], np.int64)],
    ),
    "float output": (1, lambda t: _image_args(t, inverted, "FLOAT"), lambda x: [255 - x.astype(np.float32)]),
}


def _outputs(pipe) -> list[list[np.ndarray]]:
    outs = pipe.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.asarray(o[i]) for i in range(len(IMAGES))] for o in outs]


def _ours(inputs: int, kwargs: dict, num_threads: int = 1, call=numba_function) -> list[list[np.ndarray]]:
    @rp.pipeline_def(batch_size=len(IMAGES), num_threads=num_threads, device_id=None, seed=0)
    def pipe():
        x = fn.external_source(source=lambda: list(IMAGES), batch=True, layout="HWC")
        out = call(*[x] * inputs, **kwargs)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    with pipe() as p:
        return _outputs(p)


@pytest.mark.parametrize("case", CASES)
def test_outputs_are_numpys(case):
    inputs, kwargs, expected = CASES[case]
    got = _ours(inputs, kwargs(types))
    for s, image in enumerate(IMAGES):
        for k, want in enumerate(expected(image)):
            assert got[k][s].dtype == want.dtype
            np.testing.assert_array_equal(got[k][s], want)


@pytest.mark.parametrize("case", [c for c in CASES if c != "float output"])  # DALI 2.4 aborts the process on it
def test_outputs_are_dalis(case):
    pytest.importorskip("nvidia.dali.plugin.numba")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def
    from nvidia.dali import types as dali_types
    from nvidia.dali.plugin.numba.fn.experimental import numba_function as dali_numba_function

    inputs, kwargs, _ = CASES[case]

    @pipeline_def(batch_size=len(IMAGES), num_threads=1, device_id=None)
    def pipe():
        x = dali_fn.external_source(source=lambda: list(IMAGES), batch=True, layout="HWC")
        out = dali_numba_function(*[x] * inputs, **kwargs(dali_types))
        return tuple(out) if isinstance(out, (list, tuple)) else out

    p = pipe()
    p.build()
    theirs = _outputs(p)
    mine = _ours(inputs, kwargs(types))
    for their, my in zip(theirs, mine, strict=True):
        for t, m in zip(their, my, strict=True):
            assert m.dtype == t.dtype
            np.testing.assert_array_equal(m, t)


def test_threads_and_every_way_to_reach_it_give_the_same_outputs():
    inputs, kwargs, _ = CASES["per sample"]
    reference = _ours(inputs, kwargs(types))
    for a, b in zip(_ours(inputs, kwargs(types), num_threads=2)[0], reference[0], strict=True):
        np.testing.assert_array_equal(a, b)
    for call in (
        experimental_numba_function,
        lambda *x, **kw: NumbaFunction(**kw)(*x),
        lambda *x, **kw: ExperimentalNumbaFunction(**kw)(*x),
        lambda *x, **kw: ops.NumbaFunction(**kw)(*x),
    ):
        got = _ours(inputs, kwargs(types), call=call)
        for a, b in zip(got[0], reference[0], strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_operator_pickles_and_compiles_again_where_it_runs():
    """Pipelines travel to their actors pickled: the compiled function stays behind and is made again."""
    inputs, kwargs, _ = CASES["setup_fn"]
    from raypipe.plugin.numba.function import NumbaFunction as Operator

    op = Operator("cpu", 0, **kwargs(types))
    op.bind_inputs(1, ())
    first = op.run_batch(np, [list(IMAGES)], {}, [None] * len(IMAGES))
    copy = pickle.loads(pickle.dumps(op))
    assert copy._jitted is None
    again = copy.run_batch(np, [list(IMAGES)], {}, [None] * len(IMAGES))
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_input_of_another_type_or_rank_is_named_as_dali_checks_it():
    with pytest.raises(rp.SampleError, match=r"sample 0 .*input 0 of sample 0 is uint8, but in_types\[0\] is float32"):
        _ours(
            1,
            {"run_fn": inverted, "out_types": [types.UINT8], "in_types": [types.FLOAT], "outs_ndim": 3, "ins_ndim": 3},
        )
    setup = {"setup_fn": swap_hw_shapes, "out_types": [types.UINT8], "in_types": [types.UINT8], "outs_ndim": [3]}
    with pytest.raises(rp.SampleError, match=r"input 0 of sample 0 has 3 dimensions, but ins_ndim\[0\] is 2"):
        _ours(1, {"run_fn": swap_hw, "ins_ndim": [2], **setup})


def _bad_setup(out_shapes, in_shapes):
    out_shapes[0][0][0] = -1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "gpu", "blocks": [1, 1], "threads_per_block": [8, 8, 1]}, "blocks must be three positive ints"),
        ({"device": "gpu", "blocks": [1, 1, 1], "threads_per_block": [8, 0, 1]}, "threads_per_block must be three"),
        (
            {"device": "gpu", "blocks": [1, 1, 1], "threads_per_block": [8, 8, 1], "batch_processing": True},
            "batch_processing is not supported with device='gpu'",
        ),
        ({"blocks": [1, 1, 1]}, "blocks and threads_per_block are for device='gpu' only"),
        ({"outs_ndim": [3, 1]}, "one type and one number of dimensions per output and per input"),
        ({"out_types": [types.UINT8, types.INT64], "outs_ndim": [3, 1]}, "without setup_fn output i takes input i's"),
        ({"in_types": [types.UINT8, types.UINT8], "ins_ndim": [3, 3]}, "describe 2 inputs, got 1"),
        ({"run_fn": 3}, "run_fn must be a function"),
        ({"out_types": ["pixels"]}, "out_types must be a types"),
        ({"ins_ndim": [-1]}, "ins_ndim must be a non-negative int"),
    ],
)
def test_bad_arguments_are_refused_when_the_pipeline_is_defined(kwargs, message):
    args = _image_args(types, inverted)
    with pytest.raises(rp.ArgumentError, match=message):
        _ours(1, {**args, **kwargs})


def test_a_bad_shape_from_setup_fn_is_named():
    args = _image_args(types, inverted)
    with pytest.raises(rp.SampleError, match=r"setup_fn gave output 0 of sample 0 the shape \[-1, 0, 0\]"):
        _ours(1, {**args, "setup_fn": _bad_setup})


def inverted_kernel(out0, in0):
    """DALI's GPU example: one thread per pixel row and column."""
    y, x = cuda.grid(2)
    if y < out0.shape[0] and x < out0.shape[1]:
        for c in range(out0.shape[2]):
            out0[y, x, c] = 255 - in0[y, x, c]


def half_height_shapes(out_shapes, in_shapes):
    for s in range(len(out_shapes[0])):
        out_shapes[0][s][:] = in_shapes[0][s]
        out_shapes[0][s][0] = in_shapes[0][s][0] // 2


LAUNCH = {"device": "gpu", "blocks": [2, 1, 1], "threads_per_block": [4, 4, 1]}


def _on_gpu(kwargs: dict) -> list[np.ndarray]:
    @rp.pipeline_def(batch_size=len(IMAGES), num_threads=1, device_id=0, seed=0)
    def pipe():
        x = fn.external_source(source=lambda: list(IMAGES), batch=True, layout="HWC").gpu()
        return numba_function(x, **kwargs)

    with pipe() as p:
        (out,) = p.run()
    return [np.asarray(out.as_cpu().at(i)) for i in range(len(IMAGES))]


@pytest.mark.skipif(gpu_available(), reason="runs the GPU stage in the CUDA simulator, on a machine without a GPU")
def test_a_cuda_kernel_runs_per_sample_in_the_gpu_stage(monkeypatch):
    """``device="gpu"``: ``run_fn`` is a CUDA kernel launched per sample on ``blocks`` x ``threads_per_block``
    (here in numba's CUDA simulator), outputs shaped as the inputs or by ``setup_fn``."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    got = _on_gpu(_image_args(types, inverted_kernel, **LAUNCH))
    for image, out in zip(IMAGES, got, strict=True):
        np.testing.assert_array_equal(out, 255 - image)
    got = _on_gpu(_image_args(types, inverted_kernel, setup_fn=half_height_shapes, **LAUNCH))
    for image, out in zip(IMAGES, got, strict=True):
        np.testing.assert_array_equal(out, 255 - image[: image.shape[0] // 2])


@pytest.mark.skipif(gpu_available(), reason="the host of a machine without a GPU")
def test_a_cuda_kernel_without_a_gpu_says_why_it_cannot_run(monkeypatch):
    monkeypatch.setenv("RAYPIPE_DEVICE", "cpu")
    message = "device='gpu' runs run_fn as a CUDA kernel, and no GPU is usable here"
    with pytest.warns(GpuUnavailableWarning), pytest.raises(rp.SampleError, match=message):
        _on_gpu(_image_args(types, inverted_kernel, **LAUNCH))


def test_without_numba_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    args = _image_args(types, inverted)
    with pytest.raises(rp.ArgumentError, match=r"needs Numba .*pip install 'raypipe\[numba\]'"):
        _ours(1, args)
