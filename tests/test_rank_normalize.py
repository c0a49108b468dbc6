"""Normalize on the rank against crop_mirror_normalize on the same decoded JPEGs.

Tolerance: 1e-5 absolute for float32 (the same float32 steps; on the CPU the results are
identical, and the tests say so); float16 results are the float32 result rounded once, so they match exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder
from raypipe.errors import ArgumentError
from raypipe.rank_normalize import Normalize

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@pytest.fixture(scope="module")
def jpeg_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("normalize-jpegs")
    make_jpeg_folder(str(root), num_classes=2, per_class=3, size=(160, 120), seed=5)
    return str(root)


@rp.pipeline_def(batch_size=6, num_threads=2, seed=11)
def uint8_and_normalized(file_root, output_layout, dtype, mean, std):
    """Decoded JPEGs resized to one size: the uint8 batch a host pipeline would ship, and what
    the real operator makes of it."""
    jpegs, _ = fn.readers.file(file_root=file_root)
    images = fn.resize(fn.decoders.image(jpegs), resize_x=96, resize_y=64)
    normalized = fn.crop_mirror_normalize(images, dtype=dtype, output_layout=output_layout, mean=mean, std=std)
    return images, normalized


def run_pipeline(file_root: str, output_layout: str, dtype, mean=MEAN, std=STD) -> tuple[np.ndarray, np.ndarray]:
    with uint8_and_normalized(file_root, output_layout, dtype, mean, std) as pipe:
        images, normalized = pipe.run()
    return np.asarray(images.as_tensor()), np.asarray(normalized.as_tensor())


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_float32_matches_crop_mirror_normalize(jpeg_dir, layout):
    images, expected = run_pipeline(jpeg_dir, layout, types.FLOAT)
    assert images.dtype == np.uint8 and images.shape == (6, 64, 96, 3)
    out = Normalize(MEAN, STD, output_layout=layout)(torch.from_numpy(images))
    assert out.dtype == torch.float32 and out.device == torch.device("cpu")
    assert tuple(out.shape) == expected.shape == ((6, 3, 64, 96) if layout == "CHW" else (6, 64, 96, 3))
    assert out.is_contiguous()
    np.testing.assert_array_equal(out.numpy(), expected)  # on the CPU: the same float32 steps, bit for bit


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_chw_uint8_input_as_the_uint8_preset_ships_it(jpeg_dir, layout):
    images, expected = run_pipeline(jpeg_dir, layout, types.FLOAT)
    chw = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    out = Normalize(MEAN, STD, output_layout=layout, input_layout="CHW")(chw)
    assert tuple(out.shape) == expected.shape and out.is_contiguous()
    np.testing.assert_array_equal(out.numpy(), expected)


def test_float16_matches_crop_mirror_normalize(jpeg_dir):
    images, expected = run_pipeline(jpeg_dir, "CHW", types.FLOAT16)
    out = Normalize(MEAN, STD, dtype="float16")(torch.from_numpy(images))
    assert out.dtype == torch.float16 and expected.dtype == np.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected.astype(np.float32), rtol=0, atol=1e-5)


def test_scalar_mean_and_std_broadcast_over_channels(jpeg_dir):
    images, expected = run_pipeline(jpeg_dir, "CHW", types.FLOAT, mean=128.0, std=[64.0])
    out = Normalize(128.0, [64.0], dtype=types.FLOAT)(torch.from_numpy(images))
    np.testing.assert_allclose(out.numpy(), expected, rtol=0, atol=1e-5)


def test_apply_normalizes_only_the_chosen_output():
    images = torch.arange(2 * 4 * 5 * 3, dtype=torch.int64).remainder(256).to(torch.uint8).reshape(2, 4, 5, 3)
    labels = torch.tensor([3, 1])
    out_labels, out_images = Normalize(10.0, 2.0, output=1).apply((labels, images))
    assert out_labels is labels
    assert tuple(out_images.shape) == (2, 3, 4, 5)
    assert out_images[1, 2, 3, 4].item() == (images[1, 3, 4, 2].item() - 10.0) / 2.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mean": [], "std": 1.0}, "mean must hold one or more finite numbers"),
        ({"mean": "grey", "std": 1.0}, "mean must be a number or a list"),
        ({"mean": 0.0, "std": [1.0, float("nan")]}, "std must hold one or more finite numbers"),
        ({"mean": 0.0, "std": [1.0, 0.0, 1.0]}, "std must not contain zeros"),
        ({"mean": [1.0, 2.0], "std": [1.0, 2.0, 3.0]}, "mean has 2 values but std has 3"),
        ({"mean": 0.0, "std": 1.0, "output_layout": "NCHW"}, "output_layout must be one of"),
        ({"mean": 0.0, "std": 1.0, "input_layout": "NHWC"}, "input_layout must be one of"),
        ({"mean": 0.0, "std": 1.0, "dtype": "int8"}, "dtype must be float32 or float16"),
        ({"mean": 0.0, "std": 1.0, "dtype": "no-such-type"}, "dtype must be a types"),
        ({"mean": 0.0, "std": 1.0, "output": -1}, "output must be a non-negative int"),
        ({"mean": 0.0, "std": 1.0, "output": True}, "output must be a non-negative int"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        Normalize(**kwargs)


def test_bad_batches_are_named():
    normalize = Normalize(MEAN, STD)
    with pytest.raises(ArgumentError, match="expects a torch tensor"):
        normalize(np.zeros((1, 2, 2, 3), np.uint8))
    with pytest.raises(ArgumentError, match="expects a uint8 N x H x W x C batch"):
        normalize(torch.zeros((1, 2, 2, 3), dtype=torch.float32))
    with pytest.raises(ArgumentError, match="expects a uint8 N x H x W x C batch"):
        normalize(torch.zeros((2, 2, 3), dtype=torch.uint8))
    with pytest.raises(ArgumentError, match="mean/std have 3 values but the images have 4 channels"):
        normalize(torch.zeros((1, 2, 2, 4), dtype=torch.uint8))
    with pytest.raises(ArgumentError, match="output 2 asked for, the batch has 2 outputs"):
        Normalize(0.0, 1.0, output=2).apply((torch.zeros(1), torch.zeros(1)))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_matches_the_operator_within_tolerance(jpeg_dir):
    images, expected = run_pipeline(jpeg_dir, "CHW", types.FLOAT)
    out = Normalize(MEAN, STD)(torch.from_numpy(images).to("cuda:0"))
    assert out.device.type == "cuda" and out.dtype == torch.float32
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=0, atol=1e-5)
