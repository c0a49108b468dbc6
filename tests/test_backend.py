"""The device side of a pipeline: GPU detection, the fallback warning, the memory budget, staging."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from raypipe.backend import (
    MEMORY_ENV,
    DeviceContext,
    GpuUnavailableWarning,
    gpu_available,
    gpu_unavailable_reason,
    memory_limit_mb,
    pack_layout,
)
from raypipe.errors import ArgumentError

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs a usable CUDA GPU")


def test_forced_cpu_names_the_reason(monkeypatch):
    monkeypatch.setenv("RAYPIPE_DEVICE", "cpu")
    assert not gpu_available()
    assert gpu_unavailable_reason() == "RAYPIPE_DEVICE=cpu"


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_device_id_without_gpu_warns_once_and_runs_on_the_host():
    with pytest.warns(GpuUnavailableWarning, match=r"device_id=0 asks for a GPU.*runs on the CPU") as record:
        device = DeviceContext(0)
    assert len(record) == 1
    assert device.xp is np and not device.on_gpu and device.device_id is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not DeviceContext(None).on_gpu  # no GPU asked for: no warning


def test_memory_limit_from_argument_or_environment(monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert memory_limit_mb() is None
    monkeypatch.setenv(MEMORY_ENV, "512")
    assert memory_limit_mb() == 512.0
    assert memory_limit_mb(64) == 64.0  # the argument wins
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ArgumentError, match=f"{MEMORY_ENV} must be a positive number of MB, got 'lots'"):
        memory_limit_mb()
    monkeypatch.setenv(MEMORY_ENV, "-5")
    with pytest.raises(ArgumentError, match=MEMORY_ENV):
        DeviceContext(None)
    with pytest.raises(ArgumentError, match="memory_limit_mb must be a positive number"):
        memory_limit_mb(0)


def test_host_context_passes_data_through_and_reports_zero_memory(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "256")
    device = DeviceContext(None)
    samples = [np.arange(6).reshape(2, 3), np.arange(3)]
    (moved,) = device.upload([samples])
    assert moved == samples and all(a is b for a, b in zip(moved, samples))
    with device.stage_thread(), device.on_copy_stream(), device.on_compute_stream():
        assert device.record_copies() is None and device.record_compute() is None
    assert device.memory_stats() == {
        "device_id": None,
        "pool_used_mb": 0.0,
        "pool_total_mb": 0.0,
        "limit_mb": 256.0,
        "pinned_mb": 0.0,
        "decoder_reserved_mb": 0.0,
    }
    device.release()


def test_pack_layout_places_each_group_aligned_with_its_samples_back_to_back():
    dense = [np.zeros((2, 3), np.float32)] * 3  # 24 bytes each
    ragged = [np.zeros(5, np.uint8), np.zeros(7, np.uint8)]
    mixed = [np.zeros(2, np.uint8), np.zeros((1, 2), np.uint8)]  # ranks differ: sample by sample
    layout, total = pack_layout([ragged, dense, [], mixed])
    assert (layout[0].start, layout[0].nbytes, layout[0].dtype, layout[0].dense) == (0, 12, np.uint8, False)
    assert layout[0].shapes.tolist() == [[5], [7]]
    assert (layout[1].start, layout[1].nbytes, layout[1].dtype, layout[1].dense) == (256, 72, np.float32, True)
    assert layout[2].dtype is None and layout[2].nbytes == 0 and layout[3].dtype is None
    assert total == 328


def test_simulated_gpu_stage_gets_its_groups_packed(monkeypatch):
    """Where the GPU stage is simulated, the Mixed stage hands it batches as a GPU would: one array
    for same-shape samples, one packed buffer for the rest (each filled with one call)."""
    from raypipe.kernels.launch import Packed, simulator_enabled

    if gpu_available() or not simulator_enabled():
        pytest.skip("the simulator runs where no GPU is usable")
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    device = DeviceContext(0)
    rng = np.random.default_rng(1)
    dense = [rng.random((2, 3)).astype(np.float32) for _ in range(3)]
    ragged = [rng.integers(0, 255, (h, 4, 3), dtype=np.uint8) for h in (5, 2, 7)]
    mixed = [np.zeros(2, np.uint8), np.zeros((1, 2), np.uint8)]
    stacked, packed, kept = device.upload([dense, ragged, mixed])
    assert np.array_equal(stacked, np.stack(dense))
    assert isinstance(packed, Packed) and packed.shapes.tolist() == [[5, 4, 3], [2, 4, 3], [7, 4, 3]]
    assert all(np.array_equal(packed[i], ragged[i]) for i in range(3))
    assert kept == mixed


@pytest.mark.gpu
@needs_gpu
def test_upload_is_one_async_copy_ordered_by_an_event(monkeypatch):
    import cupy

    monkeypatch.setenv(MEMORY_ENV, "64")
    device = DeviceContext(0)
    rng = np.random.default_rng(0)
    dense = [rng.integers(0, 255, (40, 30, 3), dtype=np.uint8) for _ in range(4)]
    ragged = [rng.standard_normal((n, 3)).astype(np.float32) for n in (5, 9, 1)]
    with device.stage_thread():
        for _ in range(3):  # both staging buffers, then the first again
            with device.on_copy_stream():
                batch, parts = device.upload([dense, ragged])
                ready = device.record_copies()
            device.wait_for_copies(ready)
            with device.on_compute_stream():
                total = batch.astype(cupy.float32).sum()
            device.record_compute().synchronize()
            assert batch.shape == (4, 40, 30, 3) and np.array_equal(batch.get(), np.stack(dense))
            assert all(np.array_equal(p.get(), r) for p, r in zip(parts, ragged))
            assert float(total) == float(np.stack(dense).astype(np.float32).sum())
        stats = device.memory_stats()
        assert stats["limit_mb"] == 64.0 and 0 < stats["pool_total_mb"] <= 64.0 and stats["pinned_mb"] > 0
        assert stats["decoder_reserved_mb"] >= 0.0
        runtime = cupy.cuda.runtime
        pool = runtime.deviceGetDefaultMemPool(0)
        kept = runtime.memPoolGetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold)
        assert kept == 64 << 20, "the decoder's stream-ordered pool stays mapped up to the budget between batches"
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            cupy.empty(128 << 20, cupy.uint8)  # over this pipeline's budget
    del batch, parts
    device.release()
    assert device.memory_stats()["pinned_mb"] == 0.0


def test_simulator_mode_stages_as_on_a_gpu_on_numpy_arrays(monkeypatch):
    """``RAYPIPE_DEVICE=simulator`` (with numba's CUDA simulator on, as in this test suite without a GPU):
    a pipeline given a device_id is staged as on a GPU but runs on numpy arrays, without the warning."""
    from raypipe.backend import simulated
    from raypipe.kernels.launch import simulator_enabled

    if gpu_available() or not simulator_enabled():
        pytest.skip("the simulator runs where no GPU is usable")
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    assert simulated()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        device = DeviceContext(0)
    assert device.batched and not device.on_gpu and device.xp is np
    assert not DeviceContext(None).batched, "a CPU-only pipeline stays on the host"
    monkeypatch.setenv("RAYPIPE_DEVICE", "")
    assert not simulated()
