"""Fixtures for the kernel tests: the array module the kernels run on here, tiny ragged batches,
and real decoded JPEGs for the GPU-only tests."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest
from PIL import Image

from raypipe.backend import gpu_available
from raypipe.kernels import launch
from tests.kernels.helpers import RAGGED


@pytest.fixture
def xp() -> ModuleType:
    """cupy on a GPU machine (compiled kernels); numpy under numba's CUDA simulator elsewhere."""
    if gpu_available():
        import cupy

        return cupy
    assert launch.simulator_enabled(), "tests/conftest.py enables the CUDA simulator when no GPU is usable"
    return np


@pytest.fixture
def cp() -> ModuleType:
    """cupy, for the tests that need a real GPU (skipped without one)."""
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import cupy

    return cupy


@pytest.fixture
def ragged() -> Callable[..., list[np.ndarray]]:
    """``ragged(dtype=np.uint8, sizes=RAGGED, channels=3, seed=0)``: random host images."""

    def make(dtype=np.uint8, sizes=RAGGED, channels: int = 3, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [(rng.random((h, w, channels)) * 255).astype(dtype) for h, w in sizes]

    return make


@pytest.fixture(scope="session")
def jpeg_images(jpeg_files) -> list[np.ndarray]:
    """Four of the session's JPEGs decoded to RGB uint8 arrays (ragged, about 500x375)."""
    return [np.asarray(Image.open(path).convert("RGB")) for path in jpeg_files[:4]]
