"""The host resize: torch's SIMD kernel within one grey level of Pillow (whichever pass Pillow runs
first), Pillow for boxes, one intra-op thread per CPU-stage thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PIL import Image

from raypipe.datasets import synthetic_image
from raypipe.operators import host_resize

needs_torch = pytest.mark.skipif(host_resize.backend() != "torch", reason="torch is not installed")


def _image(width: int, height: int, seed: int = 0) -> np.ndarray:
    return np.asarray(synthetic_image(np.random.default_rng(seed), width, height))


def _pillow(image: np.ndarray, width: int, height: int, box=None) -> np.ndarray:
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.BILINEAR, box=box))


@pytest.mark.parametrize("size, target", [((500, 375), (224, 224)), ((120, 100), (224, 224)), ((300, 280), (224, 160))])
def test_close_to_pillow(size, target):
    image = _image(*size)
    got = host_resize.resize(image, *target)
    diff = np.abs(got.astype(np.int16) - _pillow(image, *target))
    assert got.shape == (target[1], target[0], 3) and got.dtype == np.uint8
    assert diff.max() <= 1 and diff.mean() < 0.1


def test_both_backends_agree(monkeypatch):
    image = _image(333, 251, seed=1)
    torch_or_pillow = host_resize.resize(image, 224, 224)
    monkeypatch.setattr(host_resize, "_torch", lambda: None)
    assert host_resize.backend() == "pillow"
    pillow = host_resize.resize(image, 224, 224)
    assert np.array_equal(pillow, _pillow(image, 224, 224))
    assert np.abs(torch_or_pillow.astype(np.int16) - pillow).max() <= 1


def test_boxes_are_pillow_exactly_and_vertical_first_resizes_within_one_grey_level():
    image = _image(400, 300, seed=2)
    box = (10.5, 20, 390, 280.25)
    assert np.array_equal(host_resize.resize(image, 128, 96, box=box), _pillow(image, 128, 96, box))
    # rows shrink far more: Pillow runs the vertical pass first, torch the horizontal one
    diff = np.abs(host_resize.resize(image, 380, 60).astype(np.int16) - _pillow(image, 380, 60))
    assert diff.max() <= 1 and diff.mean() < 0.25
    four = np.dstack([image, image[:, :, :1]])
    assert host_resize.resize(four, 64, 48).shape == (48, 64, 4)


@needs_torch
def test_worker_threads_run_torch_single_threaded_and_leave_the_process_setting():
    import torch

    before = torch.get_num_threads()
    seen = []

    def work():
        host_resize.resize(_image(200, 150), 64, 64)
        seen.append(torch.get_num_threads())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [1] and torch.get_num_threads() == before


def test_strided_reversed_and_planar_views_resize_like_their_copies():
    """Planar views too: an HWC view of CHW planes, as an operator's output may be (rotate's)."""
    image = _image(301, 203, seed=3)
    planar = np.ascontiguousarray(image.transpose(2, 0, 1)).transpose(1, 2, 0)
    for view in (image[:, 17:250], image[:, ::-1], image[::-1, 5:100], planar):
        copy = np.ascontiguousarray(view)
        assert np.array_equal(host_resize.resize(view, 64, 48), host_resize.resize(copy, 64, 48))
        linear = host_resize.resize_linear(view, 64, 48)
        assert linear is None or np.array_equal(linear, host_resize.resize_linear(copy, 64, 48))


@needs_torch
def test_torch_results_are_interpolate_exactly_in_contiguous_hwc():
    import torch

    image = _image(333, 251, seed=4)
    got = host_resize.resize(image, 224, 160)
    planes = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]
    expected = torch.nn.functional.interpolate(planes, size=(160, 224), mode="bilinear", antialias=True)
    assert got.flags.c_contiguous and got.shape == (160, 224, 3)
    assert np.array_equal(got, expected[0].permute(1, 2, 0).numpy())


@needs_torch
@pytest.mark.parametrize("size, target", [((500, 375), (224, 224)), ((97, 300), (224, 224)), ((640, 480), (320, 96))])
def test_linear_without_antialiasing_is_within_a_level_of_the_matrix_products(size, target):
    """``resize(antialias=False)`` on the host: torch's two-tap uint8 kernel against the float32
    matrix products it replaces (which remain where torch is not the backend)."""
    from raypipe.kernels.filters import LINEAR
    from raypipe.operators.resample import resample

    image = _image(*size, seed=2)
    got = host_resize.resize_linear(image, *target)
    want = resample(np, image, *target, antialias=False, filters=(LINEAR, LINEAR))
    diff = np.abs(got.astype(np.int16) - want)
    assert got.shape == want.shape and diff.max() <= 1
    assert (diff > 0).mean() < (0.25 if size[0] < target[0] else 0.03), "a fifth where an axis grows"


def test_linear_without_antialiasing_needs_torch(monkeypatch):
    monkeypatch.setattr(host_resize, "_torch", lambda: None)
    assert host_resize.resize_linear(_image(50, 40), 20, 20) is None
