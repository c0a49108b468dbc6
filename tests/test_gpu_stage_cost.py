"""The GPU path's host work per batch does not grow with the batch.

A whole pipeline (random-crop decode in the Mixed stage, resize and crop_mirror_normalize in the GPU
stage) runs with ``RAYPIPE_DEVICE=simulator`` (the crops decoded on the host and uploaded, or, with
nvImageCodec, decoded in the Mixed stage into one buffer as on a GPU): its graph is staged as on a
GPU and its kernels run in numba's CUDA simulator. For batch 4 and batch 32 the GPU stage's kernel
launches and the Python function calls it makes outside the simulator are counted per batch: they
must be equal.
"""

from __future__ import annotations

import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder
from raypipe.executor import Executor
from raypipe.gpu_decode import nvimgcodec_installed
from raypipe.kernels import launch
from tests.kernels.counting import counting

pytestmark = pytest.mark.skipif(gpu_available(), reason="counts the simulated GPU stage of a machine without a GPU")


_RUN_GPU = Executor._run_gpu


def _counted_gpu_steps(monkeypatch) -> list[tuple[int, int]]:
    """A list that gets ``(launches, calls)`` of every GPU-stage step from now on."""
    counts: list[tuple[int, int]] = []

    def counted(self, *args):
        with counting() as cost:
            result = _RUN_GPU(self, *args)
        counts.append(cost.pair())
        return result

    monkeypatch.setattr(Executor, "_run_gpu", counted)
    return counts


def _count_gpu_stage(
    monkeypatch, files: list[str], batch_size: int, batches: int, conditional: bool = False
) -> list[tuple[int, int]]:
    """Per batch after the first, ``(launches, calls)`` of the GPU stage's step; ``conditional``: the
    odd samples are flipped in an ``if`` on pipeline data (both branches in every batch)."""
    counts = _counted_gpu_steps(monkeypatch)

    @rp.pipeline_def(
        batch_size=batch_size, num_threads=1, seed=3, device_id=0, prefetch_queue_depth=1, enable_conditionals=True
    )
    def pipe_def():
        if conditional:
            parity = [i % 2 for i in range(len(files))]
            jpegs, labels = fn.readers.file(files=files, labels=parity, name="Reader")
        else:
            jpegs, labels = fn.readers.file(files=files, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed")
        images = fn.resize(images, resize_x=8, resize_y=8)
        if conditional and labels == 1:
            images = fn.flip(images, horizontal=1)
        images = fn.crop_mirror_normalize(
            images, mirror=fn.random.coin_flip(), dtype=types.FLOAT, mean=[100.0] * 3, std=[50.0] * 3
        )
        return images, labels

    with pipe_def() as pipe:
        report = pipe.device_report()
        assert report["kernels"]["path"] == "simulator", report
        assert set(report["operators"].values()) == {"simulator"}, report
        assert any("_conditional" in name for name in report["operators"]) == conditional, report
        for _ in range(batches):
            (images, _) = pipe.run()
            assert images.device == "gpu" and images.as_tensor().shape == (batch_size, 3, 8, 8)
    return counts[1:batches]


@pytest.mark.parametrize(
    "decode",
    [
        "1",
        pytest.param(
            "host",
            marks=pytest.mark.skipif(not nvimgcodec_installed(), reason="needs nvImageCodec"),
        ),
    ],
    ids=["host-decoded upload", "decoded in the Mixed stage"],
)
def test_gpu_stage_host_work_is_the_same_for_batch_4_and_32(tmp_path, monkeypatch, decode):
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    monkeypatch.setenv("RAYPIPE_GPU_DECODE", decode)  # host: nvImageCodec's CPU backend in the Mixed stage
    assert launch.simulator_enabled(), "tests/conftest.py enables the CUDA simulator when no GPU is usable"
    files = make_jpeg_folder(str(tmp_path), num_classes=2, per_class=32, size=(12, 10), progress=False)
    small = _count_gpu_stage(monkeypatch, files, 4, 3)
    large = _count_gpu_stage(monkeypatch, files, 32, 2)
    launches = {c[0] for c in small + large}
    assert launches == {3}, f"resize's two passes and the fused crop_mirror_normalize, per batch: {small} {large}"
    assert {c[1] for c in small} == {c[1] for c in large}, f"Python calls per batch, batch 4: {small}, 32: {large}"


def test_an_if_on_pipeline_data_in_the_gpu_stage_costs_the_same_for_batch_4_and_32(tmp_path, monkeypatch):
    """Each branch runs once per batch on its samples (taken, merged) with a constant number of array
    operations: the flip's kernel is one more launch, and the calls do not grow with the batch."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    monkeypatch.setenv("RAYPIPE_GPU_DECODE", "1")
    files = make_jpeg_folder(str(tmp_path), num_classes=2, per_class=32, size=(12, 10), progress=False)
    small = _count_gpu_stage(monkeypatch, files, 4, 3, conditional=True)
    large = _count_gpu_stage(monkeypatch, files, 32, 2, conditional=True)
    assert {c[0] for c in small + large} == {4}, (
        f"resize's two passes, the flip and crop_mirror_normalize: {small} {large}"
    )
    assert {c[1] for c in small} == {c[1] for c in large}, f"Python calls per batch, batch 4: {small}, 32: {large}"


def test_sequences_in_the_gpu_stage_cost_the_same_for_batch_4_and_12(monkeypatch):
    """FHWC sequences of different lengths: every frame of the batch goes through resize, flip,
    color_twist and crop_mirror_normalize's kernels at once, so the launches and the Python calls
    per batch do not grow with the batch or its frames."""
    import numpy as np

    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    rng = np.random.default_rng(0)
    clips = [rng.integers(0, 256, (2 + i % 3, 8, 10, 3), dtype=np.uint8) for i in range(12)]  # simulator-sized
    counts = _counted_gpu_steps(monkeypatch)

    def per_batch(batch_size: int) -> list[tuple[int, int]]:
        counts.clear()

        @rp.pipeline_def(batch_size=batch_size, num_threads=1, seed=3, device_id=0, prefetch_queue_depth=1)
        def pipe_def():
            video = fn.external_source(source=lambda: clips[:batch_size], layout="FHWC", batch=True)
            video = fn.resize(video.gpu(), resize_x=6, resize_y=4)
            video = fn.flip(video, horizontal=fn.random.coin_flip())
            video = fn.color_twist(video, brightness=fn.random.uniform(range=(0.5, 1.5)))
            return fn.crop_mirror_normalize(video, output_layout="FCHW", mean=[100.0] * 3, std=[50.0] * 3)

        with pipe_def() as pipe:
            for _ in range(2):
                (out,) = pipe.run()
                assert out.layout() == "FCHW" and out.as_cpu()[0].shape == (clips[0].shape[0], 3, 4, 6)
        return counts[1:2]

    small, large = per_batch(4), per_batch(12)
    assert {c[0] for c in small + large} == {5}, f"resize's two passes, flip, color_twist and CMN: {small} {large}"
    assert {c[1] for c in small} == {c[1] for c in large}, f"Python calls per batch, batch 4: {small}, 12: {large}"
