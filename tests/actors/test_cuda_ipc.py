"""When batches go by CUDA IPC: only device arrays, only to a consumer on the same GPU."""

from __future__ import annotations

import numpy as np
import pytest

from actors.cuda_ipc import device_uuid, use_ipc
from raypipe.backend import gpu_available


def test_host_arrays_never_go_by_ipc():
    assert not use_ipc(np.zeros(3), b"gpu-a", b"gpu-a")


def test_device_uuid_is_none_without_a_usable_gpu(monkeypatch):
    monkeypatch.setenv("RAYPIPE_DEVICE", "cpu")
    assert device_uuid(0) is None
    assert not use_ipc(np.zeros(3), device_uuid(0), device_uuid(0))


def test_only_the_same_gpu_gets_ipc():
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import cupy

    array = cupy.zeros(4)
    own = device_uuid(0)
    assert use_ipc(array, own, own)
    assert not use_ipc(array, own, None) and not use_ipc(array, own, b"another-gpu")
