"""Shared fixtures: a small folder of real JPEG files, generated once per session."""

from __future__ import annotations

import pytest

from raypipe.datasets import make_jpeg_folder


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
