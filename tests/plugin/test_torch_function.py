"""``torch_python_function`` (DALI's ``nvidia.dali.plugin.pytorch.fn``): the function gets torch
tensors, per sample by default or per batch, and its tensors come back as the operator's outputs;
DALI's three ways to reach it; on a machine without a GPU ``device="gpu"`` runs on the host with
CPU tensors; bad returns fail naming the operator."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import raypipe as rp
import raypipe.plugin.pytorch as dalitorch
from raypipe import fn, ops
from raypipe.errors import SampleError
from raypipe.plugin.pytorch import TorchPythonFunction
from raypipe.plugin.pytorch.fn import torch_python_function

IMAGES = [np.arange(k * 12, k * 12 + 24, dtype=np.uint8).reshape(2, 4, 3) for k in range(3)]


def _run(build, batch=IMAGES, layout="HWC"):
    @rp.pipeline_def(batch_size=len(batch), num_threads=1, seed=0)
    def pipe():
        return build(fn.external_source(source=lambda: list(batch), layout=layout))

    with pipe() as p:
        outs = p.run()
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [([np.asarray(o.as_cpu().at(i)) for i in range(len(batch))], o.layout()) for o in outs]


def brighten(image: torch.Tensor) -> torch.Tensor:
    """A module-level function: pickles by name, as the pipeline's actors need."""
    assert isinstance(image, torch.Tensor) and image.device.type == "cpu"
    return (image.to(torch.int32) * 2).clamp(max=255).to(torch.uint8)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_each_sample_as_a_tensor(device):
    seen = []

    def function(image):
        seen.append(type(image))
        return brighten(image)

    ((out, layout),) = _run(
        lambda x: torch_python_function(x.gpu() if device == "gpu" else x, function=function, device=device)
    )
    assert set(seen) == {torch.Tensor} and len(seen) >= len(IMAGES)  # and the next batch, prefetched
    assert layout == ""
    for got, image in zip(out, IMAGES, strict=True):
        np.testing.assert_array_equal(got, np.minimum(image.astype(int) * 2, 255).astype(np.uint8))


def test_a_batch_of_tensors_and_several_outputs():
    def function(images, scales):
        assert isinstance(images, list) and all(isinstance(t, torch.Tensor) for t in images)
        return [i.float() * s for i, s in zip(images, scales)], [i.sum(dtype=torch.int64) for i in images]

    scales = [np.float32(k + 1) for k in range(len(IMAGES))]

    def build(x):
        s = fn.external_source(source=lambda: scales)
        return dalitorch.fn.torch_python_function(
            x, s, function=function, batch_processing=True, num_outputs=2, output_layouts=["HWC", ""]
        )

    (scaled, layout), (sums, _) = _run(build)
    assert layout == "HWC"
    for k, image in enumerate(IMAGES):
        np.testing.assert_array_equal(scaled[k], image.astype(np.float32) * (k + 1))
        assert sums[k] == image.astype(np.int64).sum() and sums[k].dtype == np.int64


@pytest.mark.parametrize("train", [True, False])
def test_a_python_constant_input_is_a_tensor_per_sample(train):
    """A training flag passed as an input, as public scripts do (``function(train, images)``)."""

    def function(flags, images):
        assert all(f.dtype == torch.bool and f.shape == () for f in flags)
        return [i.flip(1) if flags[0] else i for i in images]

    ((out, _),) = _run(lambda x: torch_python_function(train, x.gpu(), function=function, batch_processing=True))
    for got, image in zip(out, IMAGES, strict=True):
        np.testing.assert_array_equal(got, image[:, ::-1] if train else image)


def test_dalis_ops_class_and_the_plugins_class_are_one():
    assert ops.TorchPythonFunction is not None
    op = ops.TorchPythonFunction(function=brighten)
    ((out, _),) = _run(lambda x: op(x))
    np.testing.assert_array_equal(out[0], brighten(torch.from_numpy(IMAGES[0].copy())).numpy())
    assert issubclass(TorchPythonFunction, rp.operator.Operator)


def test_the_operator_pickles_with_its_function():
    op = TorchPythonFunction("cpu", 0, function=brighten)
    again = pickle.loads(pickle.dumps(op))
    np.testing.assert_array_equal(again.run_sample([IMAGES[1]], {}, None), brighten(torch.from_numpy(IMAGES[1])))


def test_a_function_returning_something_else_fails_naming_the_operator():
    with pytest.raises(SampleError, match="torch_python_function: the function must return torch tensors, got list"):
        _run(lambda x: torch_python_function(x, function=lambda t: [1, 2]))
    with pytest.raises(SampleError, match="bfloat16 tensor, which has no numpy type"):
        _run(lambda x: torch_python_function(x, function=lambda t: t.to(torch.bfloat16)))
