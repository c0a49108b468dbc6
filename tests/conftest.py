"""Shared fixtures: a small folder of real JPEG files, generated once per session.

Without a usable GPU, numba's CUDA simulator is switched on before anything imports numba, so
that the batched kernels (raypipe/kernels) run their own code on the CPU; with a GPU the same
tests run the compiled kernels.
"""

from __future__ import annotations

import os

import pytest

from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder

if not gpu_available():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


@pytest.fixture(scope="session")
def jpeg_root(tmp_path_factory) -> str:
    """4 classes x 6 JPEGs of about 500x375 (sizes vary by up to 20%)."""
    root = tmp_path_factory.mktemp("jpegs")
    make_jpeg_folder(str(root), num_classes=4, per_class=6, seed=1)
    return str(root)


@pytest.fixture(scope="session")
def jpeg_files(jpeg_root) -> list[str]:
    """The paths of ``jpeg_root`` in reader order."""
    from raypipe.operators.readers import list_file_root

    return list_file_root(jpeg_root)[0]
