"""Kernel launching: availability, ragged packing, output allocation, store rules, grids, a real
launch over a ragged batch (compiled on a GPU, simulated elsewhere), and kernels inside a
pipeline's GPU stage."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda
from PIL import Image

import raypipe as rp
from raypipe import fn
from raypipe.backend import to_host
from raypipe.kernels import launch
from raypipe.operator import Operator, Schema
from tests.kernels.helpers import contexts, on_device


@cuda.jit
def _label(out, offsets, sizes):
    """Every element of sample s becomes s * 1000 + its index in the sample."""
    sample = cuda.blockIdx.y
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < sizes[sample]:
        out[offsets[sample] + i] = sample * 1000 + i
        i += cuda.gridDim.x * cuda.blockDim.x


def test_available_for_numpy_follows_the_simulator_within_the_size_cap():
    assert launch.available(np, 100) == launch.simulator_enabled()
    assert not launch.available(np, launch.SIMULATOR_MAX_ELEMENTS + 1)
    assert not launch.available(math, 1)


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"} | env
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environ
    ).stdout.strip()


def test_importing_raypipe_does_not_import_numba():
    code = (
        "import sys, numpy as np, raypipe, raypipe.operators, raypipe.kernels\n"
        "from raypipe import fn\n"
        "print('numba' in sys.modules, raypipe.kernels.available(np, 10), 'numba' in sys.modules)"
    )
    assert _python(code) == "False False False"
    assert _python(code, NUMBA_ENABLE_CUDASIM="1") == "False True True"


def test_pack_ragged_samples_into_one_buffer(xp):
    images = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3), np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]
    packed = launch.pack(xp, on_device(xp, images), "op")
    assert len(packed) == 2 and packed.dtype == np.uint8
    np.testing.assert_array_equal(packed.shapes, [[2, 4, 3], [1, 2, 3]])
    np.testing.assert_array_equal(packed.offsets, [0, 24])
    np.testing.assert_array_equal(to_host(packed.data), np.concatenate([i.ravel() for i in images]))


def test_pack_a_batch_array_without_copying():
    batch = np.zeros((3, 4, 5, 3), dtype=np.float32)
    packed = launch.pack(np, batch, "op")
    assert np.shares_memory(packed.data, batch)
    np.testing.assert_array_equal(packed.offsets, [0, 60, 120])
    np.testing.assert_array_equal(packed.shapes, [[4, 5, 3]] * 3)


def test_stacked_batches_of_one_shape_only(xp):
    same = on_device(xp, [np.full((2, 3), k, np.uint8) for k in range(3)])
    stacked = launch.stacked(xp, same)
    np.testing.assert_array_equal(to_host(stacked), [np.full((2, 3), k) for k in range(3)])
    dense = launch.pack(xp, same, "op")
    assert launch.stacked(xp, dense).shape == (3, 2, 3)  # a view of the packed buffer
    ragged = on_device(xp, [np.zeros((2, 3), np.uint8), np.zeros((3, 2), np.uint8)])
    assert launch.stacked(xp, ragged) is None and launch.stacked(xp, launch.pack(xp, ragged, "op")) is None
    mixed = on_device(xp, [np.zeros(2, np.uint8), np.zeros(2, np.float32)])
    assert launch.stacked(xp, mixed) is None and launch.stacked(xp, []) is None
    array = xp.zeros((4, 2))
    assert launch.stacked(xp, array) is array


def test_pack_rejects_mixed_samples_and_empty_batches():
    with pytest.raises(ValueError, match=r"resize: sample 1 is float32 .* sample 0 is uint8"):
        launch.pack(np, [np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 3), np.float32)], "resize")
    with pytest.raises(ValueError, match="flip: expects a non-empty batch"):
        launch.pack(np, [], "flip")
    assert launch.uniform_dtype([np.zeros(1, np.uint8), np.zeros(1, np.int8)]) is None
    assert launch.uniform_dtype([np.zeros(1, np.uint8)]) == np.uint8


def test_allocate_returns_one_array_when_shapes_agree_else_views():
    flat, offsets, batch = launch.allocate(np, [(2, 3), (2, 3)], np.float32)
    assert isinstance(batch, np.ndarray) and batch.shape == (2, 2, 3) and np.shares_memory(flat, batch)
    np.testing.assert_array_equal(offsets, [0, 6])
    flat, offsets, batch = launch.allocate(np, [(2, 3), (1, 4)], np.uint8)
    assert [b.shape for b in batch] == [(2, 3), (1, 4)] and flat.size == 10
    np.testing.assert_array_equal(offsets, [0, 6])
    assert all(np.shares_memory(flat, b) for b in batch)


def test_store_rules():
    assert launch.store_rule(np.float16)[0] == launch.FLOAT_STORE
    assert launch.store_rule(np.uint8) == (launch.INT_STORE, 0.0, 255.0)
    assert launch.store_rule(np.int32) == (launch.INT_STORE, -(2.0**31), 2.0**31 - 1)
    assert launch.store_rule(np.bool_) is None
    assert launch.store_rule(np.int64) is None


def test_grid_sizes_and_limits():
    assert launch.grid(3, 10_000, simulated=True) == ((launch.SIMULATOR_MAX_BLOCKS, 3), launch.SIMULATOR_THREADS)
    assert launch.grid(1, 1, simulated=True) == ((1, 1), launch.SIMULATOR_THREADS)
    assert launch.grid(2, 1000, simulated=False) == ((4, 2), launch.GPU_THREADS)
    assert launch.grid(2, 10**9, simulated=False) == ((launch.GPU_MAX_BLOCKS, 2), launch.GPU_THREADS)
    with pytest.raises(ValueError, match="1 to 65535 samples"):
        launch.grid(0, 10, simulated=False)
    with pytest.raises(ValueError, match="1 to 65535 samples"):
        launch.grid(launch.MAX_BATCH + 1, 10, simulated=True)


def test_one_launch_covers_every_element_of_a_ragged_batch(xp):
    sizes = np.array([150, 7, 64], dtype=np.int64)  # 150 > threads * blocks under the simulator
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = xp.full(int(sizes.sum()), -1, dtype=np.int64)
    launch.launch(xp, _label, 3, int(sizes.max()), out, launch.to_device(xp, offsets), launch.to_device(xp, sizes))
    expected = np.concatenate([s * 1000 + np.arange(n) for s, n in enumerate(sizes)])
    np.testing.assert_array_equal(to_host(out), expected)


def test_to_device_keeps_numpy_arrays():
    host = np.arange(4)
    assert launch.to_device(np, host) is host


def _stage_pipeline(files: list[str], device: str):
    """decode -> python_function -> resize -> flip -> crop_mirror_normalize, all but the decoder on
    ``device``; a gpu python_function (which gets whole batches) keeps what follows it batched
    even without a GPU, and the cpu one keeps operator ids, and so random draws, the same."""

    @rp.pipeline_def(batch_size=len(files), num_threads=1, seed=3, device_id=0 if device == "gpu" else None)
    def pipe():
        encoded, _ = fn.readers.file(files=files)
        images = fn.decoders.image(encoded)
        batch_fn = (lambda batch: list(batch)) if device == "gpu" else (lambda image: image)
        images = fn.python_function(images, function=batch_fn, device=device)
        images = fn.resize(images, device=device, resize_x=12, resize_y=10)
        images = fn.flip(images, device=device, horizontal=fn.random.coin_flip())
        return fn.crop_mirror_normalize(
            images, device=device, crop=(8, 8), mirror=fn.random.coin_flip(), mean=100.0, std=50.0
        )

    with pipe() as p:
        (out,) = p.run()
    out = out.as_cpu()
    return np.stack([np.asarray(out.at(i)) for i in range(len(out))])


@pytest.mark.filterwarnings("ignore::raypipe.backend.GpuUnavailableWarning")  # device_id=0 without a GPU
def test_a_pipelines_gpu_stage_runs_the_kernels(xp, tmp_path, ragged):
    images = ragged(seed=11)
    files = [str(tmp_path / f"{i}.png") for i in range(len(images))]
    for image, path in zip(images, files, strict=True):
        Image.fromarray(image).save(path)
    assert launch.available(xp, 2 * sum(image.size for image in images))
    gpu, cpu = _stage_pipeline(files, "gpu"), _stage_pipeline(files, "cpu")
    assert gpu.shape == cpu.shape == (3, 3, 8, 8)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=2 / 50 + 1e-5)  # resize: 2 grey levels, std 50


def test_packed_batches_and_allocations_without_a_call_per_sample():
    samples = [np.arange(12, dtype=np.float32).reshape(2, 2, 3), np.arange(6, dtype=np.float32).reshape(1, 2, 3)]
    packed = launch.pack(np, samples, "test")
    assert launch.pack(np, packed, "test") is packed
    assert packed.shapes.tolist() == [[2, 2, 3], [1, 2, 3]] and packed.offsets.tolist() == [0, 12]
    assert packed.sizes.tolist() == [12, 6] and launch.elements(packed) == 18
    assert launch.uniform_dtype(packed) == np.float32 and launch.shapes_of(packed) is packed.shapes
    assert len(packed) == 2 and all(np.array_equal(a, b) for a, b in zip(packed.samples(), samples))
    flat, offsets, batch = launch.allocate(np, np.array([[2, 3], [2, 3]]), np.uint8)
    assert batch.shape == (2, 2, 3) and flat.base is batch or flat.size == 12
    flat, offsets, ragged = launch.allocate(np, np.array([[2, 3], [1, 4]]), np.uint8)
    assert isinstance(ragged, launch.Packed) and offsets.tolist() == [0, 6] and flat.size == 10
    dense = np.zeros((3, 4, 5), np.uint8)
    assert launch.shapes_of(dense).tolist() == [[4, 5]] * 3


class _Negate(Operator):
    """An operator with only ``compute``: the GPU stage runs it with the default ``run_batch``."""

    schema = Schema("test_negate")

    def compute(self, xp, inputs, args, ctx):
        return -inputs[0]


def test_the_per_sample_fallback_takes_a_packed_batch():
    samples = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(3, dtype=np.float32).reshape(1, 3)]
    out = _Negate("gpu", 0).run_batch(np, [launch.pack(np, samples, "test")], {}, contexts(2))
    assert [o.tolist() for o in out] == [(-s).tolist() for s in samples]


def test_a_ragged_gpu_output_reaches_the_user_as_one_packed_batch(xp, tmp_path, ragged, monkeypatch):
    """Decode in the Mixed stage, resize_shorter in the GPU stage (its kernels): the pipeline's
    output keeps the kernels' packed batch; samples are views of it, as close to the host as resize."""
    if xp is np:
        monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    images = ragged(seed=12)
    files = [str(tmp_path / f"{i}.png") for i in range(len(images))]
    for image, path in zip(images, files, strict=True):
        Image.fromarray(image).save(path)

    @rp.pipeline_def(batch_size=len(files), num_threads=1, seed=3, device_id=0)
    def pipe():
        encoded, _ = fn.readers.file(files=files)
        return fn.resize(fn.decoders.image(encoded, device="mixed"), resize_shorter=6)

    with pipe() as p:
        assert set(p.device_report()["operators"].values()) == {"simulator" if xp is np else "kernels"}
        (out,) = p.run()
    assert out.device == "gpu" and not out.is_dense_tensor()
    assert out.shape() == [(6, 7, 3), (9, 6, 3), (6, 16, 3)]
    for got, image in zip(out.as_cpu(), images, strict=True):
        ref = np.asarray(Image.fromarray(image).resize(got.shape[1::-1], Image.BILINEAR))
        assert np.abs(got.astype(np.int16) - ref).max() <= 2


def test_a_packed_batch_is_dense_only_when_its_equal_samples_lie_back_to_back():
    data = np.arange(64, dtype=np.uint8)
    shapes = np.array([[2, 3, 1]] * 3, np.int64)
    dense = launch.Packed(data, shapes, np.array([0, 6, 12], np.int64)).dense()
    assert np.array_equal(dense, data[:18].reshape(3, 2, 3, 1))
    gapped = launch.Packed(data, shapes, np.array([0, 16, 32], np.int64))  # aligned images, as decoded
    assert gapped.dense() is None
    assert np.array_equal(gapped[1], data[16:22].reshape(2, 3, 1))
    assert launch.Packed(data, np.array([[2, 3, 1], [3, 2, 1]]), np.array([0, 6])).dense() is None
